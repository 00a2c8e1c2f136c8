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

Anything ezc3d cannot read, or parameters of the wrong shape, raise one
:class:`~rbmcap.errors.FormatError` naming the file. ezc3d (C++) trusts its input, and a
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
from pathlib import Path

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
    scale = _units(path, params)
    pnames, pts, pvalid = _points(path, c, scale)
    t = pts.shape[0]
    _check_complete(path, t)
    names, pos, rot, valid = _rotations(path, c, scale, t)
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
    and ``data`` (points, residuals, rotations).

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
    _check_structure(path, raw)
    kind, value = _WORKER.read(path, len(raw))
    if kind == "error":
        raise FormatError(f"{path}: not a readable C3D file ({value})")
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


def _check_structure(path: Path, raw: bytes) -> None:
    """FormatError unless ``raw`` has a C3D header and a parameter section that parses: every
    record inside the file, of a known type (char, byte, int16, float), each parameter in a
    declared group, and the counts ezc3d loops over (POINT:USED, ROTATION:RATIO …) sane."""
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
        ("POINT", "DATA_START"): 2,
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


def _check_complete(path: Path, frames: int) -> None:
    """FormatError when the header's frame range holds more frames than ezc3d read (ezc3d reads
    a truncated file silently, shortening its frame count to what is there)."""
    head = path.read_bytes()[:1024]
    if len(head) < 512:
        raise FormatError(f"{path}: truncated C3D (shorter than its header)")
    block = head[0] - 1
    proc = head[block * 512 + 3] if block >= 0 and len(head) > block * 512 + 3 else 84
    order = "big" if proc == 86 else "little"  # 84 Intel, 85 DEC (both little), 86 MIPS
    first = int.from_bytes(head[6:8], order)
    last = int.from_bytes(head[8:10], order)
    expected = last - first + 1
    if last < 65535 and expected > frames:
        raise FormatError(
            f"{path}: truncated C3D: its header spans {expected} frames, the file holds {frames}"
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


def _points(path: Path, c, scale: float):
    """Point names (M,), positions (T, M, 3) metres, valid (T, M)."""
    data = np.asarray(c["data"]["points"], dtype=np.float64)
    if data.ndim != 3 or data.shape[0] < 3:
        raise FormatError(f"{path}: POINT data of shape {data.shape}, expected (4, M, T)")
    m, t = data.shape[1:]
    pts = data[:3].transpose(2, 1, 0) * scale
    res = np.asarray(c["data"]["meta_points"].get("residuals", np.zeros((1, m, t))))
    res = res.reshape(-1, m, t)[0].T if res.size else np.zeros((t, m))
    valid = (res >= 0) & np.isfinite(pts).all(-1)
    pts[~valid] = 0.0
    return _labels(c["parameters"], "POINT", m), pts, valid


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
