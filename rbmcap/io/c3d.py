"""C3D files (read through ``ezc3d``) as a :class:`~rbmcap.io.capture.Capture`.

- ``POINT`` data → labelled points: names from ``POINT:LABELS`` then ``LABELS2``, ``LABELS3``…
  (a missing or empty label becomes ``point<k>``, a repeated one gets `` #2``…), lengths from
  ``POINT:UNITS`` (``mm``, ``cm`` or ``m``; absent → mm) to metres, a point whose residual is
  negative (or whose coordinates are NaN) is invalid in that frame.
- The ``ROTATION`` group, when the file has one → plates: ezc3d gives ``data['rotations']``
  (4, 4, R, T·ratio) world-from-segment homogeneous matrices; names from ``ROTATION:LABELS``;
  the translation is in ``POINT:UNITS``; a matrix with a NaN, or all zero, is a frame where the
  segment was not tracked (invalid); any other matrix must be a rigid transform: a bottom row
  other than (0, 0, 0, 1) is a DataError here, and a rotation part that is a reflection or off
  SO(3) beyond :data:`~rbmcap.geometry.ROTATION_TOLERANCE` is one at the Capture (which
  re-orthonormalises the rest). With
  ``ROTATION:RATIO`` > 1 every ratio-th sample (those on point frames) is kept.
  Without a ``ROTATION`` group the capture has no plates (N = 0): plate solving makes them
  from the points.
- The world is kept as the file has it: C3D worlds are usually Z up (Vicon, Qualisys); a
  Y-up file needs turning by the caller.
- ``fps`` from ``POINT:RATE`` (else the header's rate), ``frame_numbers`` from the header's
  first frame on.
- The frames are those the file holds, as ezc3d reads them: ``POINT:FRAMES`` (else the header's
  frame range) bounds them, and a file that ends sooner gives the frames it holds (trailing
  frames of zero bytes, a last block's padding, left out). Where the header's frame range or
  ``POINT:FRAMES`` disagrees with that count, or ``POINT:DATA_START`` with the header's data
  block (the one ezc3d reads from), a one-line ``UserWarning`` says so.

Anything ezc3d cannot read, or parameters of the wrong shape, raise one
:class:`~rbmcap.errors.FormatError` naming the file; a file without point data (no markers:
analog or force-plate channels only, or no frame at all) and without a ``ROTATION`` group is
one :class:`~rbmcap.errors.DataError` saying so. ezc3d (C++) trusts its input, and a
malformed file can crash or hang it: the file's header and parameter section are checked here
first, and ezc3d itself runs in a worker process (started once, restarted after a failure) under
a time and memory bound, so that its crash or hang on a file is that file's FormatError.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

from rbmcap.errors import DataError, FormatError
from rbmcap.io.capture import Capture

POINT_UNITS = {"mm": 0.001, "cm": 0.01, "m": 1.0}
CHILD_SECONDS = 2.0
"""Time bound of ezc3d's read of a file (plus a second per 5 MB)."""
STARTUP_SECONDS = 120.0
"""Time bound of the start of the worker process running ezc3d."""
CHILD_BYTES = 2 << 30
"""Memory bound of ezc3d's read of a file, above what the process held (plus 64 × its size)."""


def read_c3d(path: str | Path) -> Capture:
    """Read a C3D file (see the module docstring for what becomes what).

    Returns:
        a Capture: plates (T, N) from the ``ROTATION`` group (N = 0 without one), points
        (T, M, 3) metres from ``POINT``; ``format='c3d'``, ``residual_mm`` NaN.

    Raises:
        FormatError: naming the file, when it cannot be read or its parameters are unusable.
    """
    path = Path(path)
    c = _open(path)
    params = c["parameters"]
    declared = c["declared"]
    _check_has_points(path, c, declared)
    scale = _units(path, params)
    pnames, pts, pvalid = _points(path, c, scale, declared)
    t = pts.shape[0]
    names, pos, rot, valid = _rotations(path, c, scale, t)
    _warn_disagreements(path, declared, t)
    fps = _param(params, "POINT", "RATE") or [c["header"]["points"]["frame_rate"]]
    first = int(c["header"]["points"]["first_frame"])
    return Capture(
        fps=float(np.asarray(fps).ravel()[0]),
        names=names,
        pos=pos,
        rot=rot,
        valid=valid,
        frame_numbers=first + np.arange(t),
        format="c3d",
        source=str(path),
        point_names=pnames,
        points=pts,
        point_valid=pvalid,
    )


