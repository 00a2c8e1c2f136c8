"""The kinematic prior: every bone's global rotation and the pelvis position, read off the plates.

A plate strapped to a segment turns rigidly with its bone, so ``R_plate · R_restᵀ`` is the bone's
global rotation (``R_rest`` the plate's orientation on the body at rest). The network only
corrects this estimate (design §6), so the better the estimate, the less it has to learn. Per
SMPL joint:

- a joint carrying a visible plate: that plate's bone rotation;
- the pelvis (no plate in rbm14): the rigid fit (Kabsch) of the rest hip and spine joint
  positions onto the positions the thigh and chest plates give (a plate at ``p`` on a bone
  rotated by ``B`` puts its joint at ``p − B (p_rest − J_rest)``); with fewer than three such
  joints, the orientation of the nearest plated torso bone;
- another torso joint between two estimated ones (spine1, between the pelvis and the chest):
  the rotation interpolated along the chain, so a bent back is shared over the vertebrae;
- a joint without a plate whose child carries one (spine2 below the chest, the neck below the
  head, a collar before the upper arm): its parent's rotation, swung by the smallest rotation
  that points its bone at the child joint's position (a shrug or a raised arm lifts the
  collar);
- any other joint (toes, hand tips): its parent's estimate.

A plate occluded in some frames keeps the rotation relative to its parent plate that it had in
the nearest frame where it was seen (:func:`fill_gaps`), so a gap does not drop the prior to the
parent's bone; its position is not used there.

While the rotations are worked out, joint positions follow down the tree from the fitted pelvis
(rest bone vectors turned by the rotations), replaced by a plate's where it has one. The
returned pelvis position places the posed skeleton so its plated joints land where the plates
put them, on average over the visible plates (as the solver's translation start does).
Everything is in the caller's frame (the heading frame of
:class:`rbmcap.model.features.FeatureEncoder`); rest quantities are at zero betas, so the
estimate is off by the subject's shape, which the network corrects.
"""

from __future__ import annotations

import roma
import torch

from rbmcap.skeleton import SMPL_PARENTS

TORSO_CHAIN: tuple[int, ...] = (0, 3, 6, 9, 12, 15)
"""Pelvis, spine1–3, neck, head: the chain along which a missing rotation is interpolated."""

PELVIS_POINTS: tuple[int, ...] = (1, 2, 3, 6, 9)
"""Joints whose positions, where plates give them, fix the pelvis (hips, spine)."""


