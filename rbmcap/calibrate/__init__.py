"""Calibration of a real session: physical plates → their virtual counterparts.

- :mod:`~rbmcap.calibrate.calibration`: the :class:`Calibration` (shape and per-plate offsets):
  the offsets' formula, applying it to plates and captures, the calibration YAML.
- :mod:`~rbmcap.calibrate.session_fit`: a session's captures calibrated in one call
  (:func:`calibrate`), and ``rbmcap calibrate`` on files (:func:`calibrate_files`).
- :mod:`~rbmcap.calibrate.frames`: which frames of each capture the fit uses.
- :mod:`~rbmcap.calibrate.start`: each frame's heading from plate positions; left/right checks.
- :mod:`~rbmcap.calibrate.objective`: the fit over frames (betas, poses, plate offsets).
- :mod:`~rbmcap.calibrate.report`: diagnostics; :mod:`~rbmcap.calibrate.determination`: what
  the frames determine, for the poses; :mod:`~rbmcap.calibrate.takes`: whole takes.
- :mod:`~rbmcap.calibrate.tpose_fit`: the quick start on a T-pose (:func:`calibrate_tpose`).
- :mod:`~rbmcap.calibrate.functional`: joint centres and hinge axes from two plates' motion
  (:class:`FunctionalJoint`), what the solver draws the body's joints and hinges to.
"""

from rbmcap.calibrate.calibration import (
    Calibration,
    PlateOffset,
    PlateOffsets,
    offsets_between,
    to_physical,
    to_virtual,
)
from rbmcap.calibrate.functional import FunctionalJoint, measure_joints
from rbmcap.calibrate.objective import FitWeights, SessionFit
from rbmcap.calibrate.report import CalibrationReport
from rbmcap.calibrate.session_fit import calibrate, calibrate_files
from rbmcap.calibrate.takes import check_takes
from rbmcap.calibrate.tpose_fit import (
    calibrate_tpose,
    detect_tpose,
    fit_betas,
    plate_speed,
    virtual_tpose,
)

__all__ = [
    "Calibration",
    "CalibrationReport",
    "FitWeights",
    "FunctionalJoint",
    "PlateOffset",
    "PlateOffsets",
    "SessionFit",
    "calibrate",
    "calibrate_files",
    "calibrate_tpose",
    "check_takes",
    "detect_tpose",
    "fit_betas",
    "measure_joints",
    "offsets_between",
    "plate_speed",
    "to_physical",
    "to_virtual",
    "virtual_tpose",
]
