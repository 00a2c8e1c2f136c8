"""The kinematic prior the network corrects (design §6): every bone's global rotation and the
pelvis position, read off the plates.

The estimator is shared with the solver's start and lives in
:mod:`rbmcap.geometry.plates_to_bones` (see there for what it does per joint); the network's
features (:class:`rbmcap.model.features.FeatureEncoder`) call it in the heading frame with rest
quantities at zero betas.
"""

from __future__ import annotations

from rbmcap.geometry.gaps import fill_gaps, nearest_seen
from rbmcap.geometry.plates_to_bones import PELVIS_POINTS, TORSO_CHAIN, KinematicPrior

__all__ = ["PELVIS_POINTS", "TORSO_CHAIN", "KinematicPrior", "fill_gaps", "nearest_seen"]
