"""Diagonal preconditioning of the solver's unknowns.

The objective is badly scaled in its raw unknowns: a metre of translation moves every marker
(curvature ~10⁵ per m² at σ_p = 10 mm) while a radian at a toe or a finger base moves a few
vertices by millimetres (curvature ~10 per rad²). L-BFGS starts each iteration from a multiple of
the identity as its Hessian guess, so with a spread of 10⁴ in curvature its tail crawls along the
stiff directions while the soft ones barely move. Dividing every unknown by the square root of its
curvature (Jacobi preconditioning) brings the spread down to the coupling between unknowns.

The curvature is the diagonal of the Gauss–Newton Hessian of one frame's data terms at a typical
pose (the pose prior's mean, or the rest pose), plus the pose prior's mean precision: a property
of the body, the marker set and the weights, computed once per solver by central differences of
a batch of perturbed poses and shared by every frame and sequence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import roma
import torch

from rbmcap.baseline.config import WeightsConfig
from rbmcap.baseline.objective import predict_markers
from rbmcap.baseline.prior import GaussianMixturePrior
from rbmcap.geometry.rotations import rotmat_geodesic_angle
from rbmcap.markers.plates import PlateTopology

STEP = 1e-3
"""Central-difference step (rad, m, shape units)."""


@dataclass(frozen=True)
class UnknownScales:
    """Per-unknown scales: the solver optimises u / scale. Shapes: root (3,) for the global
    orientation correction ω, body (23, 3) for the body axis-angle, trans (3,), and betas (B,)
    per frame of the sequence (divide by √T for T frames: shape curvature adds up over frames)."""

    root: torch.Tensor
    body: torch.Tensor
    trans: torch.Tensor
    betas: torch.Tensor

    def betas_for(self, frames: int, weight: float) -> torch.Tensor:
        """Scales of the betas for a window of ``frames`` frames and shape-prior ``weight``."""
        per_frame = self.betas.pow(-2)
        return (frames * per_frame + 2.0 * weight).rsqrt()


def unknown_scales(
    body,
    topology: PlateTopology,
    weights: WeightsConfig,
    prior: GaussianMixturePrior | None,
    rotations: bool,
) -> UnknownScales:
    """Scales 1/√H_kk of every unknown from the Gauss–Newton diagonal H of one frame.

    Args:
        body: the solver's body model.
        topology: the marker set's plate topology.
        weights: the objective's weights (σ_p, σ_r, prior weight, pose L2).
        prior: the pose prior (its mixture-mean precision is added; its mean is the pose).
        rotations: whether plate orientations are observed (6-DoF sets).
    """
    dtype, device = body.v_template.dtype, body.v_template.device
    nb = body.num_betas
    pose = torch.zeros(24, 3, dtype=dtype, device=device)
    if prior is not None:
        mean = (prior.weights[:, None] * prior.means).sum(0).to(dtype)
        pose[list(prior.joints)] = mean.view(-1, 3)
    # unknowns: 3 root, 69 body, 3 trans, B betas; one + and one − perturbation of each
    n = 75 + nb
    x = STEP * torch.eye(n, dtype=dtype, device=device)
    x = torch.cat([x, -x])
    root = roma.rotvec_to_rotmat(x[:, :3])
    body_pose = pose[1:].flatten() + x[:, 3:72]
    rotmats = torch.cat([root[:, None], roma.rotvec_to_rotmat(body_pose.view(-1, 23, 3))], dim=1)
    with torch.no_grad():
        pp, pr = predict_markers(body, topology, rotmats, x[:, 75:], x[:, 72:75])
    dp = (pp[:n] - pp[n:]).norm(dim=-1) / (2 * STEP)  # (n, N) m per unit
    sp = weights.position_sigma_mm * 1e-3
    curvature = 2.0 * (dp**2).sum(-1) / sp**2
    if rotations:
        dr = rotmat_geodesic_angle(pr[:n], pr[n:]) / (2 * STEP)
        sr = math.radians(weights.rotation_sigma_deg)
        curvature = curvature + 2.0 * (dr**2).sum(-1) / sr**2
    body_c = curvature[3:72] + 2.0 * weights.pose_l2
    if prior is not None and weights.prior > 0:
        diag = prior.precision_diagonal().to(dtype)
        full = torch.zeros(69, dtype=dtype, device=device)
        idx = torch.tensor([3 * (j - 1) + c for j in prior.joints for c in range(3)], device=device)
        full[idx] = diag
        body_c = body_c + weights.prior * full
    floor = 1e-6 * float(curvature.max())
    return UnknownScales(
        root=curvature[:3].clamp_min(floor).rsqrt(),
        body=body_c.clamp_min(floor).rsqrt().view(23, 3),
        trans=curvature[72:75].clamp_min(floor).rsqrt(),
        betas=curvature[75:].clamp_min(floor).rsqrt(),
    )