class KinematicPrior(torch.nn.Module):
    """Bone rotations (24) and pelvis position from plate observations.

    Args:
        marker_joints: (N,) SMPL joint carrying each plate.
        root_marker: index of the marker tree's root plate (the fallback for the pelvis).
        parents: (N,) the marker tree (parent plate, -1 for the root); with it, occluded frames
            are filled from the nearest frame where a plate was seen (see :attr:`fill`).
        plate_rest_pos: (N, 3) plate origins at rest (canonical frame, zero betas), or None: then
            the pelvis takes the nearest plated torso bone's rotation and no position is given.
        rest_joints: (24, 3) rest joints at zero betas (needed with ``plate_rest_pos``).
    """

    def __init__(
        self, marker_joints, root_marker: int, plate_rest_pos=None, rest_joints=None, parents=None
    ):
        super().__init__()
        self.parents = None if parents is None else [int(p) for p in parents]
        self.fill = self.parents is not None
        """Fill occluded frames from other frames (turned off for causal networks, which answer
        frame by frame in a stream; their recurrent state carries the past instead)."""
        joints = [int(j) for j in marker_joints]
        self.carrier = {j: m for m, j in enumerate(joints)}
        self.marker_joints = joints
        self.root_marker = int(root_marker)
        self.has_position = plate_rest_pos is not None and rest_joints is not None
        self.plan = _interpolation_plan(self.carrier)
        self.swing: dict[int, int] = {}
        self.points = [j for j in PELVIS_POINTS if j in self.carrier]
        if self.has_position:
            rest_pos = torch.as_tensor(plate_rest_pos, dtype=torch.float32)
            rj = torch.as_tensor(rest_joints, dtype=torch.float32)
            self.register_buffer("rest_joints", rj, persistent=False)
            self.register_buffer("rest_offset", rest_pos - rj[joints], persistent=False)
            point_markers = torch.tensor([self.carrier[j] for j in self.points], dtype=torch.long)
            self.register_buffer("point_markers", point_markers, persistent=False)
            for j in range(1, 24):
                kids = [c for c in range(24) if SMPL_PARENTS[c] == j and c in self.carrier]
                if j not in self.carrier and kids:
                    self.swing[j] = kids[0]

    def forward(self, bone: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor):
        """Prior for every joint.

        Args:
            bone: (..., T, N, 3, 3) each plate's bone rotation estimate (any frame).
            pos: (..., T, N, 3) plate positions in the same frame.
            valid: (..., T, N) bool.

        Returns:
            rotations (..., 24, 3, 3) global bone rotations, and the pelvis position (..., 3)
            (None without rest positions).
        """
        eye = torch.eye(3, dtype=bone.dtype, device=bone.device).expand(*bone.shape[:-3], 3, 3)
        seen_rot = valid
        if self.fill:
            bone, seen_rot = fill_gaps(bone, valid, self.parents)
        ok = seen_rot[..., None, None]
        own = {j: (bone[..., m, :, :], ok[..., m, :, :]) for j, m in self.carrier.items()}
        # the pelvis: nearest visible plate up the torso, refined by the rigid fit where possible
        root = torch.where(ok[..., self.root_marker, :, :], bone[..., self.root_marker, :, :], eye)
        for j in reversed(TORSO_CHAIN):
            if j in own:
                root = torch.where(own[j][1], own[j][0], root)
        at: list[torch.Tensor | None] = [None] * 24  # joint positions, down the tree
        where = None
        if self.has_position:
            where = pos - (bone @ self.rest_offset[..., None])[..., 0]  # each plate's joint
            root, at[0] = self._pelvis(where, valid, root)
        rots: list[torch.Tensor] = [root] + [eye] * 23
        for j in range(1, 24):
            p = SMPL_PARENTS[j]
            parent = rots[p]
            if at[p] is not None:
                at[j] = (
                    at[p]
                    + (parent @ (self.rest_joints[j] - self.rest_joints[p])[..., None])[..., 0]
                )
            if j in own:
                rots[j] = torch.where(own[j][1], own[j][0], parent)
                if where is not None:
                    seen = valid[..., self.carrier[j], None]
                    at[j] = torch.where(seen, where[..., self.carrier[j], :], at[j])
            elif j in self.swing:
                rots[j] = self._swing(j, parent, at[j], where, valid)
            elif j in self.plan:
                below, fraction = self.plan[j]
                target, seen = own[below]
                rots[j] = torch.where(seen, _towards(parent, target, fraction), parent)
            else:
                rots[j] = parent
        rots = torch.stack(rots, dim=-3)
        pelvis = None if where is None else self._place(rots, where, valid)
        return rots, pelvis

    def _place(self, rots, where, valid):
        """Pelvis position (..., 3): the mean, over visible plates, of the plate's joint position
        less that joint's offset from the pelvis in the skeleton posed by ``rots``."""
        rj = self.rest_joints
        rel: list[torch.Tensor] = [torch.zeros_like(rots[..., 0, :, 0])]
        for j in range(1, 24):
            p = SMPL_PARENTS[j]
            rel.append(rel[p] + (rots[..., p, :, :] @ (rj[j] - rj[p])[..., None])[..., 0])
        offsets = torch.stack(rel, dim=-2)[..., self.marker_joints, :]
        w = valid.to(where.dtype)[..., None]
        return ((where - offsets) * w).sum(-2) / w.sum(-2).clamp_min(1.0)

    def _swing(self, j, parent_rot, here, where, valid):
        """Parent's rotation swung so joint j's bone points at its plated child's position."""
        c = self.swing[j]
        rj = self.rest_joints
        bone = (parent_rot @ (rj[c] - rj[j])[..., None])[..., 0]
        target = where[..., self.carrier[c], :] - here
        swung = rotation_between(bone, target) @ parent_rot
        return torch.where(valid[..., self.carrier[c], None, None], swung, parent_rot)

    def _pelvis(self, where, valid, fallback):
        """Pelvis rotation and position from the point joints the plates give (see the module
        docstring)."""
        joints = where[..., self.point_markers, :]
        w = valid[..., self.point_markers].to(where.dtype)
        rest = self.rest_joints[self.points]
        rot = fallback
        if len(self.points) >= 3:
            fit, _ = roma.rigid_points_registration(
                rest.expand_as(joints), joints, weights=w + 1e-9
            )
            rot = torch.where((w.sum(-1) >= 3)[..., None, None], fit, fallback)
        # each visible point joint places the pelvis through the rest offset, rotated by `rot`
        guess = joints - (rot[..., None, :, :] @ (rest - self.rest_joints[0])[..., None])[..., 0]
        return rot, (guess * w[..., None]).sum(-2) / w.sum(-1, keepdim=True).clamp_min(1.0)


