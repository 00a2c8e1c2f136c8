"""A robust start for the calibration fit: each frame's heading, read off plate *positions*.

Plate rotations say nothing until their offsets are known (a plate may be turned by any angle on
its segment), and plate positions may sit up to 0.3 m from the virtual plates. Directions
between plates far apart survive both: the vector from each right plate to its left partner
points to the subject's left, and the vector from each leg plate to the root plate points up
the body. The root orientation of a frame is the rotation that best turns these vectors of the
virtual rest pose onto the observed ones (weighted Procrustes on directions); the body starts in
the rest pose and the translation puts the virtual plates' mean on the observed one.

The same directions check the names: a left plate found on the subject's right side, with the
heading taken from every *other* pair, is a left/right swap.

The body then follows the plates' rotations (:func:`propagated_pose`): each plate's turn since a
reference frame, ``R(f) R(ref)ᵀ``, is its bone's turn whatever the plate's offset, so every
plated bone takes in each frame its reference pose turned by its plate. From this start the fit
only has to find one constant turn per bone (the reference pose's error), not every frame's pose.
"""

from __future__ import annotations

import math

import roma
import torch

from rbmcap.errors import DataError
from rbmcap.geometry.kinematics import local_to_global
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

_SHOULDERS = (SMPL_JOINT_NAMES.index("left_shoulder"), SMPL_JOINT_NAMES.index("right_shoulder"))

LEG_DROP_M = 0.3
"""A plate whose rest position is this far below the root plate counts as a leg plate."""
REFERENCE_ARMS_DEG = (0.0, 45.0)
"""The fit's starts: the reference frame's arms this far below horizontal (the rest pose's T,
then an A-pose between a T-pose and arms at the sides); the start of lowest objective wins."""
UPRIGHT = (math.pi / 2, 0.0, 0.0)
"""Root rotation vector of the upright virtual rest pose: SMPL's Y-up body turned Z-up."""


def side_pairs(names: list[str]) -> list[tuple[int, int]]:
    """(left index, right index) of every plate pair whose names differ only in left/right."""
    pairs = []
    for i, name in enumerate(names):
        if "left" in name:
            partner = name.replace("left", "right")
            if partner in names:
                pairs.append((i, names.index(partner)))
    return pairs


def direction_vectors(pos: torch.Tensor, pairs, legs, root: int) -> torch.Tensor:
    """(..., P + L, 3) left-pointing and up-pointing vectors from plate positions (..., N, 3)."""
    lr = [pos[..., i, :] - pos[..., j, :] for i, j in pairs]
    up = [pos[..., root, :] - pos[..., k, :] for k in legs]
    return torch.stack(lr + up, dim=-2)


def leg_plates(rest_pos: torch.Tensor, root: int) -> list[int]:
    """Plates whose rest height (Z, upright rest pose) is :data:`LEG_DROP_M` below the root's."""
    drop = rest_pos[root, 2] - rest_pos[:, 2]
    return [int(k) for k in torch.nonzero(drop > LEG_DROP_M).flatten()]


def headings(
    rest_pos: torch.Tensor,
    pos: torch.Tensor,
    valid: torch.Tensor,
    pairs,
    legs,
    root: int,
    skip: int | None = None,
) -> torch.Tensor:
    """Per frame, the rotation (F, 3, 3) turning the rest pose's directions onto the observed.

    Args:
        rest_pos: (N, 3) virtual rest plates (upright, Z up); pos: (F, N, 3) observed; valid:
            (F, N) bool.
        pairs, legs, root: from :func:`side_pairs`, :func:`leg_plates` and the marker set.
        skip: leave out the pair with this index (to test that pair against the others).

    Raises:
        DataError: a frame has no usable direction (no pair and no leg plate seen).
    """
    use = [p for k, p in enumerate(pairs) if k != skip]
    x = direction_vectors(rest_pos, use, legs, root)
    y = direction_vectors(pos, use, legs, root)
    ok = [valid[:, i] & valid[:, j] for i, j in use] + [valid[:, root] & valid[:, k] for k in legs]
    w = torch.stack(ok, dim=-1).to(pos.dtype)
    if (w.sum(-1) < 2).any():
        raise DataError("a calibration frame sees too few plates to tell left from right and up")
    x = x / x.norm(dim=-1, keepdim=True)
    y = y / y.norm(dim=-1, keepdim=True).clamp_min(1e-9)
    return roma.rigid_vectors_registration(x.expand_as(y), y, weights=w)


