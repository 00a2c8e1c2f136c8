"""Optical noise: white, per-frame errors of the tracked plate pose, in the world frame."""

from __future__ import annotations

import numpy as np

from rbmcap.markers.realism.config import NoiseConfig


def sample_optical_noise(
    config: NoiseConfig, num_frames: int, num_markers: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Position error (T, N, 3) in metres and rotation-vector error (T, N, 3) in radians."""
    both = rng.normal(0.0, 1.0, (num_frames, num_markers, 6))
    return both[..., :3] * (config.position_mm * 1e-3), both[..., 3:] * np.deg2rad(
        config.rotation_deg
    )