def _interpolation_plan(carrier: dict[int, int]) -> dict[int, tuple[int, float]]:
    """For each unplated torso joint after the pelvis with a plated torso joint below it:
    (that joint, fraction of the way from the parent's rotation towards it)."""
    plan = {}
    chain = list(TORSO_CHAIN)
    for i, j in enumerate(chain):
        if j == 0 or j in carrier:
            continue
        below = next((k for k in chain[i + 1 :] if k in carrier), None)
        if below is None:
            continue
        # steps from this joint down to the plated one; the parent is one step above
        steps = chain.index(below) - i
        plan[j] = (below, 1.0 / (steps + 1))
    return plan


def rotation_between(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Smallest rotation (..., 3, 3) turning direction u (..., 3) onto direction v."""
    axis = torch.linalg.cross(u, v)
    sin = axis.norm(dim=-1, keepdim=True)
    cos = (u * v).sum(-1, keepdim=True)
    angle = torch.atan2(sin, cos)
    return roma.rotvec_to_rotmat(axis / sin.clamp_min(1e-12) * angle)


def _towards(a: torch.Tensor, b: torch.Tensor, fraction: float) -> torch.Tensor:
    """The rotation a fraction of the way from a to b (..., 3, 3), along the geodesic."""
    rel = roma.rotmat_to_rotvec(a.transpose(-1, -2) @ b)
    return a @ roma.rotvec_to_rotmat(fraction * rel)


def nearest_seen(valid: torch.Tensor, causal: bool = False):
    """For (..., T) flags: the index (..., T) of the nearest frame where the flag is set (ties go
    to the earlier frame; with ``causal`` only earlier frames count) and whether there is one
    (..., T)."""
    t = valid.shape[-1]
    ar = torch.arange(t, device=valid.device).expand_as(valid)
    before = torch.cummax(torch.where(valid, ar, -1), dim=-1).values
    if causal:
        return before.clamp_min(0), before >= 0
    after = torch.where(valid, ar, t).flip(-1).cummin(dim=-1).values.flip(-1)
    use_after = (before < 0) | ((after < t) & (after - ar < ar - before))
    idx = torch.where(use_after, after, before).clamp(0, t - 1)
    return idx, valid.any(-1, keepdim=True).expand_as(valid)


def fill_gaps(bone: torch.Tensor, valid: torch.Tensor, parents: list[int], causal: bool = False):
    """Bone rotations (..., T, N, 3, 3) with occluded frames filled: a plate keeps its rotation
    relative to its parent plate from the nearest frame where both were seen (the root keeps
    its global rotation; ``causal``: the last such frame before). Returns the filled rotations
    and where they are known (..., T, N)."""
    order = _tree_order(parents)
    out = [None] * len(parents)
    known = [None] * len(parents)
    for m in order:
        p = parents[m]
        mine = valid[..., m]
        rel = bone[..., m, :, :]
        if p >= 0:
            mine = mine & valid[..., p]
            rel = bone[..., p, :, :].transpose(-1, -2) @ rel
        idx, has = nearest_seen(mine, causal)
        gathered = torch.gather(rel, -3, idx[..., None, None].expand_as(rel))
        filled = gathered if p < 0 else out[p] @ gathered
        k = has & (known[p] if p >= 0 else torch.ones_like(mine))
        out[m] = torch.where(valid[..., m, None, None], bone[..., m, :, :], filled)
        known[m] = valid[..., m] | k
    return torch.stack(out, dim=-3), torch.stack(known, dim=-1)


def _tree_order(parents: list[int]) -> list[int]:
    order, seen = [], set()
    while len(order) < len(parents):
        for m, p in enumerate(parents):
            if m not in seen and (p < 0 or p in seen):
                order.append(m)
                seen.add(m)
    return order
