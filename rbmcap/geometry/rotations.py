"""Rotations: distances, the rotation between two directions, and interpolation (all on roma).

Every function is pure, accepts any leading batch dimensions and keeps the input dtype.
Rotations are (..., 3, 3) matrices; quaternions are XYZW (roma's order).
"""

from __future__ import annotations

import roma
import torch

from rbmcap.geometry.vectors import safe_norm


def rotmat_geodesic_angle(R_a: torch.Tensor, R_b: torch.Tensor) -> torch.Tensor:
    """Geodesic distance on SO(3): the angle of the relative rotation ``R_aᵀ R_b``.

    Args:
        R_a, R_b: (..., 3, 3) rotation matrices (broadcastable).

    Returns:
        (...) angles in radians, in [0, π].

    The angle θ of M = R_aᵀ R_b is recovered as ``atan2(sin θ, cos θ)`` with
    ``sin θ = ‖vee(M − Mᵀ)‖ / 2`` and ``cos θ = (tr M − 1) / 2``. This is exact to float precision
    over the whole range and differentiable everywhere: atan2's derivative is bounded because
    sin² + cos² = 1, and the norm is written so its gradient at the zero vector (θ = 0 or
    exactly π) is 0. The alternatives fail at one end: ``roma.rotmat_geodesic_distance``
    (2·asin(‖R₁ − R₂‖_F / 2√2)) is exact near 0 but, in float32, off by ~6e-4 rad at π − 1e-4 and
    its gradient blows up at π unless its input is clamped below 1, which caps the angle; the
    trace formula ``acos((tr M − 1)/2)`` loses precision and has an infinite gradient at both 0
    and π.
    """
    M = R_a.transpose(-1, -2) @ R_b
    # vee(M - Mᵀ) = 2 sin θ · axis
    skew = torch.stack(
        (M[..., 2, 1] - M[..., 1, 2], M[..., 0, 2] - M[..., 2, 0], M[..., 1, 0] - M[..., 0, 1]),
        dim=-1,
    )
    return torch.atan2(0.5 * safe_norm(skew), roma.rotmat_cosine_angle(M))


def rotation_between(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The smallest rotation turning direction ``a`` onto direction ``b``.

    Args:
        a, b: (..., 3) non-zero vectors (need not be unit; broadcastable).

    Returns:
        (..., 3, 3) rotation matrices R with R a/|a| = b/|b|: the turn by the angle between them
        about ``a × b``. Opposite directions turn by π about an axis perpendicular to ``a``.
    """
    a, b = torch.broadcast_tensors(a, b)
    a = a / a.norm(dim=-1, keepdim=True)
    b = b / b.norm(dim=-1, keepdim=True)
    cross = torch.linalg.cross(a, b)
    sin = cross.norm(dim=-1, keepdim=True)
    cos = (a * b).sum(-1, keepdim=True)
    # Near-opposite directions leave a × b mostly rounding error, but any axis perpendicular to a
    # then turns a onto (nearly) −a: keep the axis exactly perpendicular to a, and where it
    # vanishes take one from a's smallest component.
    axis = cross - (cross * a).sum(-1, keepdim=True) * a
    length = axis.norm(dim=-1, keepdim=True)
    helper = torch.zeros_like(a)
    helper.scatter_(-1, a.abs().argmin(-1, keepdim=True), 1.0)
    perp = torch.linalg.cross(a, helper)
    perp = perp / perp.norm(dim=-1, keepdim=True)
    tiny = torch.finfo(a.dtype).eps
    unit_axis = torch.where(length > tiny, axis / length.clamp_min(tiny), perp)
    return roma.rotvec_to_rotmat(unit_axis * torch.atan2(sin, cos))


def rotmat_slerp(r0: torch.Tensor, r1: torch.Tensor, w: torch.Tensor | float) -> torch.Tensor:
    """Geodesic interpolation ``r0 exp(w log(r0ᵀ r1))`` between rotation matrices.

    Each pair has its own weight (unlike ``roma.unitquat_slerp``, which evaluates every pair at
    every step of a list). The path is the shortest arc (the relative angle is in [0, π]).

    Args:
        r0, r1: (..., 3, 3) rotation matrices (broadcastable).
        w: (...) weights or a number: 0 gives ``r0``, 1 gives ``r1``.

    Returns:
        (..., 3, 3) rotation matrices.
    """
    rel = roma.rotmat_to_rotvec(r0.transpose(-1, -2) @ r1)
    w = torch.as_tensor(w, dtype=rel.dtype, device=rel.device)
    return r0 @ roma.rotvec_to_rotmat(rel * w[..., None])


def unitquat_slerp(q0: torch.Tensor, q1: torch.Tensor, w: torch.Tensor | float) -> torch.Tensor:
    """:func:`rotmat_slerp` for unit quaternions (XYZW): each pair by its own weight, along the
    shortest arc.

    Args:
        q0, q1: (..., 4) unit quaternions.
        w: (...) weights or a number: 0 gives ``q0``'s rotation, 1 gives ``q1``'s.

    Returns:
        (..., 4) unit quaternions (the sign of the result is ``roma``'s choice).
    """
    r = rotmat_slerp(roma.unitquat_to_rotmat(q0), roma.unitquat_to_rotmat(q1), w)
    return roma.rotmat_to_unitquat(r)


def axis_rotmat(axis: str, angle: torch.Tensor) -> torch.Tensor:
    """Rotation (..., 3, 3) about a coordinate axis ('x', 'y' or 'z') by ``angle`` (...) radians."""
    return roma.euler_to_rotmat(axis.lower(), angle[..., None])
