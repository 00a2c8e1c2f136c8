"""The comparison's picture: one panel per method, side by side, at one scale and one camera.

Every panel shows the same floor square (0.5 m grid) from the same camera, which follows the
first panel's (the truth's) pelvis, so a method that drifts is seen drifting. Each panel is
titled with its method's label and that frame's MPJPE against the first panel; plates (when the
comparison has them) are drawn in every panel: they are what every method saw.

The artists are made once and updated frame by frame (clearing and redrawing axes costs more
than drawing the bodies).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display needed; must precede pyplot

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection

from rbmcap.motion.skeleton_animation import FLOOR_COLOUR, floor_grid_segments
from rbmcap.render.camera import Camera, camera_following
from rbmcap.render.comparison import Comparison
from rbmcap.render.mesh import MeshArtist
from rbmcap.render.plates import AXIS_COLOURS, MISSING, PlatesArtist
from rbmcap.render.skeleton import SkeletonArtist

PANEL_PX, HEIGHT_PX = 320, 400
"""Pixels of one panel's width and of the picture's height (multiples of 16, as video wants)."""
_DPI = 80


class ComparisonFigure:
    """A matplotlib figure that draws any frame of ``comparison`` into an RGB image.

    Args:
        comparison: what to draw.
        vertices: per panel, a mapping frame → (V, 3) posed vertices (m, world frame) of the
            frames to draw; None: skeletons only.
    """

    def __init__(self, comparison: Comparison, vertices: list | None = None) -> None:
        self.comparison = comparison
        self.camera: Camera = camera_following(comparison.panels[0].joints)
        self.vertices = vertices
        self.mpjpe = [comparison.mpjpe_mm(i) for i in range(len(comparison.panels))]
        n = len(comparison.panels)
        self.fig = plt.figure(figsize=(n * PANEL_PX / _DPI, HEIGHT_PX / _DPI), dpi=_DPI)
        self.panels = [self._panel(i, n) for i in range(n)]
        self.caption = self.fig.text(0.01, 0.015, "", fontsize=8)
        if comparison.plates is not None:
            self._legend()

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        return len(self.panels) * PANEL_PX, HEIGHT_PX

    def image(self, frame: int) -> np.ndarray:
        """(H, W, 3) uint8 picture of ``frame``."""
        cam, c = self.camera, self.comparison
        centre = cam.centres[frame]
        grid = floor_grid_segments(centre - cam.half_width, centre + cam.half_width)
        floor = cam.project(grid, frame)[..., :2]
        for i, p in enumerate(self.panels):
            p["floor"].set_segments(floor)
            if "mesh" in p:
                p["mesh"].update(cam, self.vertices[i][frame], frame)
            p["skeleton"].update(cam, c.panels[i].joints[frame], frame)
            if "plates" in p:
                p["plates"].update(cam, frame)
            p["title"].set_text(self._title(i, frame))
        self.caption.set_text(f"{c.name}   frame {frame}   {frame / c.fps:.2f} s")
        self.fig.canvas.draw()
        return np.asarray(self.fig.canvas.buffer_rgba())[..., :3].copy()

    def close(self) -> None:
        plt.close(self.fig)

    def _panel(self, i: int, n: int) -> dict:
        """Panel ``i`` of ``n``'s axes and artists."""
        ax = self.fig.add_axes((i / n, 0.05, 1 / n, 0.85))
        (x0, x1), (y0, y1) = self.camera.limits()
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        ax.set_aspect("equal", adjustable="box")
        ax.set_axis_off()
        p = {
            "floor": ax.add_collection(
                LineCollection([], colors=FLOOR_COLOUR, linewidths=0.8, zorder=0)
            )
        }
        if self.vertices is not None:
            p["mesh"] = MeshArtist(ax, self.comparison.body.faces.cpu().numpy())
        p["skeleton"] = SkeletonArtist(ax, head=self.vertices is None)
        if self.comparison.plates is not None:
            p["plates"] = PlatesArtist(ax, self.comparison.plates)
        p["title"] = self.fig.text((i + 0.5) / n, 0.985, "", ha="center", va="top", fontsize=10)
        return p

    def _title(self, i: int, frame: int) -> str:
        label = self.comparison.panels[i].label
        if i == 0:
            return f"{label}\n " if self.comparison.plates is not None else f"{label}\nreference"
        against = "" if self.comparison.plates is not None else " vs the first"
        return f"{label}\nMPJPE {self.mpjpe[i][frame]:.0f} mm{against}"

    def _legend(self) -> None:
        """The plates' colours, bottom right (drawn once: it never changes)."""
        legend = [
            ("plates:", "#555555"),
            *zip("xyz", AXIS_COLOURS, strict=True),
            ("grey: missing (last seen)", MISSING),
        ]
        renderer = self.fig.canvas.get_renderer()
        right = 0.99
        for word, colour in reversed(legend):
            text = self.fig.text(right, 0.015, word, ha="right", fontsize=8, color=colour)
            width = text.get_window_extent(renderer).width
            right -= (width + 5) / self.size[0]
