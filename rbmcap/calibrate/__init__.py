"""Calibration of a real capture on a T-pose (design §8).

- :mod:`~rbmcap.calibrate.tpose`: the stillest window near the start.
- :mod:`~rbmcap.calibrate.virtual`: the virtual T-pose plates as a function of the shape.
- :mod:`~rbmcap.calibrate.shape`: betas from the T-pose plate positions.
- :mod:`~rbmcap.calibrate.offsets`: per-plate offsets and their inverse on a capture.
- :mod:`~rbmcap.calibrate.file`: the calibration YAML.
- :mod:`~rbmcap.calibrate.fit`: all of it in one call.
"""

from rbmcap.calibrate.file import Calibration, PlateOffset
from rbmcap.calibrate.fit import calibrate
from rbmcap.calibrate.offsets import apply_calibration, plate_offsets
from rbmcap.calibrate.shape import fit_betas
from rbmcap.calibrate.tpose import detect_tpose, plate_speed
from rbmcap.calibrate.virtual import virtual_tpose

__all__ = [
    "Calibration",
    "PlateOffset",
    "apply_calibration",
    "calibrate",
    "detect_tpose",
    "fit_betas",
    "plate_offsets",
    "plate_speed",
    "virtual_tpose",
]
