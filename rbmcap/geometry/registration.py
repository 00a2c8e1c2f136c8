"""Rigid registration of point sets (Kabsch / Procrustes without scale), on roma.

Every function is pure and accepts any leading batch dimensions.
"""

from __future__ import annotations

import roma
import torch


def rigid_registration(
    source: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rigid motion (rotation and translation, no scale) that best maps ``source`` onto
    ``target``: argmin over R ∈ SO(3), t of Σ_i w_i ‖R x_i + t − y_i‖² (Kabsch: the SVD of the
    weighted cross-covariance, reflections excluded; ``roma.rigid_points_registration``).

    Args:
        source, target: (..., N, 3) points in correspondence (broadcastable batch dims; N ≥ 3,
            not all collinear, for a unique answer).
        weights: (..., N) non-negative weights with a positive sum per batch entry, or None
            (all 1). A batch entry whose weights are all zero gets an undefined rotation: add a
            tiny constant (as :func:`points_rotation` does) where such entries are masked later.

    Returns:
        R (..., 3, 3) and t (..., 3), so that ``R x + t ≈ y``.
    """
    batch = torch.broadcast_shapes(source.shape[:-2], target.shape[:-2])
    source = source.expand(*batch, *source.shape[-2:])
    target = target.expand(*batch, *target.shape[-2:])
    if weights is not None:
        weights = weights.to(source.dtype).expand(*batch, source.shape[-2])
    return roma.rigid_points_registration(source, target, weights=weights)


def points_rotation(
    source: torch.Tensor, target: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotation of the rigid fit of ``source`` onto ``target`` and whether it is determined.

    Args:
        source, target: (..., N, 3) points (broadcastable batch dims).
        weights: (..., N) non-negative; a point with weight 0 does not count.

    Returns:
        R (..., 3, 3) (defined, but meaningless, where undetermined) and a flag (...) that at
        least three points carry weight.
    """
    w = weights.to(source.dtype)
    rot, _ = rigid_registration(source, target, w + 1e-9)
    return rot, (w > 0).sum(-1) >= 3


def rigid_align(
    source: torch.Tensor, target: torch.Tensor, weights: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``source`` moved by its rigid registration onto ``target`` (:func:`rigid_registration`).

    Args:
        source, target: (..., N, 3) points in correspondence; weights: (..., N) or None.

    Returns:
        aligned (..., N, 3) = R source + t, R (..., 3, 3) and t (..., 3).
    """
    rot, t = rigid_registration(source, target, weights)
    aligned = source @ rot.transpose(-1, -2) + t[..., None, :]
    return aligned, rot, t


def nearest_rotation(m: torch.Tensor) -> torch.Tensor:
    """Nearest rotation (Frobenius) to each (..., 3, 3) matrix, e.g. the average of a weighted sum
    of rotations; a zero matrix gives some rotation (``roma.special_procrustes``)."""
    return roma.special_procrustes(m + 1e-12 * torch.eye(3, dtype=m.dtype, device=m.device))
