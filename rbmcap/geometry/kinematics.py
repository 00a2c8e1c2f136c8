"""Kinematic trees: forward kinematics and global ↔ local rotations, pure and batched.

Local joint rotations are parent-from-child; the root's (joint 0, the pelvis in SMPL) is its
global rotation. ``parents`` lists each joint's parent, -1 for the root; parents precede children.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import NamedTuple

import torch

from rbmcap.skeleton import SMPL_PARENTS

SMALL_BATCH = 128
"""Poses at most this many are posed depth by depth (:func:`posed_joints`); beyond it, joint by
joint (on 1 thread the two cost the same near 256 poses of 24 joints)."""


def local_to_global(
    local_rotmats: torch.Tensor, parents: Sequence[int] = SMPL_PARENTS
) -> torch.Tensor:
    """Global (world-from-joint) rotations from local ones: G_j = G_parent(j) R_j.

    Args:
        local_rotmats: (..., J, 3, 3) parent-from-child rotations; joint 0's is global.
        parents: (J,) parent per joint.

    Returns:
        (..., J, 3, 3) global rotations.
    """
    rots: list[torch.Tensor] = []
    for j, p in enumerate(parents):
        r = local_rotmats[..., j, :, :]
        rots.append(r if p < 0 else rots[p] @ r)
    return torch.stack(rots, dim=-3)


def global_to_local(
    global_rotmats: torch.Tensor, parents: Sequence[int] = SMPL_PARENTS
) -> torch.Tensor:
    """Local (parent-from-child) rotations from global ones: R_j = G_parent(j)ᵀ G_j; a root
    keeps its global rotation.

    Args:
        global_rotmats: (..., J, 3, 3) world-from-joint rotations.
        parents: (J,) parent per joint.

    Returns:
        (..., J, 3, 3) local rotations.
    """
    idx = torch.tensor([max(p, 0) for p in parents], device=global_rotmats.device)
    local = global_rotmats[..., idx, :, :].transpose(-1, -2) @ global_rotmats
    roots = torch.tensor([p < 0 for p in parents], device=global_rotmats.device)
    return torch.where(roots[:, None, None], global_rotmats, local)


def forward_kinematics(
    local_rotmats: torch.Tensor,
    rest_joints: torch.Tensor,
    parents: Sequence[int] = SMPL_PARENTS,
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
    rots = local_to_global(local_rotmats, parents)
    return rots, posed_joints(rots, rest_joints, parents)


def posed_joints(
    global_rotmats: torch.Tensor,
    rest_joints: torch.Tensor,
    parents: Sequence[int] = SMPL_PARENTS,
) -> torch.Tensor:
    """Joint positions of a skeleton posed by its global rotations: each rest bone vector
    (child minus parent at rest) turned by the parent's global rotation, summed down the tree.

    Args:
        global_rotmats: (..., J, 3, 3) world-from-joint rotations.
        rest_joints: (..., J, 3) rest joint positions (metres), broadcastable.
        parents: (J,) parent per joint.

    Returns:
        (..., J, 3) posed joints, the root kept at its rest position.
    """
    batch = torch.broadcast_shapes(global_rotmats.shape[:-3], rest_joints.shape[:-2])
    if math.prod(batch) <= SMALL_BATCH:
        return _posed_by_depth(global_rotmats, rest_joints, tuple(parents))
    parent_idx = [max(p, 0) for p in parents]
    offsets = rest_joints - rest_joints[..., parent_idx, :]
    # Joint by joint: J small batched matmuls beat level-by-level gathers and stacks.
    pos: list[torch.Tensor] = []
    for j, p in enumerate(parents):
        if p < 0:
            pos.append(rest_joints[..., j, :].expand(*batch, 3))
        else:
            turned = (global_rotmats[..., p, :, :] @ offsets[..., j, :, None])[..., 0]
            pos.append(pos[p] + turned)
    return torch.stack(pos, dim=-2)


def _posed_by_depth(global_rotmats, rest_joints, parents: tuple[int, ...]) -> torch.Tensor:
    """:func:`posed_joints` for few poses, where per-call overhead dominates: every bone turned
    in one product, then the joints of each depth placed together (the same sums, in the same
    order, as joint by joint)."""
    tree = _depth_order(parents, global_rotmats.device)
    turned = (
        global_rotmats[..., tree.parent, :, :]
        @ (rest_joints[..., tree.order, :] - rest_joints[..., tree.parent, :])[..., None]
    )[..., 0]
    batch = torch.broadcast_shapes(global_rotmats.shape[:-3], rest_joints.shape[:-2])
    pos = [rest_joints[..., tree.order[: tree.ends[0]], :].expand(*batch, tree.ends[0], 3)]
    for d in range(1, len(tree.ends)):
        up = pos[-1][..., tree.ups[d - 1], :]
        pos.append(up + turned[..., tree.ends[d - 1] : tree.ends[d], :])
    return torch.cat(pos, dim=-2)[..., tree.inverse, :]


class _DepthOrder(NamedTuple):
    order: torch.Tensor  # (J,) joints by depth (roots first)
    parent: torch.Tensor  # (J,) their parents (a root: itself)
    ends: list[int]  # where each depth ends in ``order``
    ups: list[torch.Tensor]  # per depth ≥ 1, each joint's parent within the depth above
    inverse: torch.Tensor  # (J,) position of each joint in ``order``


@functools.cache
def _depth_order(parents: tuple[int, ...], device: torch.device) -> _DepthOrder:
    """The tree by depth, as index tensors (made outside inference mode: cached tensors must
    serve autograd later)."""
    depth: list[int] = []
    for p in parents:
        depth.append(0 if p < 0 else depth[p] + 1)
    by_depth = [[j for j in range(len(parents)) if depth[j] == d] for d in range(max(depth) + 1)]
    order = [j for js in by_depth for j in js]
    with torch.inference_mode(False):
        long = functools.partial(torch.tensor, dtype=torch.long, device=device)
        return _DepthOrder(
            order=long(order),
            parent=long([parents[j] if parents[j] >= 0 else j for j in order]),
            ends=list(itertools.accumulate(len(js) for js in by_depth)),
            ups=[
                long([by_depth[d - 1].index(parents[j]) for j in by_depth[d]])
                for d in range(1, len(by_depth))
            ],
            inverse=long([order.index(j) for j in range(len(parents))]),
        )
