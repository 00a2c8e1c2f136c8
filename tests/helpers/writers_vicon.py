"""Test-side writer of Vicon CSV exports (Nexus Segments / Trajectories sections, Tracker
``Global Angle`` objects), from rbmcap's plates and points.

The inverse of :mod:`rbmcap.io.vicon`'s conventions: positions in mm, RX,RY,RZ as a helical
axis-angle vector or intrinsic Euler angles (each axis's angle in that axis's column), in degrees
or radians. Variants a lab meets: comma padding, CRLF, ``;`` (with decimal commas), trimmed
headers, empty cells for gaps, a UTF-8 BOM.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import roma
import torch


def rotation_cells(rot: np.ndarray, rotation: str, unit: str) -> np.ndarray:
    """(T, 3) RX,RY,RZ of (T, 3, 3) world-from-segment rotations in ``rotation`` and ``unit``."""
    r = torch.from_numpy(np.asarray(rot, np.float64))
    if rotation == "helical":
        out = roma.rotmat_to_rotvec(r).numpy()
        return np.degrees(out) if unit == "deg" else out
    order = rotation.split("_")[1].upper()
    angles = roma.rotmat_to_euler(order, r, degrees=unit == "deg").numpy()
    return angles[:, [order.index(a) for a in "XYZ"]]


def _fmt(x: float, decimal_comma: bool) -> str:
    s = "" if np.isnan(x) else f"{x:.10f}"
    return s.replace(".", ",") if decimal_comma else s


def plate_section(names, pos, rot, valid, rotation="helical", unit="deg", tracker=False):
    """Header rows (names, axis, units) and (T, 6N) values (NaN = gap) of the plates."""
    t, n = valid.shape
    names_row, axis, units = ["", ""], ["Frame", "Sub Frame"], ["", ""]
    vals = np.full((t, 6 * n), np.nan)
    for k, name in enumerate(names):
        names_row += [f"Global Angle {name}" if tracker else name] + [""] * 5
        axis += ["RX", "RY", "RZ", "TX", "TY", "TZ"]
        units += [unit] * 3 + ["mm"] * 3
        ok = valid[:, k]
        if ok.any():
            vals[ok, 6 * k : 6 * k + 3] = rotation_cells(rot[ok, k], rotation, unit)
            vals[ok, 6 * k + 3 : 6 * k + 6] = pos[ok, k] * 1000.0
    return [names_row, axis, units], vals


def point_section(names, pts, valid):
    """Header rows (names, axis, units) and (T, 3M) values (NaN = gap) of labelled points."""
    names_row, axis, units = ["", ""], ["Frame", "Sub Frame"], ["", ""]
    vals = np.where(np.repeat(valid, 3, axis=1), pts.reshape(len(pts), -1) * 1000.0, np.nan)
    for name in names:
        names_row += [name, "", ""]
        axis += ["X", "Y", "Z"]
        units += ["mm"] * 3
    return [names_row, axis, units], vals


def section_lines(title, fps, header, vals, frames, *, sep=",", pad=0, trimmed=False):
    """Text lines of one section (``pad`` extra delimiters on every header row)."""
    dc = sep == ";"
    lines = [] if trimmed else [title + sep * pad, f"{fps:g}" + sep * pad]
    lines += [sep.join(r) + sep * pad for r in header]
    for f, row in zip(frames, vals):
        lines.append(sep.join([str(int(f)), "0", *(_fmt(x, dc) for x in row)]))
    return lines


def write_vicon(path, sections, *, sep=",", crlf=False, bom=False) -> Path:
    """Write sections (lists of lines) separated by a blank line."""
    path = Path(path)
    nl = "\r\n" if crlf else "\n"
    text = (nl + nl).join(nl.join(s) for s in sections) + nl
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def write_segments(
    path,
    names,
    pos,
    rot,
    valid,
    *,
    rotation="helical",
    unit="deg",
    tracker=False,
    fps=100.0,
    frames=None,
    points=None,
    sep=",",
    pad=0,
    trimmed=False,
    crlf=False,
    bom=False,
) -> Path:
    """A Segments (or Tracker) CSV of the plates; ``points`` = (names, pts, valid) adds a
    Trajectories section."""
    frames = np.arange(1, len(valid) + 1) if frames is None else frames
    header, vals = plate_section(names, pos, rot, valid, rotation, unit, tracker)
    kw = {"sep": sep, "pad": pad, "trimmed": trimmed}
    secs = [section_lines("Segments", fps, header, vals, frames, **kw)]
    if points is not None:
        ph, pv = point_section(*points)
        secs.append(section_lines("Trajectories", fps, ph, pv, frames, **kw))
    return write_vicon(path, secs, sep=sep, crlf=crlf, bom=bom)


def write_trajectories(
    path, names, pts, valid, *, fps=100.0, sep=",", pad=0, trimmed=False, crlf=False, bom=False
) -> Path:
    """A Trajectories CSV of labelled points (T, M, 3) metres."""
    frames = np.arange(1, len(valid) + 1)
    header, vals = point_section(names, pts, valid)
    lines = section_lines(
        "Trajectories", fps, header, vals, frames, sep=sep, pad=pad, trimmed=trimmed
    )
    return write_vicon(path, [lines], sep=sep, crlf=crlf, bom=bom)
