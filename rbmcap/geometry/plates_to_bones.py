"""Plates → bones: every bone's global rotation and the pelvis position, read off rigid bodies.

A plate strapped to a segment turns rigidly with its bone, so ``R_plate · R_restᵀ`` is the bone's
global rotation (``R_rest`` the plate's orientation on the body at rest). This one estimator is
the network's kinematic prior (design §6: the network only corrects it) and the solver's start
(:func:`rbmcap.baseline.init.kinematic_rotations`, which first merges each segment's markers into
one rigid body). Per SMPL joint:

- a joint carrying a visible plate: that plate's bone rotation;
- the pelvis, when no plate is on it (none is in the rbm sets): the rigid fit (Kabsch) of the rest
  hip and spine joint positions onto the positions the thigh and chest plates give (a plate at
  ``p`` on a bone rotated by ``B`` puts its joint at ``p − B (p_rest − J_rest)``); with fewer
  than three such joints, the orientation of the nearest plated torso bone, else the fallback;
- another torso joint between two estimated ones (spine1, between the pelvis and the chest):
  the rotation interpolated along the chain, so a bent back is shared over the vertebrae;
- a joint without a plate whose child carries one (spine2 below the chest, the neck below the
  head, a collar before the upper arm): its parent's rotation, swung by the smallest rotation
  that points its bone at the child joint's position (a shrug or a raised arm lifts the
  collar);
- any other joint (toes, hand tips): its parent's estimate.

A plate occluded in some frames keeps the rotation relative to its parent plate that it had in
the nearest frame where it was seen (:func:`rbmcap.geometry.gaps.fill_gaps`), so a gap does not
drop the estimate to the parent's bone; its position is not used there.

While the rotations are worked out, joint positions follow down the tree from the fitted pelvis
(rest bone vectors turned by the rotations), replaced by a plate's where it has one. The
returned pelvis position places the posed skeleton so its plated joints land where the plates
put them, on average over the visible plates. Everything is in the caller's frame; rest
quantities are whatever body the caller gives (the network uses zero betas, so its estimate is
off by the subject's shape, which the network corrects).
"""

from __future__ import annotations

import torch

from rbmcap.geometry.gaps import fill_gaps
from rbmcap.geometry.kinematics import posed_joints
from rbmcap.geometry.registration import points_rotation
from rbmcap.geometry.rotations import rotation_between, rotmat_slerp
from rbmcap.skeleton import SMPL_PARENTS

TORSO_CHAIN: tuple[int, ...] = (0, 3, 6, 9, 12, 15)
"""Pelvis, spine1–3, neck, head: the chain along which a missing rotation is interpolated, and
whose nearest plated bone stands in for the pelvis's orientation."""

PELVIS_POINTS: tuple[int, ...] = (1, 2, 3, 6, 9)
"""Joints whose positions, where plates give them, fix the pelvis (hips, spine)."""


