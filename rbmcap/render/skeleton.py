"""Skeletons on a 2-D panel: bones back to front in the renderer's colours, with floor shadows.

Colours are :func:`rbmcap.motion.skeleton_animation.bone_colour`'s (the subject's left blue, right
red), so a comparison panel reads like ``rbmcap motion render``'s GIF.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import LineCollection

from rbmcap.motion.skeleton_animation import SHADOW_COLOUR, bone_colour
from rbmcap.render.camera import Camera
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

_BONES = np.array([(p, j) for j, p in enumerate(SMPL_PARENTS) if p >= 0])
_COLOURS = np.array([bone_colour(j) for _, j in _BONES])
_HEAD = SMPL_JOINT_NAMES.index("head")
_DARK = "#333333"


class SkeletonArtist:
    """A skeleton on ``ax``: its floor shadow, the bones sorted far to near, the joints, and
    (``head``) a dot for the head, updated frame by frame."""

    def __init__(self, ax, head: bool = True) -> None:
        self.shadow = ax.add_collection(
            LineCollection([], colors=SHADOW_COLOUR, linewidths=2.2, zorder=1)
        )
        self.bones = ax.add_collection(
            LineCollection([], linewidths=2.6, zorder=3, capstyle="round")
        )
        self.joints = ax.scatter([], [], s=4, color=_DARK, zorder=3.1, linewidths=0)
        self.head = (
            ax.scatter([], [], s=90, color=_DARK, zorder=3.1, linewidths=0) if head else None
        )

    def update(self, camera: Camera, joints: np.ndarray, frame: int) -> None:
        """Show ``joints`` (24, 3) m, world frame, as ``camera`` sees them in ``frame``."""
        shadow = joints.copy()
        shadow[:, 2] = 0.0
        self.shadow.set_segments(camera.project(shadow, frame)[_BONES][..., :2])
        screen = camera.project(joints, frame)
        segs = screen[_BONES]
        order = np.argsort(segs[..., 2].mean(-1))
        self.bones.set_segments(segs[order, :, :2])
        self.bones.set_color(_COLOURS[order])
        self.joints.set_offsets(screen[:, :2])
        if self.head is not None:
            self.head.set_offsets(screen[_HEAD : _HEAD + 1, :2])
