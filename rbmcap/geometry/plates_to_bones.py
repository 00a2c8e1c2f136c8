"""Plates → bones: every bone's global rotation and the pelvis position, read off rigid bodies.

A plate strapped to a segment turns rigidly with its bone, so ``R_plate · R_restᵀ`` is the bone's
global rotation (``R_rest`` the plate's orientation on the body at rest). This one estimator is
the network's kinematic prior (the network only corrects it) and the solver's start
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

import functools

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

    The tree is walked one depth at a time, each depth's joints in a few batched products (its
    plated joints together, its swung joints together, ...): the maths of a joint-by-joint walk
    in far fewer calls, which is what a stream's single frame pays for.

    Args:
        marker_joints: (N,) SMPL joint carrying each plate (at most one plate per joint).
        root_marker: index of the marker tree's root plate (the default fallback for the pelvis).
        plate_rest_pos: (N, 3) plate origins at rest, or None: then the pelvis takes the nearest
            plated torso bone's rotation and no position is given.
        rest_joints: (24, 3) rest joints (needed with ``plate_rest_pos``).
        parents: (N,) the marker tree (parent plate, -1 for the root); with it, occluded frames
            are filled from the nearest frame where a plate was seen (see :attr:`fill`).
        interpolate: interpolate unplated torso joints between plated ones (False: they take
            their parent's rotation, as any other joint without a rule does).
        swing: swing an unplated joint with a plated child towards that child (needs the rest
            positions; False: it takes its parent's rotation).
        dtype: of the rest quantities (the observations' dtype).
    """

    def __init__(
        self,
        marker_joints,
        root_marker: int,
        plate_rest_pos=None,
        rest_joints=None,
        parents=None,
        interpolate: bool = True,
        swing: bool = True,
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
        self.plan = _interpolation_plan(self.carrier) if interpolate else {}
        self.swing: dict[int, int] = {}
        # a plate on the pelvis gives it directly; else the hip and spine joints fix it
        pelvis_plated = 0 in self.carrier
        self.points = [] if pelvis_plated else [j for j in PELVIS_POINTS if j in self.carrier]
        # the pelvis's stand-in: the first visible plate along the torso (so tried last)
        self.torso = [self.carrier[j] for j in reversed(TORSO_CHAIN) if j in self.carrier]
        rj = torch.zeros(24, 3, dtype=dtype)
        if self.has_position:
            rest_pos = torch.as_tensor(plate_rest_pos, dtype=dtype)
            rj = torch.as_tensor(rest_joints, dtype=dtype)
            self.register_buffer("rest_joints", rj, persistent=False)
            self.register_buffer("rest_offset", rest_pos - rj[joints], persistent=False)
            point_markers = torch.tensor([self.carrier[j] for j in self.points], dtype=torch.long)
            self.register_buffer("point_markers", point_markers, persistent=False)
            self.register_buffer("point_rest", rj[self.points], persistent=False)
            self.register_buffer("point_offset", rj[self.points] - rj[0], persistent=False)
            for j in range(1, 24):
                kids = [c for c in range(24) if SMPL_PARENTS[c] == j and c in self.carrier]
                if swing and j not in self.carrier and kids:
                    self.swing[j] = kids[0]
        levels, order = _tree_levels(self.carrier, self.swing, self.plan, rj)
        self.levels = torch.nn.ModuleList(levels)
        self.register_buffer("order", order, persistent=False)

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
        seen_rot = valid
        if self.fill:
            bone, seen_rot = fill_gaps(bone, valid, self.parents)
        ok = seen_rot[..., None, None]
        if fallback is None:
            r = self.root_marker
            eye = torch.eye(3, dtype=bone.dtype, device=bone.device)
            fallback = torch.where(ok[..., r, :, :], bone[..., r, :, :], eye)
        where = None
        if self.has_position:
            where = pos - (bone @ self.rest_offset[..., None])[..., 0]  # each plate's joint
        rots = self._down_the_tree(bone, ok, fallback, where, valid)
        pelvis = None if where is None else self._place(rots, where, valid)
        return rots, pelvis

    def _down_the_tree(self, bone, ok, fallback, where, valid) -> torch.Tensor:
        """The 24 global rotations (..., 24, 3, 3) by the rules of the module docstring, one
        depth at a time (see :class:`_Level`); joint positions follow along where ``where``
        (each plate's joint) is given, as far down as a swung joint needs them."""
        # the pelvis: nearest visible plate up the torso, refined by the rigid fit where possible
        root = fallback
        for m in self.torso:
            root = torch.where(ok[..., m, :, :], bone[..., m, :, :], root)
        at = None  # the positions a level passes down (see _Level)
        if where is not None:
            root, at = self._pelvis(where, valid, root)
            if 0 in self.carrier:
                m = self.carrier[0]
                at = torch.where(valid[..., m, None], where[..., m, :], at)
            at = at[..., None, :]
        rots = [root[..., None, :, :]]
        for level in self.levels:
            parent = rots[-1][..., level.parent, :, :]
            if level.num_pos:
                at = level.positions(rots[-1], at, where, valid)
            pieces = []
            if level.num_own:
                own = level.own_markers
                mine = parent[..., : level.num_own, :, :]
                pieces.append(torch.where(ok[..., own, :, :], bone[..., own, :, :], mine))
            if level.num_swing:
                pieces.append(self._swing(level, parent, at, where, valid))
            if level.num_plan:
                mine = parent[..., level.num_own + level.num_swing :, :, :]
                below = level.plan_markers
                slerped = rotmat_slerp(mine, bone[..., below, :, :], level.fractions)
                pieces.append(torch.where(ok[..., below, :, :], slerped, mine))
            rots.append(pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=-3))
        return torch.cat(rots, dim=-3)[..., self.order, :, :]

    def _place(self, rots, where, valid):
        """Pelvis position (..., 3): the mean, over visible plates, of the plate's joint position
        less that joint's offset from the pelvis in the skeleton posed by ``rots``."""
        rj = self.rest_joints
        offsets = (posed_joints(rots, rj) - rj[0])[..., self.marker_joints, :]
        w = valid.to(where.dtype)[..., None]
        return ((where - offsets) * w).sum(-2) / w.sum(-2).clamp_min(1.0)

    def _swing(self, level, parent, at, where, valid):
        """A level's unplated joints with a plated child (..., S, 3, 3): the parent's rotation
        swung so the joint's bone points at the child's position."""
        n = level.num_own
        parent_rot = parent[..., n : n + level.num_swing, :, :]
        bone = (parent_rot @ level.swing_bones[..., None])[..., 0]
        child = level.swing_children
        target = where[..., child, :] - at[..., : level.num_swing, :]
        swung = rotation_between(bone, target) @ parent_rot
        return torch.where(valid[..., child, None, None], swung, parent_rot)

    def _pelvis(self, where, valid, fallback):
        """Pelvis rotation and position from the point joints the plates give (see the module
        docstring); without them, ``fallback`` and the mean over none (zeros)."""
        joints = where[..., self.point_markers, :]
        w = valid[..., self.point_markers].to(where.dtype)
        rot = fallback
        if len(self.points) >= 3:
            fit, _ = points_rotation(self.point_rest, joints, w)
            rot = torch.where((w.sum(-1) >= 3)[..., None, None], fit, fallback)
        # each visible point joint places the pelvis through the rest offset, rotated by `rot`
        guess = joints - (rot[..., None, :, :] @ self.point_offset[..., None])[..., 0]
        return rot, (guess * w[..., None]).sum(-2) / w.sum(-1, keepdim=True).clamp_min(1.0)


