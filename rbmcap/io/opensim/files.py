"""OpenSim's text files: marker trajectories (``.trc``) and coordinates (``.mot``).

Both are written without OpenSim (plain text, atomically) and read by OpenSim's own API
(``TimeSeriesTableVec3`` / ``MarkerData`` for a ``.trc``, ``Storage`` / ``TimeSeriesTable`` for a
``.mot``).

Frames: rbmcap's world is Z up (metres); OpenSim's is Y up. Positions cross the edge through
:data:`Z_UP_TO_Y_UP` (a rotation of −90° about x: ``(x, y, z) → (x, z, −y)``), so heights become
OpenSim's y. A ``.trc`` is written in millimetres (``Units mm``, what OpenSim's examples use) or
metres (``Units m``); a ``.mot`` holds angles in degrees (``inDegrees=yes``) and translations in
metres.

``.trc`` layout (tab separated)::

    PathFileType  4  (X/Y/Z)  NAME
    DataRate CameraRate NumFrames NumMarkers Units OrigDataRate OrigDataStartFrame OrigNumFrames
    60.00    60.00      T         N          mm    60.00        1                  T
    Frame#  Time  M1 _ _  M2 _ _ ...
                  X1 Y1 Z1 X2 Y2 Z2 ...
    (blank line, then one row per frame: frame number from 1, time in s, X Y Z per marker)

A marker missing in a frame (NaN) is written as empty fields, as OpenSim writes gaps.
"""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np

from rbmcap.atomic import write_text_atomic
from rbmcap.errors import DataError, FormatError

Z_UP_TO_Y_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
"""C: rbmcap's world (Z up) to OpenSim's world (Y up); a rotation of −90° about x."""

UNIT_SCALE = {"mm": 1000.0, "m": 1.0}
"""Factor from metres to each ``.trc`` unit."""


def zup_to_yup(points: np.ndarray) -> np.ndarray:
    """Points (..., 3) in rbmcap's Z-up world → OpenSim's Y-up world (same units)."""
    return np.asarray(points, dtype=np.float64) @ Z_UP_TO_Y_UP.T


def _check_name(name: str, what: str) -> None:
    if not name or any(c.isspace() for c in name):
        raise DataError(f"{what} {name!r}: OpenSim column names must be non-empty, no whitespace")


def _check_rate(rate: float) -> None:
    if not (math.isfinite(rate) and rate > 0):
        raise DataError(f"frame rate {rate}: must be a positive number")


def trc_text(
    names: list[str], positions: np.ndarray, rate: float, *, units: str = "mm", label: str = "m"
) -> str:
    """The ``.trc`` text of marker ``positions`` (T, N, 3), metres, **Y up** (OpenSim's world;
    see :func:`zup_to_yup`) at ``rate`` Hz, written in ``units`` ('mm' or 'm')."""
    pos = np.asarray(positions, dtype=np.float64)
    if units not in UNIT_SCALE:
        raise DataError(f"units {units!r}: expected one of {', '.join(UNIT_SCALE)}")
    if pos.ndim != 3 or pos.shape[2] != 3 or pos.shape[1] != len(names) or len(pos) == 0:
        raise DataError(f"marker positions {pos.shape}: expected (T ≥ 1, {len(names)}, 3)")
    if np.isinf(pos).any():
        raise DataError("marker positions: infinite values")
    _check_rate(rate)
    for name in names:
        _check_name(name, "marker")
    if len(set(names)) != len(names):
        raise DataError("marker names: duplicates")
    num, count = pos.shape[:2]
    head = [
        f"PathFileType\t4\t(X/Y/Z)\t{label}",
        "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame"
        "\tOrigNumFrames",
        f"{rate:.2f}\t{rate:.2f}\t{num}\t{count}\t{units}\t{rate:.2f}\t1\t{num}",
        "Frame#\tTime\t" + "\t".join(f"{n}\t\t" for n in names).rstrip("\t"),
        "\t\t" + "\t".join(f"X{i}\tY{i}\tZ{i}" for i in range(1, count + 1)),
        "",
    ]
    values = (pos * UNIT_SCALE[units]).reshape(num, count * 3)
    rows = [_trc_row(i, values[i], rate) for i in range(num)]
    return "\n".join(head + rows) + "\n"


def _trc_row(i: int, values: np.ndarray, rate: float) -> str:
    fields = ["" if math.isnan(v) else f"{v:.6f}" for v in values]
    return f"{i + 1}\t{i / rate:.6f}\t" + "\t".join(fields)


def write_trc(
    path: str | os.PathLike, names: list[str], positions: np.ndarray, rate: float, **kw
) -> Path:
    """Write a ``.trc`` atomically (:func:`trc_text` for the arguments)."""
    return write_text_atomic(path, trc_text(names, positions, rate, label=Path(path).name, **kw))


def mot_text(names: list[str], values: np.ndarray, rate: float, *, label: str = "coordinates"):
    """The ``.mot`` text of ``values`` (T, C): one column per name, angles in degrees,
    translations in metres, at ``rate`` Hz from time 0 (``inDegrees=yes``)."""
    vals = np.asarray(values, dtype=np.float64)
    if vals.ndim != 2 or vals.shape[1] != len(names) or len(vals) == 0:
        raise DataError(f"coordinates {vals.shape}: expected (T ≥ 1, {len(names)})")
    if not np.isfinite(vals).all():
        raise DataError("coordinates: NaN or infinite values")
    _check_rate(rate)
    for name in names:
        _check_name(name, "coordinate")
    num = len(vals)
    table = np.column_stack([np.arange(num) / rate, vals])
    buffer = io.StringIO()
    np.savetxt(buffer, table, fmt="%.8f", delimiter="\t")
    head = [
        label,
        "version=1",
        f"nRows={num}",
        f"nColumns={len(names) + 1}",
        "inDegrees=yes",
        "endheader",
        "time\t" + "\t".join(names),
    ]
    return "\n".join(head) + "\n" + buffer.getvalue()


def write_mot(path: str | os.PathLike, names: list[str], values: np.ndarray, rate: float) -> Path:
    """Write a ``.mot`` atomically (:func:`mot_text` for the arguments)."""
    return write_text_atomic(path, mot_text(names, values, rate, label=Path(path).stem))


def read_mot(path: str | os.PathLike) -> tuple[list[str], np.ndarray]:
    """A ``.mot``/``.sto`` file's column names (``time`` first) and values (T, C), as written
    (degrees stay degrees). Raises FormatError with ``file:line`` on a malformed file."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    ends = [i for i, line in enumerate(lines) if line.strip().lower() == "endheader"]
    if not ends or ends[0] + 1 >= len(lines):
        raise FormatError(f"{path}: no 'endheader' line followed by column names")
    start = ends[0] + 1
    names = lines[start].split()
    rows = []
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if not line.strip():
            continue
        try:
            row = [float(x) for x in line.split()]
        except ValueError as exc:
            raise FormatError(f"{path}:{number}: {exc}") from None
        if len(row) != len(names):
            raise FormatError(f"{path}:{number}: {len(row)} values, expected {len(names)}")
        rows.append(row)
    return names, np.array(rows, dtype=np.float64).reshape(-1, len(names))
