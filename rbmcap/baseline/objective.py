"""The solver's objective, term by term, for a window of T frames.

    E = Σ_t Σ_i v_ti (‖p̂_ti − p_ti‖² / σ_p² + θ(R̂_ti, R_ti)² / σ_r²)    data (θ: plates only)
      + Σ_t w_prior · NLL_GMM(θ_body,t) + w_l2 · ‖θ_body,t‖²               pose prior
      + Σ_t Σ_i ‖Δ² p̂_ti · fps²‖² / σ_a²                                   smoothness
      + w_β ‖β − β₀‖²                                                      shape prior
      + Σ_t Σ_k m_tk ‖J_tk − c_tk‖² / σ_j²                                  joint centres

(the last only where a calibration measured joint centres c from the plates' motion,
:mod:`rbmcap.calibrate.functional`; m marks the frames where both plates of joint k are seen)

(β₀: the start's betas, another method's estimate of the shape, or zero).

p̂, R̂ are the plate frames of the posed body (sparse skinning of the marker vertices and their
one-rings, then :func:`rbmcap.markers.plates.plate_frames`), p, R the observations, v the
validity mask, θ the geodesic angle, Δ² the second difference over time. Sums over frames (not
means) keep the gradient of each frame's parameters independent of the window length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import roma
import torch

from rbmcap.baseline.config import WeightsConfig
from rbmcap.baseline.prior import GaussianMixturePrior
from rbmcap.geometry.rotations import rotmat_geodesic_angle
from rbmcap.markers.plates import PlateTopology, plate_frames


@dataclass
class WindowObservations:
    """Observations of a window: pos (T, N, 3) m, rot (T, N, 3, 3) or None for point markers,
    valid (T, N) bool (invalid entries hold finite placeholders), fps."""

    pos: torch.Tensor
    rot: torch.Tensor | None
    valid: torch.Tensor
    fps: float


def compose_rotmats(omega: torch.Tensor, root_base: torch.Tensor, body_pose: torch.Tensor):
    """Local rotations (T, 24, 3, 3) from the global exp(ω)·R_base and the body axis-angle
    (T, 23, 3). The global orientation is a correction ω (T, 3) of the start R_base (T, 3, 3), so
    it never meets the axis-angle singularity at π."""
    root = roma.rotvec_to_rotmat(omega) @ root_base
    return torch.cat([root[:, None], roma.rotvec_to_rotmat(body_pose)], dim=1)


def predict_markers(body, topology: PlateTopology, rotmats, betas, trans):
    """Plate frames of the posed body: pos (T, N, 3), rot (T, N, 3, 3)."""
    return plate_frames(body.skin_vertices(topology.skin_ids, rotmats, betas, trans), topology)


def predict_markers_and_joints(body, topology: PlateTopology, rotmats, betas, trans):
    """Plate frames and joints of the posed body from one pass: pos (T, N, 3), rot
    (T, N, 3, 3), joints (T, 24, 3)."""
    verts, joints = body.skin_vertices_and_joints(topology.skin_ids, rotmats, betas, trans)
    return (*plate_frames(verts, topology), joints)


def objective_terms(
    pred_pos: torch.Tensor,
    pred_rot: torch.Tensor,
    obs: WindowObservations,
    body_pose: torch.Tensor,
    betas: torch.Tensor,
    weights: WeightsConfig,
    prior: GaussianMixturePrior | None,
    context_pos: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """The terms of E (scalars, summed over the window), keyed position, rotation, prior,
    smoothness, betas.

    Args:
        pred_pos, pred_rot: predicted plate frames (T, N, 3), (T, N, 3, 3).
        obs: the observations.
        body_pose: (T, 23, 3) axis-angle of joints 1..23.
        betas: (B,) shape.
        weights: term weights and scales.
        prior: the pose prior (None: only ``pose_l2``).
        context_pos: (C, N, 3) predicted positions of the C ≤ 2 frames solved just before this
            window (held fixed), so the smoothness term continues across window boundaries.
    """
    w = obs.valid.to(pred_pos.dtype)
    sp = weights.position_sigma_mm * 1e-3
    terms = {"position": (w * ((pred_pos - obs.pos) ** 2).sum(-1)).sum() / sp**2}
    if obs.rot is not None:
        sr = math.radians(weights.rotation_sigma_deg)
        terms["rotation"] = (w * rotmat_geodesic_angle(pred_rot, obs.rot) ** 2).sum() / sr**2
    zero = pred_pos.new_zeros(())
    prior_term = zero
    if prior is not None and weights.prior > 0:
        prior_term = weights.prior * prior.neg_log_likelihood(body_pose).sum()
    if weights.pose_l2 > 0:
        prior_term = prior_term + weights.pose_l2 * (body_pose**2).sum()
    terms["prior"] = prior_term
    smooth = zero
    if weights.accel_sigma > 0:
        path = pred_pos if context_pos is None else torch.cat([context_pos, pred_pos], 0)
        if path.shape[0] >= 3:
            acc = (path[2:] - 2 * path[1:-1] + path[:-2]) * obs.fps**2
            smooth = (acc**2).sum() / weights.accel_sigma**2
    terms["smoothness"] = smooth
    terms["betas"] = weights.betas * (betas**2).sum()
    return terms
