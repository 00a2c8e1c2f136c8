"""The SMPL and SMPL-H kinematic trees: joint names and parents (forward kinematics on them is
:func:`rbmcap.geometry.forward_kinematics`).

Frames: SMPL's canonical body frame is Y up, facing +Z, the subject's left on +X. Local joint
rotations are parent-from-child; joint 0 (pelvis) carries the global orientation.
"""

from __future__ import annotations

SMPL_JOINT_NAMES: tuple[str, ...] = (
    "pelvis",
    "left_hip",
    "right_hip",
    "spine1",
    "left_knee",
    "right_knee",
    "spine2",
    "left_ankle",
    "right_ankle",
    "spine3",
    "left_foot",
    "right_foot",
    "neck",
    "left_collar",
    "right_collar",
    "head",
    "left_shoulder",
    "right_shoulder",
    "left_elbow",
    "right_elbow",
    "left_wrist",
    "right_wrist",
    "left_hand",
    "right_hand",
)
SMPL_PARENTS: tuple[int, ...] = (
    -1,
    0,
    0,
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    9,
    9,
    12,
    13,
    14,
    16,
    17,
    18,
    19,
    20,
    21,
)
NUM_SMPL_JOINTS = 24

_FINGERS = ("index", "middle", "pinky", "ring", "thumb")
SMPLH_JOINT_NAMES: tuple[str, ...] = SMPL_JOINT_NAMES[:22] + tuple(
    f"{side}_{finger}{k}" for side in ("left", "right") for finger in _FINGERS for k in (1, 2, 3)
)
"""SMPL-H's 52 joints: the 22 body joints, then 15 left and 15 right finger joints."""

SMPLH_PARENTS: tuple[int, ...] = SMPL_PARENTS[:22] + tuple(
    (wrist if k == 0 else 22 + 15 * s + 3 * f + k - 1)
    for s, wrist in ((0, 20), (1, 21))
    for f in range(5)
    for k in range(3)
)
SMPLH_TO_SMPL: tuple[int, ...] = (*range(22), 22, 37)
"""SMPL-H joint index for each of SMPL's 24 joints (SMPL's hands are the first index joints)."""
