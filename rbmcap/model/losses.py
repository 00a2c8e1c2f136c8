"""Training losses: rotation distances on SO(3) and the shape and translation terms.

Every function is pure, accepts any leading batch dimensions (broadcasting between prediction and
target where torch broadcasts) and reduces to a scalar mean. The angle of one rotation relative
to another is :func:`rbmcap.geometry.rotmat_geodesic_angle`.
Rotations are (..., 3, 3) matrices; quaternions are XYZW (roma).
"""

from __future__ import annotations

from collections.abc import Callable

import roma
import torch

from rbmcap.errors import ConfigError
from rbmcap.geometry.rotations import rotmat_geodesic_angle
from rbmcap.geometry.vectors import safe_norm
from rbmcap.model.rotation6d import matrix_to_rotation_6d

__all__ = [
    "ROTATION_LOSSES",
    "axis_angle_mse",
    "betas_l1",
    "chordal_loss",
    "geodesic_loss",
    "rotation_loss",
    "rotmat_mse",
    "sixd_mse",
    "trans_l2",
]

RotationLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def geodesic_loss(R_pred: torch.Tensor, R_true: torch.Tensor) -> torch.Tensor:
    """Mean geodesic angle (radians) over all rotations; see
    :func:`~rbmcap.geometry.rotmat_geodesic_angle`.

    Args:
        R_pred, R_true: (..., 3, 3) rotation matrices.

    Returns:
        () scalar, radians.
    """
    return rotmat_geodesic_angle(R_pred, R_true).mean()


def chordal_loss(R_pred: torch.Tensor, R_true: torch.Tensor) -> torch.Tensor:
    """Mean quaternion chordal distance ``4 (1 − ⟨q̂, q⟩²)``, sign-invariant.

    Equals ``4 sin²(θ/2) = 2 (1 − cos θ)`` for a relative rotation of angle θ: 0 for identical
    rotations, 4 at θ = π. Quaternions from ``roma.rotmat_to_unitquat`` (XYZW).

    Args:
        R_pred, R_true: (..., 3, 3) rotation matrices.

    Returns:
        () scalar, dimensionless.
    """
    dot = (roma.rotmat_to_unitquat(R_pred) * roma.rotmat_to_unitquat(R_true)).sum(-1)
    return (4.0 * (1.0 - dot * dot)).mean()


def axis_angle_mse(R_pred: torch.Tensor, R_true: torch.Tensor) -> torch.Tensor:
    """Mean squared difference of rotation-vector components (``roma.rotmat_to_rotvec``).

    The mean runs over every component, i.e. per rotation ``‖r̂ − r‖² / 3``. Rotation vectors
    jump at θ = π (r and −r are the same rotation), which is the weakness this ablation measures.

    Args:
        R_pred, R_true: (..., 3, 3) rotation matrices.

    Returns:
        () scalar, rad².
    """
    diff = roma.rotmat_to_rotvec(R_pred) - roma.rotmat_to_rotvec(R_true)
    return (diff * diff).mean()


def _as_6d(x: torch.Tensor) -> torch.Tensor:
    return matrix_to_rotation_6d(x) if x.shape[-2:] == (3, 3) else x


def sixd_mse(R_pred: torch.Tensor, R_true: torch.Tensor) -> torch.Tensor:
    """Mean squared difference of the 6D representations (first two matrix columns).

    Either argument may be given as (..., 3, 3) matrices or directly as (..., 6) vectors, so the
    loss can be put on a network's raw, not yet orthonormalised 6D output. The mean runs over the
    six components.

    Args:
        R_pred, R_true: (..., 3, 3) rotation matrices or (..., 6) 6D vectors.

    Returns:
        () scalar, dimensionless.
    """
    diff = _as_6d(R_pred) - _as_6d(R_true)
    return (diff * diff).mean()


def rotmat_mse(R_pred: torch.Tensor, R_true: torch.Tensor) -> torch.Tensor:
    """Mean squared difference of the nine matrix entries.

    Args:
        R_pred, R_true: (..., 3, 3) rotation matrices.

    Returns:
        () scalar, dimensionless (``‖R̂ − R‖²_F / 9 = 8 sin²(θ/2) / 9`` per rotation).
    """
    diff = R_pred - R_true
    return (diff * diff).mean()


def betas_l1(betas_pred: torch.Tensor, betas_true: torch.Tensor) -> torch.Tensor:
    """Mean absolute difference of shape coefficients.

    Args:
        betas_pred, betas_true: (..., B) SMPL shape coefficients (unitless, ~N(0, 1)).

    Returns:
        () scalar, mean over every coefficient.
    """
    return (betas_pred - betas_true).abs().mean()


def trans_l2(trans_pred: torch.Tensor, trans_true: torch.Tensor) -> torch.Tensor:
    """Mean Euclidean distance between translations.

    The distance (not its square) is used so the term reads in metres, like MPJPE, and keeps a
    constant pull as the error shrinks; its gradient at a zero error is 0, not NaN.

    Args:
        trans_pred, trans_true: (..., 3) translations in metres.

    Returns:
        () scalar, metres.
    """
    return safe_norm(trans_pred - trans_true).mean()


ROTATION_LOSSES: dict[str, RotationLoss] = {
    "geodesic": geodesic_loss,
    "chordal": chordal_loss,
    "axis_angle_mse": axis_angle_mse,
    "sixd_mse": sixd_mse,
    "rotmat_mse": rotmat_mse,
}


def rotation_loss(name: str) -> RotationLoss:
    """The rotation loss called ``name``: ``loss(R_pred, R_true) -> scalar``.

    Names: ``geodesic``, ``chordal``, ``axis_angle_mse``, ``sixd_mse``, ``rotmat_mse``.

    Raises:
        ConfigError: for an unknown name.
    """
    try:
        return ROTATION_LOSSES[name]
    except KeyError:
        known = ", ".join(ROTATION_LOSSES)
        raise ConfigError(f"unknown rotation loss {name!r}; known: {known}") from None
