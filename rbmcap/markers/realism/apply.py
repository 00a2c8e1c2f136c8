"""Sampling all realism models for a sequence and applying them to ideal plate poses.

Order, as in a real capture: the plate is strapped on with a placement error (constant, plate
frame), wobbles with the soft tissue under it (plate frame), is measured with optical noise
(world frame) and is sometimes not seen at all (occlusion). For a plate with ideal pose (p, R):

    p' = p + R (t_place + t_wobble(t)) + n_p(t)
    R' = exp(n_r(t)) · R · exp(r_place) · exp(r_wobble(t))

Occluded entries hold p' = 0 and R' = I and ``valid = False``: readers must mask them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.markers.realism.config import RealismConfig
from rbmcap.markers.realism.noise import sample_optical_noise
from rbmcap.markers.realism.occlusion import sample_valid
from rbmcap.markers.realism.placement import sample_placement
from rbmcap.markers.realism.seeding import sequence_rng
from rbmcap.markers.realism.soft_tissue import sample_wobble


@dataclass
class Perturbation:
    """Sampled realism of one sequence (metres, radians); ``None`` where a model is off.

    Attributes:
        place_offset: (N, 3) plate-frame offset; place_rotvec: (N, 3) plate-frame rotation.
        wobble_offset, wobble_rotvec: (T, N, 3) plate-frame soft-tissue motion.
        noise_pos, noise_rotvec: (T, N, 3) world-frame optical noise.
        valid: (T, N) bool tracking validity.
    """

    place_offset: np.ndarray | None = None
    place_rotvec: np.ndarray | None = None
    wobble_offset: np.ndarray | None = None
    wobble_rotvec: np.ndarray | None = None
    noise_pos: np.ndarray | None = None
    noise_rotvec: np.ndarray | None = None
    valid: np.ndarray | None = None


def sample_perturbation(
    config: RealismConfig, num_frames: int, num_markers: int, fps: float, seed: int, key: str
) -> Perturbation:
    """Draw every enabled model for a sequence identified by ``key`` (its name) under ``seed``."""
    out = Perturbation()
    p, s, n, o = config.placement, config.soft_tissue, config.noise, config.occlusion
    if p.slide_mm > 0 or p.spin_deg > 0 or p.tilt_deg > 0:
        out.place_offset, out.place_rotvec = sample_placement(
            p, num_markers, sequence_rng(seed, key, "placement")
        )
    if s.position_mm > 0 or s.rotation_deg > 0:
        out.wobble_offset, out.wobble_rotvec = sample_wobble(
            s, num_frames, num_markers, fps, sequence_rng(seed, key, "soft_tissue")
        )
    if n.position_mm > 0 or n.rotation_deg > 0:
        out.noise_pos, out.noise_rotvec = sample_optical_noise(
            n, num_frames, num_markers, sequence_rng(seed, key, "noise")
        )
    if o.rate_per_min > 0:
        out.valid = sample_valid(
            o, num_frames, num_markers, fps, sequence_rng(seed, key, "occlusion")
        )
    return out


def apply_perturbation(
    pert: Perturbation, start: int, pos: torch.Tensor, rot: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Perturb the frames [start, start + C) of a sequence.

    Args:
        pert: from :func:`sample_perturbation` for the whole sequence.
        start: index of the chunk's first frame in the sequence.
        pos: (C, N, 3) ideal plate positions; rot: (C, N, 3, 3) ideal world-from-plate rotations.

    Returns:
        pos (C, N, 3), rot (C, N, 3, 3) and valid (C, N) bool.
    """
    c = pos.shape[0]
    sl = slice(start, start + c)

    def t(x: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(x, dtype=pos.dtype, device=pos.device)

    offset = None
    if pert.place_offset is not None:
        offset = t(pert.place_offset).expand(c, -1, -1)
    if pert.wobble_offset is not None:
        w = t(pert.wobble_offset[sl])
        offset = w if offset is None else offset + w
    if offset is not None:
        pos = pos + (rot @ offset[..., None])[..., 0]
    if pert.place_rotvec is not None:
        rot = rot @ roma.rotvec_to_rotmat(t(pert.place_rotvec))
    if pert.wobble_rotvec is not None:
        rot = rot @ roma.rotvec_to_rotmat(t(pert.wobble_rotvec[sl]))
    if pert.noise_pos is not None:
        pos = pos + t(pert.noise_pos[sl])
    if pert.noise_rotvec is not None:
        rot = roma.rotvec_to_rotmat(t(pert.noise_rotvec[sl])) @ rot
    if pert.valid is None:
        valid = torch.ones(pos.shape[:2], dtype=torch.bool, device=pos.device)
    else:
        valid = torch.as_tensor(pert.valid[sl], device=pos.device)
        hidden = ~valid
        pos = pos.masked_fill(hidden[..., None], 0.0)
        eye = torch.eye(3, dtype=rot.dtype, device=rot.device)
        rot = torch.where(hidden[..., None, None], eye, rot)
    return pos, rot, valid
