"""OptiTrack Motive CSV exports (format versions 1.2x) as a :class:`~rbmcap.io.capture.Capture`.

Layout: a first row of ``key,value`` pairs (``Format Version``, ``Capture Frame
Rate``, ``Export Frame Rate``, ``Rotation Type``, ``Length Units``, ``Coordinate Space``, …), a
blank row, then the header rows ``Type``, ``Name``, ``ID`` (optional), a kind row (``Rotation``,
``Position``, ``Mean Marker Error`` / ``Error Per Marker``, ``Marker Quality``) and an axis row
(``Frame``, ``Time``, ``X,Y,Z,W`` / ``X,Y,Z``); then one row per frame. The label cell of the
header rows may be empty.

What becomes what:

- ``Rigid Body`` (and ``Bone``) objects → plates, named by the Name row; pose = Rotation +
  Position; an empty cell makes the frame invalid; an object empty throughout is an error.
- ``Rigid Body Marker`` (and ``Bone Marker``) and ``Marker`` objects → labelled points under
  Motive's own names, which already tell them apart: ``Rigid Body 1_1`` is where the rigid body's
  *definition* puts its first marker, ``Rigid Body 1:Marker1`` the measured marker
  (``Unlabeled:108`` an unlabelled one). A name seen twice gets `` #2``, `` #3``… appended.
  Points empty throughout are kept (all invalid): Motive writes such columns.
- The rigid bodies' ``Mean Marker Error`` / ``Error Per Marker`` go to ``extra['marker_error_m']``
  (T, N) metres (NaN where absent); ``Marker Quality`` is ignored.

Conventions applied at import:

- **World**: Motive is Y up. The Z-up world keeps X and turns +Y into +Z, i.e. a +90° rotation
  about X: ``A = [[1, 0, 0], [0, 0, -1], [0, 1, 0]]`` (det +1, so a right-handed frame stays
  right-handed); positions ``p_z = A p_y`` ((x, y, z) → (x, −z, y)), rotations ``R_z = A R_y``.
- **Rotations**: ``Quaternion`` columns X,Y,Z,W are (x, y, z, w), roma's XYZW order, of the
  world-from-body rotation. Euler types (``XYZ``, ``XZY``, ``YXZ``, ``YZX``, ``ZXY``, ``ZYX``)
  are degrees, the angle of each axis read from the column of that axis, composed *intrinsic*
  in the named order: ``'XYZ'`` means ``R = Rx(x) · Ry(y) · Rz(z)`` (roma convention ``'XYZ'``).
- **Lengths**: ``Meters``, ``Centimeters`` or ``Millimeters`` → metres.
- ``Coordinate Space`` is not acted on: rigid bodies are world poses in every export; a skeleton
  exported in ``Local`` space gives parent-relative ``Bone`` poses, read as they are. The first
  row's pairs are kept in ``extra['settings']``.

Every malformed input raises one :class:`~rbmcap.errors.FormatError` naming the file and, where
it applies, the line (1-based) and column (1-based).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.errors import DataError, FormatError
from rbmcap.geometry import ROTATION_TOLERANCE
from rbmcap.io.capture import Capture

Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
"""(3, 3) rotation taking Motive's Y-up world to rbmcap's Z-up world (+90° about X)."""

LENGTH_UNITS = {"meters": 1.0, "centimeters": 0.01, "millimeters": 0.001}
EULER_TYPES = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
PLATE_TYPES = ("Rigid Body", "Bone")
POINT_TYPES = ("Rigid Body Marker", "Bone Marker", "Marker")
MAX_FRAME = 1e15
"""Frame numbers must be whole and below this (int64 holds them exactly)."""
ERROR_KINDS = ("Mean Marker Error", "Error Per Marker")


def looks_like_optitrack(text: str) -> bool:
    """Whether ``text`` (the start of a file) opens with Motive's ``Format Version`` row."""
    first = text.lstrip("\ufeff").split("\n", 1)[0].strip().strip('"')
    return first.lower().startswith("format version")


@dataclass
class _Column:
    """One object's columns: type, name, and {(kind, axis): column index}."""

    type: str
    name: str
    line: int
    first: int
    cols: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass
