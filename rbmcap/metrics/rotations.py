"""Rotation and shape metrics (radians; shape coefficients are unitless)."""

from __future__ import annotations

from collections.abc import Sequence

import roma
import torch

from rbmcap.geometry.rotations import rotmat_geodesic_angle
from rbmcap.metrics.regions import BODY_JOINTS


def joint_angle_error(
    pred_local: torch.Tensor,
    true_local: torch.Tensor,
    joints: Sequence[int] = BODY_JOINTS,
) -> torch.Tensor:
    """Mean geodesic error of local joint rotations: mean over ``joints`` of the angle of
    ``R̂_jᵀ R_j``.

    Args:
        pred_local, true_local: (..., 24, 3, 3) local (parent-from-child) rotations.
        joints: which joints (default 1..23, the body pose; the global orientation, joint 0, is
            reported separately by :func:`global_orientation_error`).

    Returns:
        (...) radians (×180/π for the degrees reports use).
    """
    idx = torch.as_tensor(list(joints), device=pred_local.device)
    angles = rotmat_geodesic_angle(pred_local[..., idx, :, :], true_local[..., idx, :, :])
    return angles.mean(dim=-1)


def global_orientation_error(pred_local: torch.Tensor, true_local: torch.Tensor) -> torch.Tensor:
    """Geodesic angle between the global orientations (joint 0's rotations).

    Args:
        pred_local, true_local: (..., 24, 3, 3) local rotations (or (..., 3, 3) root rotations).

    Returns:
        (...) radians.
    """
    if pred_local.ndim >= 3 and pred_local.shape[-3] == 24:
        pred_local, true_local = pred_local[..., 0, :, :], true_local[..., 0, :, :]
    return rotmat_geodesic_angle(pred_local, true_local)


def legacy_mpjre(
    pred_poses: torch.Tensor,
    true_poses: torch.Tensor,
    joints: Sequence[int] = BODY_JOINTS,
) -> torch.Tensor:
    """The "MPJRE" of the sparse-tracker papers (AvatarPoser, AGRoL): the mean absolute
    difference of axis-angle *components*, each difference wrapped into [−π, π], root excluded.

    This is not a rotation distance (it depends on the axis-angle representative and treats the
    three components as independent angles); it is provided only to compare with published
    numbers. Prefer :func:`joint_angle_error`.

    Args:
        pred_poses, true_poses: (..., 24, 3) axis-angle, or (..., 24, 3, 3) rotation matrices
            (converted with ``roma.rotmat_to_rotvec``, angles in [0, π]).
        joints: joints to include (default 1..23; the papers' 66-number body pose is 1..21).

    Returns:
        (...) radians (the papers report it ×180/π as "degrees").
    """
    pred, true = _rotvecs(pred_poses), _rotvecs(true_poses)
    idx = torch.as_tensor(list(joints), device=pred.device)
    diff = pred[..., idx, :] - true[..., idx, :]
    diff = torch.remainder(diff + torch.pi, 2 * torch.pi) - torch.pi
    return diff.abs().flatten(-2).mean(dim=-1)


def betas_error(pred_betas: torch.Tensor, true_betas: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of shape coefficients.

    The shorter vector is padded with zeros (a missing beta is the mean shape), so the value is
    over the longer one's coefficients.

    Args:
        pred_betas, true_betas: (..., B₁) and (..., B₂), broadcastable batch dimensions.

    Returns:
        (...) unitless.
    """
    b = max(pred_betas.shape[-1], true_betas.shape[-1])
    pred = torch.nn.functional.pad(pred_betas, (0, b - pred_betas.shape[-1]))
    true = torch.nn.functional.pad(true_betas, (0, b - true_betas.shape[-1]))
    return (pred - true).abs().mean(dim=-1)


def _rotvecs(poses: torch.Tensor) -> torch.Tensor:
    if poses.ndim >= 2 and poses.shape[-2:] == (3, 3):
        return roma.rotmat_to_rotvec(poses)
    return poses
