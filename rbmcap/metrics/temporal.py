"""Temporal metrics: velocity error and jitter, on (..., T, J, 3) position sequences."""

from __future__ import annotations

import torch


def finite_difference(x: torch.Tensor, order: int = 1, dim: int = -3) -> torch.Tensor:
    """Forward finite difference of ``order`` along ``dim`` (no division by the time step).

    Args:
        x: (..., T, ...) samples; order: 1 (Δx_t = x_{t+1} − x_t), 2, 3, ...

    Returns:
        (..., T − order, ...).
    """
    for _ in range(order):
        x = x.narrow(dim, 1, x.shape[dim] - 1) - x.narrow(dim, 0, x.shape[dim] - 1)
    return x


def mpjve(pred_joints: torch.Tensor, true_joints: torch.Tensor, fps: float) -> torch.Tensor:
    """Mean per-joint velocity error: mean over joints of ‖v̂ − v‖, with the velocities the
    first finite differences × fps.

    Args:
        pred_joints, true_joints: (..., T, J, 3) metres, T ≥ 2; fps: frames per second.

    Returns:
        (..., T − 1) m/s (×1000 for mm/s); entry t is the error of the velocity between frames
        t and t + 1.
    """
    dv = finite_difference(pred_joints - true_joints, 1) * fps
    return dv.norm(dim=-1).mean(dim=-1)


def jitter(joints: torch.Tensor, fps: float) -> torch.Tensor:
    """Jitter: mean over joints of the norm of the third finite difference × fps³ (the jerk).

    It is zero for any path of constant acceleration (a quadratic in time); report it for the
    prediction and for the ground truth.

    Args:
        joints: (..., T, J, 3) metres, T ≥ 4; fps: frames per second.

    Returns:
        (..., T − 3) m/s³; entry t covers frames t..t + 3.
    """
    return (finite_difference(joints, 3) * fps**3).norm(dim=-1).mean(dim=-1)
