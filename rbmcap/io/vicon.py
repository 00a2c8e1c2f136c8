"""Vicon CSV exports (Nexus ``Segments`` / ``Model Outputs`` / ``Joints`` / ``Trajectories``
sections, Tracker ``Global Angle`` objects) as a :class:`~rbmcap.io.capture.Capture`.

Layout: one or more sections separated by blank lines, each: a section name line, a
rate line (Hz), a names row (one ``Subject:Name`` every 3 or 6 columns from column 3), an axis
row (``Frame,Sub Frame,RX,RY,RZ,TX,TY,TZ,…`` or ``…,X,Y,Z,…``), a units row (``mm``, ``deg``),
then data rows. Tolerated: comma-padded rows, ``;`` delimiters (then a decimal comma is read
too), CRLF, a UTF-8 BOM (text is UTF-8, else Latin-1), non-ASCII header text, trimmed files
that start at the names row or at the axis row, and empty cells (an occluded object).

What becomes what:

- 6-column groups ``RX,RY,RZ,TX,TY,TZ`` of a ``Segments``, ``Joints``, ``Model Outputs`` or
  Tracker section → plates (the first such section, ``Segments`` preferred), named by the names
  row (a Tracker ``Global Angle Object:Segment`` header gives ``Object:Segment``). 3-column
  groups of those sections (model angles, forces) are not plates and are skipped.
- 3-column groups ``X,Y,Z`` of a ``Trajectories`` section → labelled points, aligned by frame
  number to the plates' frames. ``Devices`` sections are skipped.
- A frame where any cell of an object is empty is invalid for that object; a plate empty
  throughout is an error; a point empty throughout is kept (all invalid): Nexus writes such
  columns for markers not seen in a trial.
- Rows with a ``Sub Frame`` other than 0 are dropped (sub-frames belong to analog devices).
- ``frame_numbers`` are the Frame column; ``format`` the kind; ``source`` the path.

Conventions applied at import:

- **Lengths**: ``mm`` (also ``m``, ``cm``) → metres. Vicon is Z up: no axis change.
- **Rotations** (``rotation=``): ``'helical'`` (Vicon's default) reads RX,RY,RZ as an axis-angle
  vector; ``'euler_abc'`` reads them as Euler angles, the angle of each axis from the column of
  that axis, composed *intrinsic* in the named order: ``'euler_xyz'`` is
  ``R = Rx(rx) · Ry(ry) · Rz(rz)`` (roma's ``euler_to_rotmat('XYZ', …)``), the same reading as
  the OptiTrack reader's Euler types. Angles are ``deg`` or ``rad`` from the units row unless
  ``angle_unit`` is given (no units row and no ``angle_unit``: degrees). Rotations are the
  world-from-segment matrices, re-orthonormalised (nearest rotation) by the Capture.
- **Frame rate**: from the rate line; a trimmed file has none, then ``fps`` must be given, or
  Vicon's default capture rate of 100 Hz is used with a :class:`UserWarning` (so that a trimmed
  file still imports; ``extra['fps_from_file']`` says which happened).

Every malformed input raises one :class:`~rbmcap.errors.FormatError` naming the file and, where
it applies, the line (1-based) and column (1-based).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.errors import ConfigError, FormatError
from rbmcap.io.capture import Capture

ROTATIONS = (
    "helical",
    "euler_xyz",
    "euler_xzy",
    "euler_yxz",
    "euler_yzx",
    "euler_zxy",
    "euler_zyx",
)
"""Vicon rotation conventions for RX/RY/RZ columns: helical axis-angle (Vicon's default) or
Euler angles, extrinsic-free intrinsic order as named (:func:`read_vicon`)."""

KINDS = ("vicon-segments", "vicon-tracker", "vicon-trajectories")
PLATE_SECTIONS = ("Segments", "Joints", "Model Outputs")
SECTION_NAMES = (*PLATE_SECTIONS, "Trajectories", "Devices")
LENGTH_UNITS = {"mm": 0.001, "cm": 0.01, "m": 1.0}
ANGLE_UNITS = ("deg", "rad")
UNIT_ALIASES = {
    "degrees": "deg",
    "°": "deg",
    "radians": "rad",
    "millimeters": "mm",
    "millimetres": "mm",
    "meters": "m",
    "metres": "m",
}
DEFAULT_FPS = 100.0
"""Vicon's default capture rate, used (with a warning) for a trimmed file when no fps is given."""
PLATE_AXES = ("RX", "RY", "RZ", "TX", "TY", "TZ")
POINT_AXES = ("X", "Y", "Z")
TRACKER_PREFIX = "global angle "
MAX_FRAME = 1e15
"""Frame numbers are whole numbers below this (far beyond any recording; int64 holds them)."""

Row = tuple[int, list[str]]  # (1-based line, stripped cells)


@dataclass
class _Group:
    """One object's columns: ``name``, first column ``col`` (0-based), width 3 or 6."""

    name: str
    col: int
    width: int


@dataclass
class _Section:
    """One section's header (``title`` '' when trimmed) and its data rows."""

    title: str
    rate: float | None
    tracker: bool
    axis: Row
    units: Row | None
    plates: list[_Group] = field(default_factory=list)
    points: list[_Group] = field(default_factory=list)
    data: list[Row] = field(default_factory=list)


# ---------------------------------------------------------------------------------- tokenise


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _delimiter(lines: list[str]) -> str:
    """``;`` when the first lines hold more ``;`` than ``,``, else ``,``."""
    head = "\n".join(lines[:40])
    return ";" if head.count(";") > head.count(",") else ","


def _tokenise(text: str) -> tuple[list[Row], str]:
    """(line, cells) of every line (cells stripped, trailing empty cells dropped), delimiter."""
    lines = text.lstrip("\ufeff").splitlines()
    sep = _delimiter(lines)
    rows = []
    for i, line in enumerate(lines, start=1):
        cells = [c.strip().strip('"').strip() for c in line.split(sep)]
        while cells and not cells[-1]:
            cells.pop()
        rows.append((i, cells))
    return rows, sep


def _is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", "."))
    except ValueError:
        return False
    return True


def _is_axis_row(cells: list[str]) -> bool:
    return (
        len(cells) >= 3
        and cells[0].lower() == "frame"
        and (cells[1].lower() == "sub frame" or cells[1].upper() in (*PLATE_AXES, *POINT_AXES))
    )


# ---------------------------------------------------------------------------------- detect


def detect_vicon_kind(text: str) -> str | None:
    """'vicon-tracker', 'vicon-segments', 'vicon-trajectories' or None, from a file's first
    ~64 KiB of text (trimmed files too: the axis row and its column groups decide)."""
    rows, _ = _tokenise(text[:65536])
    titles = {c[0] for _, c in rows if len(c) == 1 and c[0] in SECTION_NAMES}
    axes = [c for _, c in rows if _is_axis_row(c)]
    if not axes and not titles:
        return None
    if any(TRACKER_PREFIX in " ".join(c).lower() for _, c in rows[:200]):
        return "vicon-tracker"
    if titles & set(PLATE_SECTIONS):
        return "vicon-segments"
    if "Trajectories" in titles:
        return "vicon-trajectories"
    for cells in axes:
        upper = [c.upper() for c in cells]
        if any(tuple(upper[j : j + 6]) == PLATE_AXES for j in range(len(upper))):
            return "vicon-segments"
        if any(tuple(upper[j : j + 3]) == POINT_AXES for j in range(len(upper))):
            return "vicon-trajectories"
    return None


# ---------------------------------------------------------------------------------- sections


def _blocks(rows: list[Row]) -> list[list[Row]]:
    """Runs of non-blank rows (sections are separated by blank lines)."""
    blocks, cur = [], []
    for row in rows:
        if row[1]:
            cur.append(row)
        elif cur:
            blocks.append(cur)
            cur = []
    if cur:
        blocks.append(cur)
    return blocks


def _sections(path: Path, rows: list[Row]) -> list[_Section]:
    """Every section with an axis row; a block without one continues the previous section's
    data (a blank line inside data) or is an error."""
    out: list[_Section] = []
    for block in _blocks(rows):
        k = next((i for i, (_, c) in enumerate(block) if _is_axis_row(c)), None)
        if k is None:
            if out and out[-1].title != "Devices" and _is_number(block[0][1][0]):
                out[-1].data.extend(block)
                continue
            if len(block) <= 2 and block[0][1][0] in SECTION_NAMES:
                continue  # an empty section
            line, cells = block[0]
            got = ",".join(cells)[:60]
            raise FormatError(
                f"{path}:{line}:1: expected a Vicon section (name, rate, names, "
                f"'Frame,Sub Frame,…' rows), got {got!r}"
            )
        out.append(_section(path, block, k))
    return out


def _section(path: Path, block: list[Row], k: int) -> _Section:
    """The section of ``block`` whose axis row is ``block[k]``."""
    head = [c for _, c in block[:k]]
    title = next((c[0] for c in head if c and c[0] in SECTION_NAMES), "")
    rate = None
    for line, cells in block[:k]:
        if len(cells) == 1 and _is_number(cells[0]):
            rate = float(cells[0].replace(",", "."))
            if not (np.isfinite(rate) and rate > 0):
                raise FormatError(
                    f"{path}:{line}:1: frame rate {cells[0]!r} is not a positive number"
                )
    names = block[k - 1] if k >= 1 and not (len(block[k - 1][1]) == 1) else None
    rest = block[k + 1 :]
    units = rest[0] if rest and not any(_is_number(c) for c in rest[0][1] if c) else None
    data = rest[1:] if units is not None else rest
    tracker = names is not None and any(TRACKER_PREFIX in c.lower() for c in names[1])
    sec = _Section(title, rate, tracker, block[k], units, data=data)
    if title != "Devices":  # force plates and analog channels: not plates or points
        _groups(path, sec, names)
    return sec


def _groups(path: Path, sec: _Section, names: Row | None) -> None:
    """Fill ``sec.plates`` / ``sec.points`` from the axis row and the names row."""
    axis = [c.upper() for c in sec.axis[1]]
    j, count = 1, 0
    while j < len(axis):
        width = 6 if tuple(axis[j : j + 6]) == PLATE_AXES else 3
        if width == 3 and tuple(axis[j : j + 3]) != POINT_AXES:
            j += 1
            continue
        count += 1
        name = _group_name(names, j, count)
        if width == 3 and sec.title not in ("Trajectories", ""):
            j += 3  # model angles, forces, …: neither plates nor marker points
            continue
        target = sec.plates if width == 6 else sec.points
        target.append(_Group(name, j, width))
        j += width
    if not sec.plates and not sec.points and sec.title in ("Trajectories", ""):
        raise FormatError(
            f"{path}:{sec.axis[0]}:3: axis row has no RX,RY,RZ,TX,TY,TZ or X,Y,Z column group"
        )


def _group_name(names: Row | None, j: int, count: int) -> str:
    """The names row's cell over column ``j`` ('object<count>' when the file has no names)."""
    if names is None or j >= len(names[1]) or not names[1][j]:
        return f"object{count}"
    name = names[1][j]
    if name.lower().startswith(TRACKER_PREFIX):
        name = name[len(TRACKER_PREFIX) :].strip()
    return name


# ---------------------------------------------------------------------------------- data


def _table(path: Path, sec: _Section, sep: str) -> np.ndarray:
    """(R, W) float64 values of the data rows (NaN for empty cells); W = the axis row's width."""
    width = len(sec.axis[1])
    cells = []
    for line, row in sec.data:
        if len(row) > width:
            raise FormatError(
                f"{path}:{line}:{width + 1}: row has {len(row)} cells, the axis "
                f"row on line {sec.axis[0]} has {width}"
            )
        cells.append(row + [""] * (width - len(row)))
    if not cells:
        raise FormatError(
            f"{path}:{sec.axis[0]}:1: section {sec.title or '(trimmed)'!r} has no data rows"
        )
    flat = [[c.replace(",", ".") if sep == ";" else c for c in r] for r in cells]
    try:
        table = np.array([[c or "nan" for c in r] for r in flat], dtype=np.float64)
    except ValueError:
        _raise_bad_cell(path, sec, flat)
    if np.isinf(table).any():
        _raise_bad_cell(path, sec, flat)
    return table


def _raise_bad_cell(path: Path, sec: _Section, flat: list[list[str]]) -> None:
    for (line, _), row in zip(sec.data, flat):
        for j, c in enumerate(row):
            if not c:
                continue
            try:
                ok = not np.isinf(float(c))  # 'nan' is read as an empty cell
            except ValueError:
                ok = False
            if not ok:
                raise FormatError(f"{path}:{line}:{j + 1}: expected a number, got {c!r}")
    raise FormatError(f"{path}:{sec.axis[0]}: unreadable data")  # pragma: no cover


def _frames(path: Path, sec: _Section, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(F,) frame numbers and the (F,) table rows kept (sub frame 0 only)."""
    if np.isnan(table[:, 0]).any():
        bad = int(np.flatnonzero(np.isnan(table[:, 0]))[0])
        raise FormatError(f"{path}:{sec.data[bad][0]}:1: empty frame number")
    whole = (np.abs(table[:, 0]) < MAX_FRAME) & (table[:, 0] == np.round(table[:, 0]))
    if not whole.all():
        bad = int(np.flatnonzero(~whole)[0])
        raise FormatError(
            f"{path}:{sec.data[bad][0]}:1: frame number {table[bad, 0]:g} is not "
            f"a whole number below {MAX_FRAME:.0e}"
        )
    keep = np.ones(len(table), bool)
    if sec.axis[1][1].lower() == "sub frame":
        keep = np.nan_to_num(table[:, 1], nan=0.0) == 0
    return table[keep, 0].astype(np.int64), np.flatnonzero(keep)


def _unit(path: Path, sec: _Section, col: int, allowed) -> str | None:
    """The units row's cell over column ``col`` (0-based), checked against ``allowed``."""
    if sec.units is None or col >= len(sec.units[1]) or not sec.units[1][col]:
        return None
    unit = UNIT_ALIASES.get(sec.units[1][col].lower(), sec.units[1][col])
    if unit not in allowed:
        raise FormatError(
            f"{path}:{sec.units[0]}:{col + 1}: unknown unit {unit!r}; expected "
            f"one of {', '.join(allowed)}"
        )
    return unit


def _length_scale(path: Path, sec: _Section, col: int) -> float:
    """Metres per file unit of the X,Y,Z columns from ``col`` (mm when the file says nothing)."""
    units = [_unit(path, sec, col + i, LENGTH_UNITS) for i in range(3)]
    given = {u for u in units if u is not None}
    if len(given) > 1:
        raise FormatError(f"{path}:{sec.units[0]}:{col + 1}: mixed length units {sorted(given)}")
    return LENGTH_UNITS[given.pop() if given else "mm"]


def _values(path, sec, table, rows, group) -> tuple[np.ndarray, np.ndarray]:
    """(F, width) values of ``group`` and (F,) validity (no empty cell)."""
    vals = table[rows, group.col : group.col + group.width]
    return vals, ~np.isnan(vals).any(axis=1)


def _rotmat(rot: np.ndarray, rotation: str, degrees: bool) -> np.ndarray:
    """(F, 3, 3) world-from-segment rotations of (F, 3) RX,RY,RZ in convention ``rotation``."""
    r = torch.from_numpy(np.nan_to_num(rot))
    if rotation == "helical":
        mats = roma.rotvec_to_rotmat(torch.deg2rad(r) if degrees else r)
    else:
        order = rotation.split("_")[1].upper()
        angles = r[:, ["XYZ".index(a) for a in order]]
        mats = roma.euler_to_rotmat(order, angles, degrees=degrees)
    # exact rotations up to rounding: the Capture re-orthonormalises them, and only those that
    # need it (a special_procrustes of every matrix here would dominate a small file's read)
    return mats.numpy()


def _plates(path, sec, table, rows, rotation, angle_unit):
    """(F, N, 3) m, (F, N, 3, 3), (F, N) bool of the section's plates."""
    f, n = len(rows), len(sec.plates)
    pos, rot, valid = np.zeros((f, n, 3)), np.tile(np.eye(3), (f, n, 1, 1)), np.zeros((f, n), bool)
    for k, g in enumerate(sec.plates):
        vals, ok = _values(path, sec, table, rows, g)
        if not ok.any():
            raise FormatError(
                f"{path}:{sec.axis[0]}:{g.col + 1}: object {g.name!r} is empty throughout"
            )
        units = {_unit(path, sec, g.col + i, ANGLE_UNITS) for i in range(3)} - {None}
        if len(units) > 1:
            raise FormatError(
                f"{path}:{sec.units[0]}:{g.col + 1}: mixed angle units {sorted(units)}"
            )
        degrees = (angle_unit or (units.pop() if units else "deg")) == "deg"
        scale = _length_scale(path, sec, g.col + 3)
        pos[ok, k] = vals[ok, 3:] * scale
        rot[ok, k] = _rotmat(vals[ok, :3], rotation, degrees)
        valid[:, k] = ok
    return pos, rot, valid


def _points(path, sec, table, rows):
    """(M,) names, (F, M, 3) m, (F, M) bool of the section's points."""
    f, m = len(rows), len(sec.points)
    pts, valid = np.zeros((f, m, 3)), np.zeros((f, m), bool)
    for k, g in enumerate(sec.points):
        vals, ok = _values(path, sec, table, rows, g)
        scale = _length_scale(path, sec, g.col)
        pts[ok, k] = vals[ok] * scale
        valid[:, k] = ok
    return [g.name for g in sec.points], pts, valid


# ---------------------------------------------------------------------------------- read


def read_vicon(
    path: str | Path,
    kind: str = "auto",
    *,
    rotation: str = "helical",
    angle_unit: str | None = None,
    fps: float | None = None,
):
    """Read a Vicon CSV export (world Z up, metres; see the module docstring).

    Args:
        path: the file.
        kind: 'auto' or one of :data:`KINDS` ('vicon-trajectories' reads points only).
        rotation: RX,RY,RZ convention, one of :data:`ROTATIONS` (default helical).
        angle_unit: 'deg' or 'rad'; None reads it from the units row.
        fps: frame rate; None takes the file's rate line (a trimmed file: 100 Hz and a warning).

    Returns:
        a Capture: plates (T, N) and, when the file has a Trajectories section, points (T, M, 3).

    Raises:
        FormatError: naming the file (and line, column) for every malformed input.
        ConfigError: an unknown kind, rotation or angle unit.
    """
    _check_options(kind, rotation, angle_unit)
    path = Path(path)
    rows, sep = _tokenise(_decode(_read_bytes(path)))
    kind = _resolve_kind(path, rows, kind)
    sections = [s for s in _sections(path, rows) if s.title != "Devices"]
    plate_sec = _plate_section(path, sections) if kind != "vicon-trajectories" else None
    point_sec = next((s for s in sections if s.points and not s.plates), None)
    if plate_sec is None and point_sec is None:
        raise FormatError(f"{path}: no Trajectories section (X,Y,Z columns) in the file")
    return _assemble(path, kind, sep, plate_sec, point_sec, rotation, angle_unit, fps)


def _check_options(kind: str, rotation: str, angle_unit: str | None) -> None:
    if kind != "auto" and kind not in KINDS:
        raise ConfigError(
            f"unknown Vicon kind {kind!r}; expected auto or one of {', '.join(KINDS)}"
        )
    if rotation not in ROTATIONS:
        raise ConfigError(f"unknown rotation {rotation!r}; expected one of {', '.join(ROTATIONS)}")
    if angle_unit not in (None, *ANGLE_UNITS):
        raise ConfigError(f"unknown angle unit {angle_unit!r}; expected deg or rad")


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None


def _resolve_kind(path: Path, rows: list[Row], kind: str) -> str:
    if kind != "auto":
        return kind
    found = detect_vicon_kind("\n".join(",".join(c) for _, c in rows[:2000]))
    if found is None:
        raise FormatError(f"{path}: not a Vicon CSV export (no 'Frame,Sub Frame,…' axis row)")
    return found


def _plate_section(path: Path, sections: list[_Section]) -> _Section:
    with_plates = [s for s in sections if s.plates]
    if not with_plates:
        raise FormatError(
            f"{path}: no object with RX,RY,RZ,TX,TY,TZ columns (a Segments or "
            f"Tracker export); for marker points use vicon-trajectories"
        )
    return next((s for s in with_plates if s.title == "Segments"), with_plates[0])


def _assemble(path, kind, sep, plate_sec, point_sec, rotation, angle_unit, fps):
    """The Capture of the plate section (frames) and the point section (aligned by frame)."""
    main = plate_sec or point_sec
    table = _table(path, main, sep)
    frames, rows = _frames(path, main, table)
    if plate_sec is not None:
        pos, rot, valid = _plates(path, plate_sec, table, rows, rotation, angle_unit)
    else:
        pos, rot, valid = np.zeros((len(rows), 0, 3)), np.zeros((len(rows), 0, 3, 3)), None
        valid = np.zeros((len(rows), 0), bool)
    pts = {}
    if point_sec is not None:
        pts = _aligned_points(path, point_sec, sep, frames, table if main is point_sec else None)
    rate = fps if fps is not None else main.rate
    if rate is None:
        warnings.warn(
            f"{path}: no rate line (a trimmed export): assuming {DEFAULT_FPS:g} Hz; "
            f"pass fps= to say",
            UserWarning,
            stacklevel=3,
        )
        rate = DEFAULT_FPS
    return Capture(
        fps=rate,
        names=[g.name for g in plate_sec.plates] if plate_sec else [],
        pos=pos,
        rot=rot,
        valid=valid,
        frame_numbers=frames,
        format=kind,
        source=str(path),
        extra={"fps_from_file": fps is None and main.rate is not None},
        **pts,
    )


def _aligned_points(path, sec, sep, frames, table) -> dict:
    """Points of ``sec`` at the plate frames ``frames`` (absent frames invalid)."""
    if table is None:
        table = _table(path, sec, sep)
    own, rows = _frames(path, sec, table)
    names, pts, valid = _points(path, sec, table, rows)
    where = {int(f): i for i, f in enumerate(own)}
    idx = np.array([where.get(int(f), -1) for f in frames], dtype=np.int64)
    out_pts = np.where((idx >= 0)[:, None, None], pts[np.maximum(idx, 0)], 0.0)
    out_valid = valid[np.maximum(idx, 0)] & (idx >= 0)[:, None]
    return {"point_names": names, "points": out_pts, "point_valid": out_valid}
