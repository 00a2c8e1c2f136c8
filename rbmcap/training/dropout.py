"""Marker-dropout augmentation: whole plates go missing for spans of frames, as in occlusions."""

from __future__ import annotations

import torch


def drop_markers(
    valid: torch.Tensor,
    prob: float,
    max_span: int,
    generator: torch.Generator | None = None,
    protect: int | None = None,
) -> torch.Tensor:
    """Return a copy of ``valid`` (B, T, N) with random gaps.

    Each plate of each window is, with probability ``prob``, missing over one random span of
    1..``max_span`` frames (``max_span`` ≥ T means it can vanish for the whole window). Plate
    ``protect`` (the root, which anchors the features) is never dropped.
    """
    if prob <= 0:
        return valid
    b, t, n = valid.shape
    dev = valid.device
    hit = torch.rand(b, n, generator=generator) < prob
    span = torch.randint(1, max(1, min(max_span, t)) + 1, (b, n), generator=generator)
    start = (torch.rand(b, n, generator=generator) * (t - span + 1)).floor().long()
    frames = torch.arange(t)[None, :, None]
    gap = (frames >= start[:, None, :]) & (frames < (start + span)[:, None, :]) & hit[:, None, :]
    if protect is not None:
        gap[..., protect] = False
    return valid & ~gap.to(dev)


def hide_plates(
    valid: torch.Tensor,
    prob: float,
    generator: torch.Generator | None = None,
    protect: int | None = None,
) -> torch.Tensor:
    """Return a copy of ``valid`` (B, T, N) where, with probability ``prob`` per window, one or
    two random plates (never ``protect``) are missing for the whole window: a plate that fell
    off or is hidden by the setup, as ``rbmcap eval --occlude`` tests."""
    if prob <= 0:
        return valid
    b, _, n = valid.shape
    scores = torch.rand(b, n, generator=generator)
    if protect is not None:
        scores[:, protect] = 2.0  # never among the lowest
    count = torch.randint(1, 3, (b, 1), generator=generator)
    rank = scores.argsort(dim=1).argsort(dim=1)
    hidden = (rank < count) & (torch.rand(b, 1, generator=generator) < prob)
    return valid & ~hidden[:, None, :].to(valid.device)