def swapped_pairs(rest_pos, pos, valid, pairs, legs, root: int) -> list[tuple[int, int, float]]:
    """Pairs whose left plate lies on the subject's right in most frames.

    Each pair is tested against the heading the other pairs and the legs give. Returns
    (left index, right index, fraction of frames on the wrong side) for each swapped pair.
    """
    out = []
    for k, (i, j) in enumerate(pairs):
        if len(pairs) < 2 and not legs:
            break
        try:
            r = headings(rest_pos, pos, valid, pairs, legs, root, skip=k)
        except DataError:
            continue
        left = r[:, :, 0]  # the rest pose's +X (the subject's left) in the world
        both = valid[:, i] & valid[:, j]
        if not both.any():
            continue
        side = ((pos[:, i] - pos[:, j]) * left).sum(-1)
        wrong = float((side[both] < 0).double().mean())
        if wrong > 0.5:
            out.append((i, j, wrong))
    return out


def upright_rotation(dtype=torch.float64) -> torch.Tensor:
    """(3, 3) the upright rest pose's root rotation."""
    return roma.rotvec_to_rotmat(torch.tensor(UPRIGHT, dtype=dtype))


def mean_translation(virt: torch.Tensor, pos: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(F, 3) the translation moving virtual plates (F, N, 3) onto observed ones on average."""
    w = valid.to(pos.dtype)[..., None]
    return ((pos - virt) * w).sum(1) / w.sum(1).clamp_min(1.0)


def check_pairs(names: list[str], swaps) -> None:
    """One DataError naming the first swapped pair (see :func:`swapped_pairs`)."""
    if swaps:
        i, j, wrong = swaps[0]
        raise DataError(
            f"plates {names[i]!r} and {names[j]!r}: {names[i]!r} is on the subject's right in "
            f"{wrong:.0%} of the calibration frames: left and right swapped? (fix the names, "
            f"e.g. with `rbmcap import --map`)"
        )


def lowered_arms(rotmats: torch.Tensor, degrees: float) -> torch.Tensor:
    """``rotmats`` (..., 24, 3, 3) with each shoulder turned about the body's forward axis (SMPL
    +Z) so that an arm straight out to the side points ``degrees`` below horizontal."""
    if degrees == 0:
        return rotmats
    out = rotmats.clone()
    for joint, sign in zip(_SHOULDERS, (-1.0, 1.0)):  # left arm along +X, right along -X
        vec = torch.tensor([0.0, 0.0, sign * math.radians(degrees)], dtype=rotmats.dtype)
        out[..., joint, :, :] = roma.rotvec_to_rotmat(vec) @ out[..., joint, :, :]
    return out


def propagated_pose(
    rotmats: torch.Tensor,
    rot: torch.Tensor,
    valid: torch.Tensor,
    bones,
    parents=SMPL_PARENTS,
) -> torch.Tensor:
    """Local rotations (F, J, 3, 3) where each plated bone turns with its plate.

    Args:
        rotmats: (F, J, 3, 3) the start's local rotations (their pose in the reference frame is
            taken as right).
        rot: (F, N, 3, 3) observed plate rotations; valid: (F, N) bool.
        bones: (N,) the joint (bone) carrying each plate.
        parents: the skeleton.

    The reference frame is the first that sees the most plates (a plate unseen there is referred
    to its first frame seen). A plated bone's global rotation in frame f is
    ``R(f) R(ref)ᵀ G(ref)`` where its plate is seen; where it is not, the bone keeps the start's
    rotation relative to its parent. The unplated joints between a plated bone and its nearest
    plated ancestor (or the root) share the turn between them equally; other unplated joints
    keep the start's local rotations.
    """
    glob = local_to_global(rotmats, parents)
    target = glob.clone()
    seen = torch.zeros(glob.shape[:2], dtype=torch.bool)
    bones = [int(b) for b in bones]
    common = int(valid.sum(1).argmax())
    for i, b in enumerate(bones):
        ref = common if bool(valid[common, i]) else int(valid[:, i].to(torch.int8).argmax())
        turn = rot[:, i] @ rot[ref, i].transpose(-1, -2)
        target[valid[:, i], b] = turn[valid[:, i]] @ glob[ref, b]
        seen[:, b] |= valid[:, i]
    plated = set(bones)
    local = rotmats.clone()
    if 0 in plated:
        local[seen[:, 0], 0] = target[seen[:, 0], 0]
    claimed: set[int] = set()
    for b in sorted(plated - {0}):
        chain, a = [], parents[b]
        while a > 0 and a not in plated:
            chain.append(a)
            a = parents[a]
        chain = [j for j in reversed(chain) if j not in claimed]  # top-down, not yet set
        both = seen[:, b] & (seen[:, a] if a in plated else True)
        if chain and parents[chain[0]] == a:
            turn = roma.rotmat_to_rotvec(target[:, a].transpose(-1, -2) @ target[:, b])
            share = roma.rotvec_to_rotmat(turn / (len(chain) + 1))
            for j in chain:
                local[both, j] = share[both]
            claimed.update(chain)
        above = local_to_global(local, parents)[:, parents[b]]
        local[seen[:, b], b] = (above.transpose(-1, -2) @ target[:, b])[seen[:, b]]
    return local