class _Header:
    settings: dict[str, str]
    objects: list[_Column]
    width: int
    data_line: int  # 1-based line of the first data row
    columns: dict[str, int] = field(default_factory=dict)  # 1-based column of each setting


def read_optitrack(path: str | Path) -> Capture:
    """Read a Motive CSV export (world Z up, metres; see the module docstring).

    Returns:
        a Capture with plates ``(T, N)`` from the rigid bodies and, when the file has marker
        columns, points ``(T, M, 3)``; ``format='optitrack'``, ``residual_mm`` NaN.

    Raises:
        FormatError: naming the file (and line, column) for every malformed input.
    """
    path = Path(path)
    rows = _read_rows(path)
    head = _parse_header(path, rows)
    scale, rot_type, fps = _settings(path, head.settings, head.columns)
    data = rows[head.data_line - 1 :]
    while data and not any(c.strip() for c in data[-1]):
        data.pop()
    if not data:
        raise FormatError(f"{path}: no data rows after the header")
    table = _numbers(path, data, head)
    frames = table[:, 0]
    if np.isnan(frames).any():
        bad = int(np.flatnonzero(np.isnan(frames))[0])
        raise FormatError(f"{path}:{head.data_line + bad}:1: empty frame number")
    whole = (np.abs(frames) < MAX_FRAME) & (frames == np.round(frames))
    if not whole.all():
        bad = int(np.flatnonzero(~whole)[0])
        raise FormatError(
            f"{path}:{head.data_line + bad}:1: frame number {frames[bad]:g} is not a whole "
            f"number below {MAX_FRAME:.0e}"
        )
    plates = [o for o in head.objects if o.type in PLATE_TYPES]
    points = [o for o in head.objects if o.type in POINT_TYPES]
    pos, rot, valid, err = _plates(path, table, plates, rot_type, scale, head.data_line)
    pnames, pts, pvalid = _points(path, table, points, scale)
    return Capture(
        fps=fps,
        names=[o.name for o in plates],
        pos=pos,
        rot=rot,
        valid=valid,
        frame_numbers=frames.astype(np.int64),
        format="optitrack",
        source=str(path),
        point_names=pnames if points else None,
        points=pts if points else None,
        point_valid=pvalid if points else None,
        extra={"marker_error_m": err, "settings": head.settings},
    )


