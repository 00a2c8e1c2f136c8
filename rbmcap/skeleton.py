"""The SMPL kinematic tree and forward kinematics as pure, batched functions.

Frames: SMPL's canonical body frame is Y up, facing +Z, the subject's left on +X. Local joint
rotations are parent-from-child; joint 0 (pelvis) carries the global orientation.
"""

from __future__ import annotations

import torch

SMPL_JOINT_NAMES: tuple[str, ...] = (
    "pelvis", "left_hip", "right_hip", "spine1", "left_knee", "right_knee", "spine2",
    "left_ankle", "right_ankle", "spine3", "left_foot", "right_foot", "neck", "left_collar",
    "right_collar", "head", "left_shoulder", "right_shoulder", "left_elbow", "right_elbow",
    "left_wrist", "right_wrist", "left_hand", "right_hand",
)  # fmt: skip
SMPL_PARENTS: tuple[int, ...] = (
    -1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19, 20, 21,
)  # fmt: skip
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
SMPLH_TO_SMPL: tuple[int, ...] = tuple(range(22)) + (22, 37)
"""SMPL-H joint index for each of SMPL's 24 joints (SMPL's hands are the first index joints)."""


def tree_levels(parents: tuple[int, ...] | list[int]) -> list[list[int]]:
    """Group joints by depth in the tree so forward kinematics can run level by level."""
    depth = [0] * len(parents)
    for j, p in enumerate(parents):
        if p >= 0:
            depth[j] = depth[p] + 1
    levels: list[list[int]] = [[] for _ in range(max(depth) + 1)]
    for j, d in enumerate(depth):
        levels[d].append(j)
    return levels


def forward_kinematics(
    local_rotmats: torch.Tensor,
    rest_joints: torch.Tensor,
    parents: tuple[int, ...] | list[int] = SMPL_PARENTS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pose a kinematic tree.

    Args:
        local_rotmats: (..., J, 3, 3) parent-from-child rotations; joint 0's is global.
        rest_joints: (..., J, 3) joint positions in the rest pose (metres), broadcastable.
        parents: parent index per joint, -1 for the root; parents precede children.

    Returns:
        global_rotmats (..., J, 3, 3) world-from-joint rotations and joints (..., J, 3), the posed
        joint positions with the root joint kept at its rest position (no translation applied).
    """
    batch = torch.broadcast_shapes(local_rotmats.shape[:-3], rest_joints.shape[:-2])
    local_rotmats = local_rotmats.expand(*batch, *local_rotmats.shape[-3:])
    rest_joints = rest_joints.expand(*batch, *rest_joints.shape[-2:])
    num = len(parents)
    parent_idx = torch.tensor([max(p, 0) for p in parents], device=rest_joints.device)
    offsets = rest_joints - rest_joints[..., parent_idx, :]
    offsets[..., 0, :] = rest_joints[..., 0, :]
    rots = [None] * num
    pos = [None] * num
    for level in tree_levels(parents):
        if parents[level[0]] < 0:
            for j in level:
                rots[j] = local_rotmats[..., j, :, :]
                pos[j] = offsets[..., j, :]
            continue
        idx = torch.tensor(level, device=rest_joints.device)
        par = [parents[j] for j in level]
        prot = torch.stack([rots[p] for p in par], dim=-3)
        ppos = torch.stack([pos[p] for p in par], dim=-2)
        grot = prot @ local_rotmats[..., idx, :, :]
        gpos = ppos + (prot @ offsets[..., idx, :, None])[..., 0]
        for k, j in enumerate(level):
            rots[j] = grot[..., k, :, :]
            pos[j] = gpos[..., k, :]
    return torch.stack(rots, dim=-3), torch.stack(pos, dim=-2)