class _Level(torch.nn.Module):
    """One depth of the tree walk: the joints whose rotations are worked out there, plated ones
    first, then swung, then interpolated, each group in one batched step. (A joint without a
    rule of its own only copies its parent's rotation; it is left out and copied at the end.)

    Index buffers, not saved (they follow from the marker set): ``parent`` (K,) each joint's
    parent, i.e. its nearest worked-out ancestor, in the previous level; ``own_markers`` (the
    plated joints' plates); ``swing_children`` and ``swing_bones`` (a swung joint's plated
    child's plate and the rest bone from the joint to that child); ``plan_markers`` and
    ``fractions`` (an interpolated joint's plated joint below and how far towards it).

    Positions: those of the level's joints that a swung joint at or below needs (swung ones
    first): each is its parent's position (index ``pos_parent`` in the previous level's
    positions, rotation ``pos_parent_rot`` in the previous level) plus the rest bone
    ``pos_bones`` turned by that rotation, or its plate's joint (``pos_markers``) where
    ``pos_plated`` and seen.
    """

    def __init__(self, plan: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.num_own, self.num_swing = len(plan["own_markers"]), len(plan["swing_children"])
        self.num_plan, self.num_pos = len(plan["plan_markers"]), len(plan["pos_markers"])
        for name, value in plan.items():
            self.register_buffer(name, value, persistent=False)

    def positions(self, prev_rots, prev_at, where, valid):
        """(..., P, 3) this level's joint positions from the previous level's rotations
        (..., K', 3, 3) and positions (..., P', 3)."""
        turn = prev_rots[..., self.pos_parent_rot, :, :]
        at = prev_at[..., self.pos_parent, :] + (turn @ self.pos_bones[..., None])[..., 0]
        seen = valid[..., self.pos_markers] & self.pos_plated
        return torch.where(seen[..., None], where[..., self.pos_markers, :], at)


def _tree_levels(carrier, swing, plan, rest_joints) -> tuple[list[_Level], torch.Tensor]:
    """The walk's levels below the pelvis and the order (24,) that picks each joint's rotation
    out of the levels' concatenated ones (a joint without a rule of its own takes its nearest
    worked-out ancestor's). Long because it lays out every index of the walk in one place."""
    # rule per joint: 1 plated, 2 swung, 3 interpolated, None copies its parent
    rule = {
        j: 1 if j in carrier else 2 if j in swing else 3 if j in plan else None
        for j in range(1, 24)
    }
    src = [0] * 24  # the worked-out joint whose rotation each joint takes
    depth = {0: 0}
    for j in range(1, 24):
        up = src[SMPL_PARENTS[j]]
        src[j] = up if rule[j] is None else j
        if rule[j] is not None:
            depth[j] = depth[up] + 1
    need_pos = set()  # joints whose positions the swings need: themselves and their ancestors
    for j in swing:
        while j not in need_pos:
            need_pos.add(j)
            j = src[SMPL_PARENTS[j]] if j else 0
    by_depth = [[0]] + [
        sorted((j for j in depth if depth[j] == d), key=lambda j: (rule[j], j))
        for d in range(1, max(depth.values()) + 1)
    ]
    pos_by_depth = [[0] if need_pos else []]
    levels = []
    long = functools.partial(torch.tensor, dtype=torch.long)
    for d in range(1, len(by_depth)):
        js, prev = by_depth[d], by_depth[d - 1]
        pos = sorted((j for j in js if j in need_pos), key=lambda j: (rule[j] != 2, rule[j], j))
        pos_by_depth.append(pos)
        pos_up = [src[SMPL_PARENTS[j]] for j in pos]
        swung = [j for j in js if rule[j] == 2]
        planned = [j for j in js if rule[j] == 3]
        levels.append(
            _Level(
                {
                    "parent": long([prev.index(src[SMPL_PARENTS[j]]) for j in js]),
                    "own_markers": long([carrier[j] for j in js if rule[j] == 1]),
                    "swing_children": long([carrier[swing[j]] for j in swung]),
                    "swing_bones": rest_joints[[swing[j] for j in swung]] - rest_joints[swung],
                    "plan_markers": long([carrier[plan[j][0]] for j in planned]),
                    "fractions": torch.tensor(
                        [plan[j][1] for j in planned], dtype=rest_joints.dtype
                    ),
                    "pos_parent": long([pos_by_depth[d - 1].index(u) for u in pos_up]),
                    "pos_parent_rot": long([prev.index(u) for u in pos_up]),
                    "pos_bones": rest_joints[pos] - rest_joints[pos_up],
                    "pos_markers": long([carrier.get(j, 0) for j in pos]),
                    "pos_plated": torch.tensor([j in carrier for j in pos], dtype=torch.bool),
                }
            )
        )
    flat = [j for js in by_depth for j in js]
    return levels, long([flat.index(src[j]) for j in range(24)])


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
