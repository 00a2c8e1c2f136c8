"""The joint angles a C3D carries: a gait model's outputs (Plug-in Gait's ``LHipAngles`` …).

Vicon Nexus stores each angle set as a ``POINT`` of three components in degrees (listed under
``POINT:ANGLES``, units in ``POINT:ANGLE_UNITS``); a frame the model could not compute holds a
negative residual or all zeros.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.errors import DataError
from rbmcap.io.c3d import _labels, _open, _param  # ezc3d behind c3d's checks and worker


@dataclass
class CaptureAngles:
    """Angle sets of a C3D file.

    Attributes:
        angles: ``{name: (T, 3) degrees}``, NaN where the model gave none.
        fps: the point rate.
        path: the file.
    """

    angles: dict[str, np.ndarray]
    fps: float
    path: Path


def read_c3d_angles(path: str | os.PathLike) -> CaptureAngles:
    """The angle sets of a C3D file (the points named by ``POINT:ANGLES``, or else every point
    whose label ends in ``Angles``/``Angle``), in degrees.

    Raises:
        FormatError: the file cannot be read.
        DataError: it carries no angles.
    """
    path = Path(path)
    c = _open(path)
    params = c["parameters"]
    data = np.asarray(c["data"]["points"], dtype=np.float64)
    labels = _labels(params, "POINT", data.shape[1])
    listed = [str(s).strip() for s in (_param(params, "POINT", "ANGLES") or [])]
    names = [n for n in labels if n in listed] or [
        n for n in labels if n.endswith(("Angles", "Angle"))
    ]
    if not names:
        raise DataError(
            f"{path}: no joint angles (no POINT:ANGLES and no point named …Angles); export the "
            "model outputs (Plug-in Gait's angles) with the trial"
        )
    units = _param(params, "POINT", "ANGLE_UNITS")
    scale = 180.0 / np.pi if units is not None and str(units[0]).strip().lower() == "rad" else 1.0
    residuals = c["data"]["meta_points"].get("residuals")
    angles = {}
    for name in names:
        k = labels.index(name)
        values = data[:3, k].T * scale
        missing = ~np.isfinite(values).all(-1) | (np.abs(values).sum(-1) == 0)
        if residuals is not None and np.size(residuals):
            missing |= np.asarray(residuals).reshape(-1, data.shape[1], data.shape[2])[0, k] < 0
        values[missing] = np.nan
        angles[name] = values
    rate = float(
        np.asarray(
            _param(params, "POINT", "RATE") or [c["header"]["points"]["frame_rate"]]
        ).ravel()[0]
    )
    return CaptureAngles(angles, rate, path)
