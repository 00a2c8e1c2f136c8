"""Named example poses (axis-angle, SMPL joints) for pictures, smoke tests and demos."""

from __future__ import annotations

import numpy as np

from rbmcap.skeleton import SMPL_JOINT_NAMES

Z_UP_ROOT = np.array([np.pi / 2, 0.0, 0.0])
"""Root rotation that stands SMPL's Y-up body upright in rbmcap's Z-up world (as AMASS)."""

_STRIDE = {
    "left_hip": (-0.55, 0.0, 0.05),
    "left_knee": (0.35, 0.0, 0.0),
    "right_hip": (0.35, 0.0, -0.05),
    "right_knee": (0.9, 0.0, 0.0),
    "right_ankle": (0.25, 0.0, 0.0),
    "spine2": (0.05, 0.1, 0.0),
    "left_shoulder": (0.0, 0.3, -1.2),
    "right_shoulder": (0.0, -0.3, 1.15),
    "left_elbow": (0.0, -1.1, 0.0),
    "right_elbow": (0.0, 0.6, 0.0),
    "head": (0.15, -0.2, 0.0),
}


def stride_pose() -> np.ndarray:
    """(24, 3) a mid-stride walking pose with bent elbows and knees (root not rotated)."""
    pose = np.zeros((24, 3))
    for name, value in _STRIDE.items():
        pose[SMPL_JOINT_NAMES.index(name)] = value
    return pose
