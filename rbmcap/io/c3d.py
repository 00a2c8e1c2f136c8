"""C3D files (read through ``ezc3d``) as a :class:`~rbmcap.io.capture.Capture`.

- ``POINT`` data → labelled points: names from ``POINT:LABELS`` then ``LABELS2``, ``LABELS3``…
  (a missing or empty label becomes ``point<k>``, a repeated one gets `` #2``…), lengths from
  ``POINT:UNITS`` (``mm``, ``cm`` or ``m``; absent → mm) to metres, a point whose residual is
  negative (or whose coordinates are NaN) is invalid in that frame.
- The ``ROTATION`` group, when the file has one → plates: ezc3d gives ``data['rotations']``
  (4, 4, R, T·ratio) world-from-segment homogeneous matrices; names from ``ROTATION:LABELS``;
  the translation is in ``POINT:UNITS``; a matrix with a NaN, or not rigid (rotation part off
  SO(3) by more than 1e-3, bottom row not (0, 0, 0, 1)), is invalid. With
  ``ROTATION:RATIO`` > 1 every ratio-th sample (those on point frames) is kept.
  Without a ``ROTATION`` group the capture has no plates (N = 0): plate solving makes them
  from the points.
- The world is kept as the file has it: C3D worlds are usually Z up (Vicon, Qualisys); a
  Y-up file needs turning by the caller.
- ``fps`` from ``POINT:RATE`` (else the header's rate), ``frame_numbers`` from the header's
  first frame on.

Anything ezc3d cannot read, or parameters of the wrong shape, raise one
:class:`~rbmcap.errors.FormatError` naming the file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rbmcap.errors import FormatError
from rbmcap.io.capture import Capture

POINT_UNITS = {"mm": 0.001, "cm": 0.01, "m": 1.0}


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
        fps=float(np.asarray(fps).ravel()[0]), names=names, pos=pos, rot=rot, valid=valid,
        frame_numbers=first + np.arange(t), format="c3d", source=str(path),
        point_names=pnames, points=pts, point_valid=pvalid,
    )  # fmt: skip


def _open(path: Path):
    import ezc3d

    if not path.is_file():
        raise FormatError(f"{path}: no such file")
    try:
        return ezc3d.c3d(str(path), extract_forceplat_data=False)
    except Exception as exc:  # ezc3d raises RuntimeError, IOError, ValueError… as it goes
        raise FormatError(f"{path}: not a readable C3D file ({exc})") from None


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
        raise FormatError(f"{path}: truncated C3D: its header spans {expected} frames, the file "
                          f"holds {frames}")  # fmt: skip


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
    ortho = np.abs(r @ np.swapaxes(r, -1, -2) - np.eye(3)).max((-1, -2)) < 1e-3
    bottom = np.abs(safe[..., 3, :] - [0.0, 0.0, 0.0, 1.0]).max(-1) < 1e-6
    rigid = ortho & (np.linalg.det(r) > 0) & bottom
    valid = finite & rigid
    names = _labels(c["parameters"], "ROTATION", mats.shape[1])
    return names, safe[..., :3, 3] * scale, r, valid
