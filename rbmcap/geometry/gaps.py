"""Filling occluded frames of a rigid-body tree from the nearest frame where it was seen."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def nearest_seen(valid: torch.Tensor, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
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


def fill_gaps(
    rot: torch.Tensor, valid: torch.Tensor, parents: Sequence[int], causal: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotations of a tree of rigid bodies with occluded frames filled.

    A body keeps its rotation relative to its parent from the nearest frame where both were seen
    (a root keeps its global rotation; ``causal``: the last such frame before).

    Args:
        rot: (..., T, N, 3, 3) global rotations of N bodies.
        valid: (..., T, N) bool, where each was seen.
        parents: (N,) parent body per body, -1 for a root.

    Returns:
        The filled rotations (..., T, N, 3, 3) and where they are known (..., T, N).
    """
    order = tree_order(parents)
    out: list = [None] * len(parents)
    known: list = [None] * len(parents)
    for m in order:
        p = parents[m]
        mine = valid[..., m]
        rel = rot[..., m, :, :]
        if p >= 0:
            mine = mine & valid[..., p]
            rel = rot[..., p, :, :].transpose(-1, -2) @ rel
        idx, has = nearest_seen(mine, causal)
        gathered = torch.gather(rel, -3, idx[..., None, None].expand_as(rel))
        filled = gathered if p < 0 else out[p] @ gathered
        k = has & (known[p] if p >= 0 else torch.ones_like(mine))
        out[m] = torch.where(valid[..., m, None, None], rot[..., m, :, :], filled)
        known[m] = valid[..., m] | k
    return torch.stack(out, dim=-3), torch.stack(known, dim=-1)


def tree_order(parents: Sequence[int]) -> list[int]:
    """Node indices ordered so every parent precedes its children (parents: -1 for a root)."""
    order: list[int] = []
    seen: set[int] = set()
    while len(order) < len(parents):
        for m, p in enumerate(parents):
            if m not in seen and (p < 0 or p in seen):
                order.append(m)
                seen.add(m)
    return order
