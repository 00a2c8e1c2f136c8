"""Calibration of a real session: physical plates → their virtual counterparts.

- :mod:`~rbmcap.calibrate.frames`: which frames of each capture the fit uses.
- :mod:`~rbmcap.calibrate.start`: each frame's heading from plate positions; left/right checks.
- :mod:`~rbmcap.calibrate.session`: the fit over frames (betas, poses, plate offsets).
- :mod:`~rbmcap.calibrate.report`: diagnostics; :mod:`~rbmcap.calibrate.takes`: whole takes.
- :mod:`~rbmcap.calibrate.fit`: all of it in one call (:func:`calibrate`).
- :mod:`~rbmcap.calibrate.tposefit`: the quick start on a T-pose (:func:`calibrate_tpose`).
- :mod:`~rbmcap.calibrate.offsets`: per-plate offsets and their inverse on a capture.
- :mod:`~rbmcap.calibrate.file`: the calibration YAML.
"""

from rbmcap.calibrate.file import Calibration, PlateOffset
from rbmcap.calibrate.fit import calibrate
from rbmcap.calibrate.offsets import apply_calibration, plate_offsets
from rbmcap.calibrate.report import CalibrationReport
from rbmcap.calibrate.session import FitWeights, SessionFit
from rbmcap.calibrate.shape import fit_betas
from rbmcap.calibrate.takes import check_takes
from rbmcap.calibrate.tpose import detect_tpose, plate_speed
from rbmcap.calibrate.tposefit import calibrate_tpose
from rbmcap.calibrate.virtual import virtual_tpose

__all__ = [
    "Calibration",
    "CalibrationReport",
    "FitWeights",
    "PlateOffset",
    "SessionFit",
    "apply_calibration",
    "calibrate",
    "calibrate_tpose",
    "check_takes",
    "detect_tpose",
    "fit_betas",
    "plate_offsets",
    "plate_speed",
    "virtual_tpose",
]