def _open(path: Path) -> dict:
    """What :func:`read_c3d` needs of the file, as ezc3d reads it: ``parameters``, ``header``
    and ``data`` (points, residuals, rotations); and ``declared``, the :class:`_Declared` counts
    of the file's own header and parameter section (which ezc3d reconciles).

    ezc3d is C++ and trusts the file: a malformed file can crash the process or make it loop.
    So the file's structure is checked here first (:func:`_check_structure`), and ezc3d runs in
    a separate worker process (:class:`_Worker`, started once) with a time and memory bound; a
    crash, a hang or an exception there is a FormatError naming the file.
    """
    if not path.is_file():
        raise FormatError(f"{path}: no such file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    declared = _check_structure(path, raw)
    kind, value = _WORKER.read(path, len(raw))
    if kind == "error":
        raise FormatError(f"{path}: not a readable C3D file ({value})")
    value["declared"] = declared
    return value


_WORKER_CODE = r"""
import os, pickle, struct, sys
import numpy as np
import ezc3d
try:
    import resource
except ImportError:
    resource = None
inp, out = sys.stdin.buffer, sys.stdout.buffer
out.write(b"R")
out.flush()
while True:
    head = inp.read(4)
    if len(head) < 4:
        break
    path, limit = pickle.loads(inp.read(struct.unpack("<I", head)[0]))
    try:
        if resource is not None:
            page = os.sysconf("SC_PAGE_SIZE")
            vm = int(open("/proc/self/statm").read().split()[0]) * page
            resource.setrlimit(resource.RLIMIT_AS, (vm + limit, resource.RLIM_INFINITY))
    except (OSError, ValueError):
        pass
    try:
        c = ezc3d.c3d(path, extract_forceplat_data=False)
        meta = c["data"].get("meta_points", {})
        params = {g: {k: {"value": v["value"]} for k, v in grp.items() if k != "__METADATA__"}
                  for g, grp in c["parameters"].items()}
        rot = c["data"].get("rotations")
        res = ("ok", {"parameters": params, "header": {"points": dict(c["header"]["points"])},
               "data": {"points": np.asarray(c["data"]["points"]),
                        "meta_points": {"residuals": np.asarray(meta.get("residuals", []))},
                        "rotations": None if rot is None else np.asarray(rot)}})
        del c
    except BaseException as exc:
        res = ("error", f"{type(exc).__name__}: {exc}")
    try:
        data = pickle.dumps(res)
    except BaseException as exc:
        data = pickle.dumps(("error", f"{type(exc).__name__}: {exc}"))
    out.write(struct.pack("<I", len(data)) + data)
    out.flush()
"""


class _Worker:
    """A Python process running ezc3d on request (started on first use, restarted after a
    crash or a timeout): the reading process survives whatever ezc3d does with a file."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def read(self, path: Path, size: int) -> tuple[str, object]:
        """('ok', parts) or ('error', why) of ezc3d's read of ``path`` (``size`` bytes)."""
        with self.lock:
            try:
                return self._ask(path, size)
            except BaseException:
                self.stop()  # a crash, a timeout, an interrupt: its state is unknown
                raise

    def _ask(self, path: Path, size: int) -> tuple[str, object]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_CODE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            if _receive(path, self.proc.stdout, 1, STARTUP_SECONDS) != b"R":
                raise FormatError(
                    f"{path}: cannot read C3D files: the C3D reader (ezc3d) does not start"
                )
        request = pickle.dumps((str(path.resolve()), CHILD_BYTES + 64 * size))
        self.proc.stdin.write(struct.pack("<I", len(request)) + request)
        self.proc.stdin.flush()
        seconds = CHILD_SECONDS + size / 5e6
        head = _receive(path, self.proc.stdout, 4, seconds)
        if len(head) < 4:
            code = self.proc.wait()
            why = f"signal {-code}" if code < 0 else f"exit status {code}"
            raise FormatError(f"{path}: not a readable C3D file (the C3D reader failed: {why})")
        body = _receive(path, self.proc.stdout, struct.unpack("<I", head)[0], seconds)
        return pickle.loads(body)

    def stop(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    f.close()
            self.proc = None


_WORKER = _Worker()
atexit.register(_WORKER.stop)


def _receive(path: Path, stream, count: int, seconds: float) -> bytes:
    """``count`` bytes from the worker's ``stream`` (fewer at its end); FormatError when they do
    not come within ``seconds``."""
    fd, chunks, got = stream.fileno(), [], 0
    end = time.monotonic() + seconds
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while got < count:
            if not sel.select(max(end - time.monotonic(), 0)):
                raise FormatError(
                    f"{path}: not a readable C3D file (the C3D reader did not "
                    f"finish within {seconds:.0f} s)"
                )
            chunk = os.read(fd, count - got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    return b"".join(chunks)


class _Declared(NamedTuple):
    """What a C3D file's header and parameter section say of its point data, before ezc3d
    reconciles them (ezc3d takes ``POINT:FRAMES`` over the header's frame range, and the
    header's data block over ``POINT:DATA_START``)."""

    header_frames: int | None
    """Frames in the header's first-to-last range (None: the range cannot say, last 65535)."""
    frames: int | None
    """``POINT:FRAMES`` (None: absent or 0; a negative int16 read as unsigned)."""
    data_block: int
    """The header's block (1-based) of the first frame: where ezc3d reads from."""
    point_data_start: int | None
    """``POINT:DATA_START`` (None: absent)."""
    point_group: bool
    """Whether the file has a ``POINT`` group."""


def _check_structure(path: Path, raw: bytes) -> _Declared:
    """FormatError unless ``raw`` has a C3D header and a parameter section that parses: every
    record inside the file, of a known type (char, byte, int16, float), each parameter in a
    declared group, the data block after the header, and the counts ezc3d loops over
    (POINT:USED, ROTATION:RATIO …) sane; DataError when the file ends before its data block.
    Returns what the header and parameters declare."""
    if len(raw) < 512 or raw[1] != 0x50:
        raise FormatError(f"{path}: not a readable C3D file (no C3D header)")
    start = (raw[0] - 1) * 512
    if raw[0] < 2 or start + 4 > len(raw):
        raise FormatError(
            f"{path}: not a readable C3D file (its parameter section, block "
            f"{raw[0]}, is outside the file)"
        )
    proc = raw[start + 3]
    if proc not in (84, 85, 86):
        raise FormatError(f"{path}: not a readable C3D file (unknown processor type {proc})")
    order = ">" if proc == 86 else "<"
    end = min(len(raw), start + max(raw[start + 2], 1) * 512)
    groups, params = _parameter_records(path, raw, start + 4, end, order)
    missing = sorted({g for g, _ in params} - set(groups))
    if missing:
        raise FormatError(f"{path}: C3D parameter of an undeclared group (id {missing[0]})")
    named = {(groups[g], n): v for (g, n), v in params.items()}
    _check_counts(path, named, order)
    first, last = struct.unpack_from(order + "HH", raw, 6)
    (block,) = struct.unpack_from(order + "H", raw, 16)
    if block < 2:
        raise FormatError(
            f"{path}: not a readable C3D file (its header puts the first frame at block "
            f"{block}, inside the header)"
        )
    if len(raw) <= (block - 1) * 512:
        raise DataError(
            f"{path}: no point data (the file ends before its first frame, block {block})"
        )
    return _Declared(
        header_frames=_header_frames(first, last),
        frames=_frames_parameter(named.get(("POINT", "FRAMES")), order, proc),
        data_block=block,
        point_data_start=_int_parameter(named.get(("POINT", "DATA_START")), order),
        point_group="POINT" in groups.values(),
    )


def _header_frames(first: int, last: int) -> int | None:
    """Frames in the header's range ``first``…``last`` (words 4 and 5, 1-based; 0-based when
    ``first`` is 0, as ezc3d reads them); None where the range says nothing."""
    count = last - first + 1 if first else last + 1
    return count if last < 0xFFFF and count > 0 else None


def _int_parameter(param, order: str) -> int | None:
    """The first value of an int16 parameter record (type, dims, data), else None."""
    if param is None or param[0] != 2 or len(param[2]) < 2:
        return None
    return struct.unpack_from(order + "h", param[2])[0]


def _frames_parameter(param, order: str, proc: int) -> int | None:
    """``POINT:FRAMES`` as a count: an int16 (negative: past 32767, read unsigned) or an IEEE
    float; None where absent, 0 (ezc3d then keeps the header's range) or unreadable."""
    value = _int_parameter(param, order)
    if value is not None:
        return value & 0xFFFF or None
    if param is not None and param[0] == 4 and len(param[2]) >= 4 and proc != 85:
        (x,) = struct.unpack_from(order + "f", param[2])
        return int(x) if np.isfinite(x) and 1 <= x < 2**31 else None
    return None


def _parameter_records(path: Path, raw: bytes, p: int, end: int, order: str):
    """({group id: NAME}, {(group id, NAME): (type, dims, data bytes)}) of the parameter
    section between ``p`` and ``end``."""
    groups, params = {}, {}
    bad = f"{path}: not a readable C3D file (malformed parameter section at byte"
    while p + 2 <= end:
        nchar, gid = struct.unpack_from("<bb", raw, p)
        if nchar == 0:
            break
        q = p + 2 + abs(nchar)
        if q + 2 > end:
            raise FormatError(f"{bad} {p + 1})")
        name = raw[p + 2 : q].decode("latin-1").strip().upper()
        (offset,) = struct.unpack_from(order + "h", raw, q)
        if gid < 0:
            groups[-gid] = name
        elif gid > 0:
            params[(gid, name)] = _parameter(path, raw, q + 2, end, bad)
        else:
            raise FormatError(f"{bad} {p + 1}: group id 0)")
        if offset == 0:
            break
        if offset < 2 or q + offset > end:
            raise FormatError(f"{bad} {q + 1}: offset {offset} leads outside the section)")
        p = q + offset
    return groups, params


def _parameter(path: Path, raw: bytes, p: int, end: int, bad: str):
    """(type, dims, data bytes) of the parameter whose type byte is at ``p``."""
    if p + 2 > end:
        raise FormatError(f"{bad} {p + 1})")
    kind, ndim = struct.unpack_from("<bB", raw, p)
    if kind not in (-1, 1, 2, 4) or ndim > 7 or p + 2 + ndim > end:
        raise FormatError(f"{bad} {p + 1}: parameter type {kind}, {ndim} dimensions)")
    dims = tuple(raw[p + 2 : p + 2 + ndim])
    size = abs(kind) * int(np.prod(dims, dtype=np.int64))
    first = p + 2 + ndim
    if first + size > end:
        raise FormatError(f"{bad} {p + 1}: its data runs past the section)")
    return kind, dims, raw[first : first + size]


def _check_counts(path: Path, params: dict, order: str) -> None:
    """The integer parameters ezc3d sizes its loops by must be in range."""
    rules = {
        ("POINT", "USED"): 0,
        ("ROTATION", "USED"): 0,
        ("ROTATION", "RATIO"): 0,
        ("ROTATION", "DATA_START"): 2,
        ("ANALOG", "USED"): 0,
        ("FORCE_PLATFORM", "USED"): 0,
    }
    for key, low in rules.items():
        if key not in params:
            continue
        kind, _, data = params[key]
        if kind == 2 and len(data) >= 2:
            (value,) = struct.unpack_from(order + "h", data)
            if value < low:
                raise FormatError(
                    f"{path}: C3D parameter {key[0]}:{key[1]} is {value}, below {low}"
                )


def _check_has_points(path: Path, c: dict, declared: _Declared) -> None:
    """DataError when the file has nothing to import: no point (or ROTATION) data, or no
    frame."""
    shape, rot = np.shape(c["data"]["points"]), c["data"].get("rotations")
    points, frames = (shape[1], shape[2]) if len(shape) == 3 else (1, 1)  # else _points says
    plates = np.shape(rot)[2] if rot is not None and np.ndim(rot) == 4 else 0
    if frames and (points or plates):
        return
    if points or plates:
        raise DataError(f"{path}: no point data (the file holds no frame)")
    why = "POINT:USED is 0" if declared.point_group else "no POINT group"
    params = c["parameters"]
    channels = int(np.asarray(_param(params, "ANALOG", "USED") or [0]).ravel()[0])
    fp = _param(params, "FORCE_PLATFORM", "USED")
    fp = int(np.asarray(fp).ravel()[0]) if fp is not None and np.size(fp) else 0
    held = [f"{channels} analog channels"] * bool(channels) + [f"{fp} force plates"] * bool(fp)
    if held:
        why += f"; the file holds {' and '.join(held)} only"
    raise DataError(f"{path}: no point data ({why})")


def _warn_disagreements(path: Path, declared: _Declared, frames: int) -> None:
    """A one-line UserWarning naming the frame counts the file declares that its data does not
    follow, and one for a ``POINT:DATA_START`` other than the header's data block."""
    claims = [("its header", declared.header_frames), ("POINT:FRAMES", declared.frames)]
    wrong = [f"{src} says {n}" for src, n in claims if n is not None and n != frames]
    if wrong:
        warnings.warn(
            f"{path}: C3D frame count: {', '.join(wrong)}, the file holds {frames} frames; "
            f"reading those {frames}",
            UserWarning,
            stacklevel=3,
        )
    start = declared.point_data_start
    if start is not None and start != declared.data_block:
        warnings.warn(
            f"{path}: C3D POINT:DATA_START is {start}, the header puts the first frame at "
            f"block {declared.data_block}; reading from block {declared.data_block}",
            UserWarning,
            stacklevel=3,
        )


def _param(params, group: str, name: str):
    """The value of ``group:name`` or None."""
    try:
        return params[group][name]["value"]
    except KeyError:
        return None


def _units(path: Path, params) -> float:
    units = _param(params, "POINT", "UNITS")
    unit = str(units[0]).strip().lower() if units is not None and len(units) else "mm"
    if unit not in POINT_UNITS:
        raise FormatError(f"{path}: unknown POINT:UNITS {unit!r}; expected mm, cm or m")
    return POINT_UNITS[unit]


def _labels(params, group: str, count: int) -> list[str]:
    """``count`` unique labels from ``group:LABELS``, ``LABELS2``…"""
    labels: list[str] = []
    for key in ["LABELS", *(f"LABELS{i}" for i in range(2, 100))]:
        value = _param(params, group, key)
        if value is None:
            break
        labels += [str(s).strip() for s in value]
    labels = (labels + [""] * count)[:count]
    out, seen = [], {}
    for k, lab in enumerate(labels):
        lab = lab or f"point{k}"
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab} #{seen[lab]}")
    return out


def _points(path: Path, c, scale: float, declared: _Declared):
    """Point names (M,), positions (T, M, 3) metres, valid (T, M)."""
    data = np.asarray(c["data"]["points"], dtype=np.float64)
    if data.ndim != 3 or data.shape[0] < 3:
        raise FormatError(f"{path}: POINT data of shape {data.shape}, expected (4, M, T)")
    m, t = data.shape[1:]
    res = np.asarray(c["data"]["meta_points"].get("residuals", np.zeros((1, m, t))))
    res = res.reshape(-1, m, t)[0].T if res.size else np.zeros((t, m))
    t = _without_padding(data, res, declared)
    data, res = data[..., :t], res[:t]
    pts = data[:3].transpose(2, 1, 0) * scale
    valid = (res >= 0) & np.isfinite(pts).all(-1)
    pts[~valid] = 0.0
    return _labels(c["parameters"], "POINT", m), pts, valid


def _without_padding(data: np.ndarray, res: np.ndarray, declared: _Declared) -> int:
    """Frames of ``data`` (4, M, T) / residuals ``res`` (T, M) left when the file ends before
    the frames ezc3d was told to read (``POINT:FRAMES``, else the header's range): trailing
    frames of zero bytes there are the last block's padding (ezc3d reads them as points at the
    origin), not measurements."""
    t = data.shape[2]
    intended = declared.frames or declared.header_frames
    if intended is None or t >= intended or not data.shape[1]:
        return t
    zero = ~(data[:3].any(axis=(0, 1)) | res.any(axis=1))  # (T,) every point (0, 0, 0), res 0
    while t and zero[t - 1]:
        t -= 1
    return t


def _rotations(path: Path, c, scale: float, t: int):
    """Plate names (N,), positions (T, N, 3) m, rotations (T, N, 3, 3), valid (T, N)."""
    data = c["data"].get("rotations")
    data = np.zeros((4, 4, 0, t)) if data is None else np.asarray(data, dtype=np.float64)
    if data.ndim != 4 or data.shape[:2] != (4, 4) or data.shape[2] == 0:
        return [], np.zeros((t, 0, 3)), np.zeros((t, 0, 3, 3)), np.zeros((t, 0), bool)
    ratio = int(np.asarray(_param(c["parameters"], "ROTATION", "RATIO") or [1]).ravel()[0])
    mats = data[:, :, :, :: max(ratio, 1)][..., :t].transpose(3, 2, 0, 1)  # (T, N, 4, 4)
    if mats.shape[0] != t:
        raise FormatError(f"{path}: ROTATION data has {mats.shape[0]} frames, POINT {t}")
    finite = np.isfinite(mats).all((-1, -2))
    safe = np.where(finite[..., None, None], mats, np.eye(4))
    r = safe[..., :3, :3]
    valid = finite & (np.abs(r).max((-1, -2)) > 0)  # NaN or all-zero: not tracked then
    safe[~valid] = np.eye(4)
    names = _labels(c["parameters"], "ROTATION", mats.shape[1])
    bottom = np.abs(safe[..., 3, :] - [0.0, 0.0, 0.0, 1.0]).max(-1) < 1e-6
    if not bottom.all():
        i, k = (int(x[0]) for x in np.nonzero(~bottom))
        raise DataError(
            f"{path}: plate {names[k]!r}, frame {i}: ROTATION matrix with bottom row "
            f"{safe[i, k, 3].tolist()}, expected [0, 0, 0, 1] (not a rigid transform)"
        )
    return names, safe[..., :3, 3] * scale, r, valid
