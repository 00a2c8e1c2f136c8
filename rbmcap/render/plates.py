"""Plates on a 2-D panel: a small coordinate frame at each plate's observed pose.

Axis x (the plate's normal, out of the skin) is drawn orange, y green, z purple: colours apart
from the skeleton's left blue and right red. A plate missing in a frame (``valid`` False) is drawn
grey at its last observed pose, and not at all before it is first seen; point markers (no
rotation) are dots.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection

from rbmcap.render.camera import Camera
from rbmcap.render.comparison import Plates

AXIS_COLOURS = ("#f28e2b", "#3f9b3a", "#8a4fc7")
MISSING = "#a8a8a8"
AXIS_LENGTH_M = 0.07


def held_poses(plates: Plates) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """Each plate's last observed pose in every frame: pos (T, N, 3), rot (T, N, 3, 3) or None,
    and seen (T, N) bool (False before the plate's first valid frame)."""
    t = np.arange(len(plates.valid))[:, None]
    last = np.maximum.accumulate(np.where(plates.valid, t, -1), axis=0)
    src = np.maximum(last, 0)
    cols = np.arange(plates.valid.shape[1])[None, :]
    rot = None if plates.rot is None else plates.rot[src, cols]
    return plates.pos[src, cols], rot, last >= 0


class PlatesArtist:
    """The plates of ``plates`` on ``ax``, updated frame by frame."""

    def __init__(self, ax, plates: Plates) -> None:
        self.valid = plates.valid
        self.pos, self.rot, self.seen = held_poses(plates)
        self.axes = ax.add_collection(LineCollection([], linewidths=1.6, zorder=4))
        self.dots = ax.scatter([], [], s=7, zorder=4.1, linewidths=0)

    def update(self, camera: Camera, frame: int) -> None:
        """Show the plates of ``frame`` as ``camera`` sees them."""
        show = self.seen[frame]
        observed = self.valid[frame][show]
        pos = self.pos[frame][show]
        origin = camera.project(pos, frame)
        self.dots.set_offsets(origin[:, :2].reshape(-1, 2))
        self.dots.set_color(np.where(observed[:, None], 0.1, 0.66).repeat(3, axis=1))
        if self.rot is None:
            return
        tips = pos[:, None, :] + AXIS_LENGTH_M * np.swapaxes(self.rot[frame][show], -1, -2)
        segs = np.stack([np.repeat(origin[:, None], 3, axis=1), camera.project(tips, frame)], 2)
        colours = np.where(observed[:, None], np.array([AXIS_COLOURS]), MISSING)  # (n, 3)
        self.axes.set_segments(segs.reshape(-1, 2, 3)[..., :2])
        self.axes.set_color(colours.reshape(-1))