class KinematicPrior(torch.nn.Module):
    """Bone rotations (24) and pelvis position from plate observations.

    Args:
        marker_joints: (N,) SMPL joint carrying each plate (at most one plate per joint).
        root_marker: index of the marker tree's root plate (the default fallback for the pelvis).
        plate_rest_pos: (N, 3) plate origins at rest, or None: then the pelvis takes the nearest
            plated torso bone's rotation and no position is given.
        rest_joints: (24, 3) rest joints (needed with ``plate_rest_pos``).
        parents: (N,) the marker tree (parent plate, -1 for the root); with it, occluded frames
            are filled from the nearest frame where a plate was seen (see :attr:`fill`).
        dtype: of the rest quantities (the observations' dtype).
    """

    def __init__(
        self,
        marker_joints,
        root_marker: int,
        plate_rest_pos=None,
        rest_joints=None,
        parents=None,
        dtype: torch.dtype = torch.float32,
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
        # a plate on the pelvis gives it directly; else the hip and spine joints fix it
        pelvis_plated = 0 in self.carrier
        self.points = [] if pelvis_plated else [j for j in PELVIS_POINTS if j in self.carrier]
        if self.has_position:
            rest_pos = torch.as_tensor(plate_rest_pos, dtype=dtype)
            rj = torch.as_tensor(rest_joints, dtype=dtype)
            self.register_buffer("rest_joints", rj, persistent=False)
            self.register_buffer("rest_offset", rest_pos - rj[joints], persistent=False)
            point_markers = torch.tensor([self.carrier[j] for j in self.points], dtype=torch.long)
            self.register_buffer("point_markers", point_markers, persistent=False)
            for j in range(1, 24):
                kids = [c for c in range(24) if SMPL_PARENTS[c] == j and c in self.carrier]
                if j not in self.carrier and kids:
                    self.swing[j] = kids[0]

    def forward(
        self,
        bone: torch.Tensor,
        pos: torch.Tensor,
        valid: torch.Tensor,
        fallback: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Estimate for every joint.

        Args:
            bone: (..., T, N, 3, 3) each plate's bone rotation estimate (any frame).
            pos: (..., T, N, 3) plate positions in the same frame (metres).
            valid: (..., T, N) bool.
            fallback: (..., T, 3, 3) the pelvis rotation where neither a torso plate nor the hip
                and spine joints give one; default the root plate's bone where seen, else the
                identity.

        Returns:
            rotations (..., T, 24, 3, 3) global bone rotations, and the pelvis position
            (..., T, 3) (None without rest positions).
        """
        eye = torch.eye(3, dtype=bone.dtype, device=bone.device).expand(*bone.shape[:-3], 3, 3)
        seen_rot = valid
        if self.fill:
            bone, seen_rot = fill_gaps(bone, valid, self.parents)
        ok = seen_rot[..., None, None]
        own = {j: (bone[..., m, :, :], ok[..., m, :, :]) for j, m in self.carrier.items()}
        if fallback is None:
            r = self.root_marker
            fallback = torch.where(ok[..., r, :, :], bone[..., r, :, :], eye)
        where = None
        if self.has_position:
            where = pos - (bone @ self.rest_offset[..., None])[..., 0]  # each plate's joint
        rots = torch.stack(self._down_the_tree(own, fallback, where, valid, eye), dim=-3)
        pelvis = None if where is None else self._place(rots, where, valid)
        return rots, pelvis

    def _down_the_tree(self, own, fallback, where, valid, eye) -> list[torch.Tensor]:
        """The 24 global rotations (..., 3, 3), parents first, by the rules of the module
        docstring; joint positions follow along where ``where`` (each plate's joint) is given."""
        # the pelvis: nearest visible plate up the torso, refined by the rigid fit where possible
        root = _nearest_torso_rotation(own, fallback)
        at: list[torch.Tensor | None] = [None] * 24  # joint positions, down the tree
        if where is not None:
            root, at[0] = self._pelvis(where, valid, root)
            if 0 in self.carrier:
                m = self.carrier[0]
                at[0] = torch.where(valid[..., m, None], where[..., m, :], at[0])
        rots: list[torch.Tensor] = [root] + [eye] * 23
        for j in range(1, 24):
            p = SMPL_PARENTS[j]
            parent = rots[p]
            if at[p] is not None:
                bone_vec = self.rest_joints[j] - self.rest_joints[p]
                at[j] = at[p] + (parent @ bone_vec[..., None])[..., 0]
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
                rots[j] = torch.where(seen, rotmat_slerp(parent, target, fraction), parent)
            else:
                rots[j] = parent
        return rots

    def _place(self, rots, where, valid):
        """Pelvis position (..., 3): the mean, over visible plates, of the plate's joint position
        less that joint's offset from the pelvis in the skeleton posed by ``rots``."""
        rj = self.rest_joints
        offsets = (posed_joints(rots, rj) - rj[0])[..., self.marker_joints, :]
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
        docstring); without them, ``fallback`` and the mean over none (zeros)."""
        joints = where[..., self.point_markers, :]
        w = valid[..., self.point_markers].to(where.dtype)
        rest = self.rest_joints[self.points]
        rot = fallback
        if len(self.points) >= 3:
            fit, _ = points_rotation(rest, joints, w)
            rot = torch.where((w.sum(-1) >= 3)[..., None, None], fit, fallback)
        # each visible point joint places the pelvis through the rest offset, rotated by `rot`
        guess = joints - (rot[..., None, :, :] @ (rest - self.rest_joints[0])[..., None])[..., 0]
        return rot, (guess * w[..., None]).sum(-2) / w.sum(-1, keepdim=True).clamp_min(1.0)


def _nearest_torso_rotation(own: dict, fallback: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) the rotation of the first visible plated joint along :data:`TORSO_CHAIN`
    (``own``: joint → (rotation, visible)), else ``fallback``."""
    root = fallback
    for j in reversed(TORSO_CHAIN):
        if j in own:
            root = torch.where(own[j][1], own[j][0], root)
    return root


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