def _read_rows(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raw = exc.object[: exc.start]
        line, col = raw.count(b"\n") + 1, exc.start - raw.rfind(b"\n")
        raise FormatError(f"{path}:{line}:{col}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return list(csv.reader(text.splitlines()))
    except csv.Error as exc:
        raise FormatError(f"{path}: not a CSV file ({exc})") from None


def _strip(row: list[str]) -> list[str]:
    """``row`` without its trailing empty cells (comma padding)."""
    end = len(row)
    while end and not row[end - 1].strip():
        end -= 1
    return [c.strip() for c in row[:end]]


def _parse_header(path: Path, rows: list[list[str]]) -> _Header:
    if not rows or not looks_like_optitrack(",".join(rows[0])):
        raise FormatError(f"{path}:1:1: not an OptiTrack Motive CSV (no 'Format Version' row)")
    first = _strip(rows[0])
    settings = {first[i]: first[i + 1] for i in range(0, len(first) - 1, 2)}
    columns = {first[i]: i + 2 for i in range(0, len(first) - 1, 2)}
    axis = next((i for i, r in enumerate(rows) if r and r[0].strip().lower() == "frame"), None)
    if axis is None:
        raise FormatError(f"{path}: missing the header's axis row (Frame, Time, X, Y, Z, …)")
    start = 1
    while start < axis and not any(c.strip() for c in rows[start]):
        start += 1
    block = rows[start:axis]
    if len(block) < 3:
        raise FormatError(
            f"{path}:{start + 1}:1: missing header rows: expected Type, Name, (ID,) and the "
            f"kind row before the axis row on line {axis + 1}, found {len(block)}"
        )
    type_row, name_row, kind_row = block[0], block[1], block[-1]
    width = len(_strip(kind_row))
    for i, r in enumerate([*block, rows[axis]]):
        if len(_strip(r)) > max(width, 2) and i != len(block):
            raise FormatError(
                f"{path}:{start + i + 1}:{len(_strip(r))}: header row has "
                f"{len(_strip(r))} cells, the kind row {width}"
            )
    objects = _objects(path, start, type_row, name_row, kind_row, rows[axis], width)
    return _Header(settings, objects, width, axis + 2, columns)


def _cell(row: list[str], j: int) -> str:
    return row[j].strip() if j < len(row) else ""


def _objects(path, start, type_row, name_row, kind_row, axis_row, width) -> list[_Column]:
    """Group columns 3.. into objects by (type, name); kinds and axes per column."""
    objects: list[_Column] = []
    for j in range(2, width):
        typ, name = _cell(type_row, j), _cell(name_row, j)
        kind, ax = _cell(kind_row, j), _cell(axis_row, j).upper()
        if not typ or not name:
            raise FormatError(
                f"{path}:{start + (2 if typ else 1)}:{j + 1}: empty "
                f"{'Name' if typ else 'Type'} cell over a data column"
            )
        obj = objects[-1] if objects else None
        if obj is None or (obj.type, obj.name) != (typ, name) or (kind, ax) in obj.cols:
            obj = _Column(typ, name, start + 2, j)
            objects.append(obj)
        obj.cols[(kind, ax)] = j
    return objects


def _settings(path: Path, settings: dict[str, str], columns=None) -> tuple[float, str, float]:
    """(metres per length unit, rotation type, frame rate) from the first row (``columns``: the
    1-based column of each setting's value, for messages)."""

    def at(key: str) -> str:
        col = (columns or {}).get(key)
        return f"{path}:1:{col}" if col else f"{path}:1"

    units = settings.get("Length Units", "Meters")
    if units.lower() not in LENGTH_UNITS:
        raise FormatError(
            f"{at('Length Units')}: unknown Length Units {units!r}; expected one of "
            f"{', '.join(u.title() for u in LENGTH_UNITS)}"
        )
    rot_type = settings.get("Rotation Type", "Quaternion")
    if rot_type.lower() != "quaternion" and rot_type.upper() not in EULER_TYPES:
        raise FormatError(
            f"{at('Rotation Type')}: unknown Rotation Type {rot_type!r}; expected "
            f"Quaternion or one of {', '.join(EULER_TYPES)}"
        )
    key = "Export Frame Rate" if settings.get("Export Frame Rate") else "Capture Frame Rate"
    rate = settings.get(key)
    try:
        fps = float(rate)
    except (TypeError, ValueError):
        raise FormatError(
            f"{at(key)}: no usable frame rate (Export/Capture Frame Rate is {rate!r})"
        ) from None
    if not (np.isfinite(fps) and fps > 0):
        raise FormatError(f"{at(key)}: frame rate {fps!r} is not positive")
    rt = "quaternion" if rot_type.lower() == "quaternion" else rot_type.upper()
    return LENGTH_UNITS[units.lower()], rt, fps


def _numbers(path: Path, data: list[list[str]], head: _Header) -> np.ndarray:
    """(T, width) float64 table of the data rows, NaN for empty cells."""
    width = head.width
    out = np.full((len(data), width), np.nan)
    for i, row in enumerate(data):
        line = head.data_line + i
        if len(row) > width and any(c.strip() for c in row[width:]):
            raise FormatError(
                f"{path}:{line}:{width + 1}: row has {len(_strip(row))} cells, the header {width}"
            )
        if len(row) < width:
            raise FormatError(
                f"{path}:{line}:{len(row) + 1}: row has {len(row)} cells, the header {width}"
            )
        for j in range(width):
            cell = row[j].strip()
            if cell:
                try:
                    out[i, j] = float(cell)
                except ValueError:
                    raise FormatError(f"{path}:{line}:{j + 1}: not a number: {cell!r}") from None
                if np.isinf(out[i, j]):
                    raise FormatError(f"{path}:{line}:{j + 1}: not a finite number: {cell!r}")
    return out


def _take(path: Path, table: np.ndarray, obj: _Column, kind: str, axes: str) -> np.ndarray:
    """(T, len(axes)) columns ``kind`` / ``axes`` of ``obj``; FormatError when one is missing."""
    idx = []
    for a in axes:
        j = obj.cols.get((kind, a))
        if j is None:
            raise FormatError(
                f"{path}:{obj.line}:{obj.first + 1}: {obj.type} {obj.name!r} has "
                f"no {kind} {a} column"
            )
        idx.append(j)
    return table[:, idx]


def _plates(path, table, plates, rot_type, scale, data_line):
    """Plate poses (T, N, 3), (T, N, 3, 3), valid (T, N) and marker error (T, N) in Z up."""
    t, n = len(table), len(plates)
    pos, rot = np.zeros((t, n, 3)), np.tile(np.eye(3), (t, n, 1, 1))
    valid, err = np.zeros((t, n), bool), np.full((t, n), np.nan)
    for k, obj in enumerate(plates):
        p = _take(path, table, obj, "Position", "XYZ") * scale
        if rot_type == "quaternion":
            r = _take(path, table, obj, "Rotation", "XYZW")
        else:
            r = _take(path, table, obj, "Rotation", rot_type)
        ok = ~np.isnan(p).any(1) & ~np.isnan(r).any(1)
        if not ok.any():
            raise FormatError(
                f"{path}:{obj.line}:{obj.first + 1}: {obj.type} {obj.name!r} is empty throughout"
            )
        if rot_type == "quaternion":
            _check_unit(path, obj, r, ok, data_line)
        valid[:, k], pos[ok, k] = ok, p[ok] @ Y_UP_TO_Z_UP.T
        rot[ok, k] = Y_UP_TO_Z_UP @ _rotmat(path, obj, r[ok], rot_type)
        e = next((obj.cols[(kd, "")] for kd in ERROR_KINDS if (kd, "") in obj.cols), None)
        if e is not None:
            err[:, k] = table[:, e] * scale
    return pos, rot, valid, err


def _check_unit(path: Path, obj: _Column, quats: np.ndarray, ok: np.ndarray, data_line: int):
    """A quaternion whose norm is off 1 beyond :data:`ROTATION_TOLERANCE` (a scaled rotation,
    deviation |‖q‖² − 1|) is not a rotation: DataError naming its line and column. Within the
    tolerance it is normalised, as Capture re-orthonormalises matrices."""
    norm2 = np.einsum("ti,ti->t", quats, quats)
    bad = ok & (np.abs(norm2 - 1.0) > ROTATION_TOLERANCE) & (norm2 > 1e-12)  # 0: _rotmat's error
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        col = obj.cols[("Rotation", "X")] + 1
        raise DataError(
            f"{path}:{data_line + i}:{col}: {obj.type} {obj.name!r}: quaternion of "
            f"norm {np.sqrt(norm2[i]):.6g} is not a rotation (|‖q‖² − 1| > "
            f"{ROTATION_TOLERANCE:g})"
        )


def _rotmat(path: Path, obj: _Column, r: np.ndarray, rot_type: str) -> np.ndarray:
    """(K, 3, 3) world-from-body rotations (Y up) from quaternions (K, 4) or Euler (K, 3)."""
    rt = torch.from_numpy(r)
    if rot_type == "quaternion":
        norm = rt.norm(dim=-1)
        if (norm < 1e-6).any():
            raise FormatError(
                f"{path}:{obj.line}:{obj.first + 1}: {obj.name!r} has a zero quaternion"
            )
        return roma.unitquat_to_rotmat(rt / norm[:, None]).numpy()
    return roma.euler_to_rotmat(rot_type, rt, degrees=True).numpy()


def _points(path, table, points, scale):
    """Point names (M,), positions (T, M, 3) Z up, valid (T, M)."""
    t = len(table)
    names, seen = [], {}
    pts, valid = np.zeros((t, len(points), 3)), np.zeros((t, len(points)), bool)
    for k, obj in enumerate(points):
        seen[obj.name] = seen.get(obj.name, 0) + 1
        names.append(obj.name if seen[obj.name] == 1 else f"{obj.name} #{seen[obj.name]}")
        p = _take(path, table, obj, "Position", "XYZ") * scale
        ok = ~np.isnan(p).any(1)
        valid[:, k], pts[ok, k] = ok, p[ok] @ Y_UP_TO_Z_UP.T
    return names, pts, valid
