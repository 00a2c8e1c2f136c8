"""Joint groups for per-region errors (SMPL joint order, docs/metrics.md#joint-groups).

The four regions partition the 24 joints, so a frame's MPJPE is the joint-count-weighted mean of
its region errors. "Hands" are the wrists and hand joints, the part sparse trackers find hardest;
"upper body" is the rest above the pelvis (spine, neck, head, collars, shoulders, elbows).
"""

from __future__ import annotations

from types import MappingProxyType

from rbmcap.skeleton import SMPL_JOINT_NAMES

_REGION_NAMES = {
    "root": ("pelvis",),
    "upper_body": (
        "spine1",
        "spine2",
        "spine3",
        "neck",
        "left_collar",
        "right_collar",
        "head",
        "left_shoulder",
        "right_shoulder",
        "left_elbow",
        "right_elbow",
    ),
    "lower_body": (
        "left_hip",
        "right_hip",
        "left_knee",
        "right_knee",
        "left_ankle",
        "right_ankle",
        "left_foot",
        "right_foot",
    ),
    "hands": ("left_wrist", "right_wrist", "left_hand", "right_hand"),
}

JOINT_REGIONS: MappingProxyType[str, tuple[int, ...]] = MappingProxyType(
    {
        region: tuple(sorted(SMPL_JOINT_NAMES.index(n) for n in names))
        for region, names in _REGION_NAMES.items()
    }
)
"""Region name → SMPL joint indices (``root``, ``upper_body``, ``lower_body``, ``hands``)."""

BODY_JOINTS: tuple[int, ...] = tuple(range(1, 24))
"""Joints whose local rotations make the body pose (all but the global orientation, joint 0)."""
