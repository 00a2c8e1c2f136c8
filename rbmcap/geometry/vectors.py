"""Vector helpers with gradients that stay finite."""

from __future__ import annotations

import torch


def safe_norm(v: torch.Tensor) -> torch.Tensor:
    """Euclidean norm over the last dim, (..., D) → (...), whose gradient is 0 (not NaN) at the
    zero vector."""
    sq = (v * v).sum(-1)
    positive = sq > 0
    # The inner where keeps sqrt away from 0, so its backward never divides by zero.
    return torch.where(positive, torch.where(positive, sq, torch.ones_like(sq)).sqrt(), 0.0)
