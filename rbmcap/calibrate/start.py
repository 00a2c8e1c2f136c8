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
"""

from __future__ import annotations

import math

import roma
import torch

from rbmcap.errors import DataError

LEG_DROP_M = 0.3
"""A plate whose rest position is this far below the root plate counts as a leg plate."""
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
