"""Shaded mesh pictures with matplotlib (no OpenGL needed): a painter's-algorithm renderer.

Faces are projected orthographically, sorted back to front and filled with a Lambert shade of
their normal, which is enough to judge a body's shape and pose on a headless machine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

VIEWS = {
    # name: (view direction toward the camera, screen-up), in the mesh's frame
    "front": (np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])),
    "side": (np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])),
    "three_quarter": (np.array([0.6, 0.25, 0.76]), np.array([0.0, 1.0, 0.0])),
    "front_zup": (np.array([0.0, -1.0, 0.0]), np.array([0.0, 0.0, 1.0])),
    "three_quarter_zup": (np.array([0.6, -0.76, 0.25]), np.array([0.0, 0.0, 1.0])),
}


def _camera(view: str):
    toward, up = VIEWS[view]
    toward = toward / np.linalg.norm(toward)
    right = np.cross(up, toward)
    right /= np.linalg.norm(right)
    up = np.cross(toward, right)
    return right, up, toward


def facing_faces(tri: np.ndarray, light: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The painter's algorithm on screen-space triangles ``tri`` (F, 3, 3: x right, y up, z
    toward the eye): the indices of the faces turned to the eye, far to near, and each one's
    Lambert term (unit normal · ``light``, a unit vector in the same frame, clipped to [0, 1])."""
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    length = np.linalg.norm(normals, axis=1)
    keep = np.flatnonzero((normals[:, 2] > 0) & (length > 0))
    order = keep[np.argsort(tri[keep, :, 2].mean(-1))]
    return order, np.clip(normals[order] @ light / length[order], 0.0, 1.0)


def draw_mesh(ax, vertices: np.ndarray, faces: np.ndarray, view: str = "front", color=None):
    """Draw one mesh on a 2D matplotlib axis. ``vertices`` (V,3) metres, ``faces`` (F,3)."""
    v = np.asarray(vertices, dtype=np.float64)
    screen = v @ np.stack(_camera(view), axis=1)  # (V, 3): right, up, toward the eye
    light = np.array([0.35, 0.5, 0.8])
    order, lambert = facing_faces(screen[np.asarray(faces)], light / np.linalg.norm(light))
    base = np.array(color if color is not None else (0.80, 0.62, 0.50))
    colors = np.clip((0.25 + 0.75 * lambert)[:, None] * base[None], 0, 1)
    tri = screen[np.asarray(faces)[order], :2]
    ax.add_collection(PolyCollection(tri, facecolors=colors, edgecolors=colors, linewidths=0.3))
    return screen[:, :2].min(axis=0), screen[:, :2].max(axis=0)


def render_meshes(
    meshes: Sequence[tuple[np.ndarray, np.ndarray]],
    out: str | os.PathLike,
    titles: Sequence[str] | None = None,
    views: Sequence[str] | None = None,
    size: float = 4.0,
) -> Path:
    """Render meshes side by side into a PNG; returns its path. Drawn on a figure of its own
    (no pyplot), so the caller's matplotlib backend and figures are left as they are."""
    n = len(meshes)
    views = list(views or ["front"] * n)
    fig = Figure(figsize=(size * n, size * 1.25))
    axes = fig.subplots(1, n, squeeze=False)
    bounds = [draw_mesh(ax, v, f, views[i]) for i, ((v, f), ax) in enumerate(zip(meshes, axes[0]))]
    # one scale for every panel, so differences in size between the meshes stay visible
    half = max((hi - lo).max() for lo, hi in bounds) / 2 * 1.05
    for i, ax in enumerate(axes[0]):
        lo, hi = bounds[i]
        centre = (lo + hi) / 2
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)
        ax.set_aspect("equal")
        ax.axis("off")
        if titles:
            ax.set_title(titles[i])
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out
