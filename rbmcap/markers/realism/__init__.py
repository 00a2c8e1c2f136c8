"""Realism models: placement error, soft-tissue wobble, optical noise, occlusion.

Units are documented on each config field (:mod:`rbmcap.markers.realism.config`); presets live in
``conf/realism/``. Every function takes a numpy ``Generator``; per-sequence streams come from
:func:`sequence_rng` so the same seed gives the same bytes however the work is split.
"""

from rbmcap.markers.realism.apply import Perturbation, apply_perturbation, sample_perturbation
from rbmcap.markers.realism.config import (
    NoiseConfig,
    OcclusionConfig,
    PlacementConfig,
    RealismConfig,
    SoftTissueConfig,
    available_realism,
    load_realism,
)
from rbmcap.markers.realism.noise import sample_optical_noise
from rbmcap.markers.realism.occlusion import gap_lengths, sample_gaps, sample_valid
from rbmcap.markers.realism.placement import sample_placement
from rbmcap.markers.realism.seeding import sequence_rng
from rbmcap.markers.realism.soft_tissue import sample_wobble, smooth_noise

__all__ = [
    "NoiseConfig",
    "OcclusionConfig",
    "Perturbation",
    "PlacementConfig",
    "RealismConfig",
    "SoftTissueConfig",
    "apply_perturbation",
    "available_realism",
    "gap_lengths",
    "load_realism",
    "sample_gaps",
    "sample_optical_noise",
    "sample_perturbation",
    "sample_placement",
    "sample_valid",
    "sample_wobble",
    "sequence_rng",
    "smooth_noise",
]
