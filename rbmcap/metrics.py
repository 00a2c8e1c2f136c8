"""Accuracy metrics (design §7). Definitions and units are in each docstring.

All functions take any leading batch dimensions and return per-frame values; average them as the
report needs.
"""

from __future__ import annotations

import torch

from rbmcap.model.losses import geodesic_angle


def mpjpe(pred_joints: torch.Tensor, true_joints: torch.Tensor) -> torch.Tensor:
    """Mean per-joint position error: mean Euclidean joint distance, no alignment.

    Args: joints (..., J, 3) in metres. Returns (...) in metres (×1000 for mm).
    """
    return (pred_joints - true_joints).norm(dim=-1).mean(dim=-1)


def rotation_angle(r_pred: torch.Tensor, r_true: torch.Tensor) -> torch.Tensor:
    """Geodesic angle (radians) between rotation matrices (..., 3, 3) → (...), accurate over
    the whole range [0, π] (see :func:`rbmcap.model.losses.geodesic_angle`)."""
    return geodesic_angle(r_pred, r_true)


def joint_angle_error(pred_local: torch.Tensor, true_local: torch.Tensor) -> torch.Tensor:
    """Mean geodesic error (radians) of the local rotations of the body joints 1..23.

    Args: local rotations (..., 24, 3, 3). Returns (...). The global orientation (joint 0) is
    excluded; report it separately with :func:`rotation_angle`.
    """
    return rotation_angle(pred_local[..., 1:, :, :], true_local[..., 1:, :, :]).mean(dim=-1)
