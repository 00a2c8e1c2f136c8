"""Small rotation helpers the motion package needs beyond roma's (all built on roma).

Every function is pure, works on any leading batch dimensions and keeps the input dtype.
"""

from __future__ import annotations

import roma
import torch


def unitquat_slerp_pairwise(q0: torch.Tensor, q1: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Slerp each pair of unit quaternions by its own weight, along the shortest arc.

    Args:
        q0, q1: (..., 4) unit quaternions (XYZW).
        w: (...) interpolation weights, 0 gives ``q0`` and 1 gives ``q1``.

    Returns:
        (..., 4) unit quaternions.
    """
    # roma.unitquat_slerp interpolates every pair at every step (an outer product); here each pair
    # has its own step, so use q0 * exp(w * log(q0^-1 q1)).
    delta = roma.quat_product(roma.quat_conjugation(q0), q1)
    delta = torch.where(delta[..., 3:] < 0, -delta, delta)  # shortest arc
    step = roma.rotvec_to_unitquat(roma.unitquat_to_rotvec(delta) * w[..., None])
    return roma.quat_product(q0, step)


def rotmat_slerp_pairwise(r0: torch.Tensor, r1: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Geodesic interpolation ``r0 exp(w log(r0ᵀ r1))`` of (..., 3, 3) rotation matrices."""
    rel = roma.rotmat_to_rotvec(r0.transpose(-1, -2) @ r1)
    return r0 @ roma.rotvec_to_rotmat(rel * w[..., None])


def rotation_between(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The smallest rotation turning direction ``a`` onto direction ``b``.

    Args:
        a, b: (..., 3) non-zero vectors (need not be unit).

    Returns:
        (..., 3, 3) rotation matrices R with R a/|a| = b/|b|. Opposite directions turn by π about
        an axis perpendicular to ``a``.
    """
    a = a / a.norm(dim=-1, keepdim=True)
    b = b / b.norm(dim=-1, keepdim=True)
    axis = torch.cross(a, b, dim=-1)
    sin = axis.norm(dim=-1, keepdim=True)
    cos = (a * b).sum(-1, keepdim=True)
    # For antiparallel vectors any perpendicular axis works; take one from a's smallest component.
    helper = torch.zeros_like(a)
    helper.scatter_(-1, a.abs().argmin(-1, keepdim=True), 1.0)
    perp = torch.cross(a, helper, dim=-1)
    perp = perp / perp.norm(dim=-1, keepdim=True)
    unit_axis = torch.where(sin > 1e-12, axis / sin.clamp_min(1e-12), perp)
    angle = torch.atan2(sin, cos)
    return roma.rotvec_to_rotmat(unit_axis * angle)


def axis_rotmat(axis: str, angle: torch.Tensor) -> torch.Tensor:
    """Rotation about a coordinate axis ('x', 'y' or 'z') by ``angle`` radians: (..., 3, 3)."""
    return roma.euler_to_rotmat(axis.lower(), angle[..., None])
