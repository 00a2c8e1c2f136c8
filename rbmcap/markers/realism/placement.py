"""Placement error: where and how the plate actually sits, constant over a sequence."""

from __future__ import annotations

import numpy as np

from rbmcap.markers.realism.config import PlacementConfig


def sample_placement(
    config: PlacementConfig, num_markers: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Per-marker placement offsets in the plate frame (x = skin normal).

    Returns:
        offset (N, 3) in metres, (0, slide_y, slide_z): a slide along the tangent plane (a
        first-order slide along the surface, exact for the flat skin under the plate), and
        rotvec (N, 3) in radians, (spin about the normal, tilt about y, tilt about z).
    """
    slide = rng.normal(0.0, 1.0, (num_markers, 2)) * (config.slide_mm * 1e-3)
    angles = rng.normal(0.0, 1.0, (num_markers, 3)) * np.deg2rad(
        [config.spin_deg, config.tilt_deg, config.tilt_deg]
    )
    offset = np.concatenate([np.zeros((num_markers, 1)), slide], axis=1)
    return offset, angles
