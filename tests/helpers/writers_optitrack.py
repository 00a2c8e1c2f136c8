"""Test-side writer of OptiTrack Motive CSV exports (format 1.21 layout), from Z-up plates.

The inverse of :mod:`rbmcap.io.optitrack`'s conventions: positions and rotations are turned from
rbmcap's Z-up world back into Motive's Y-up one (``p_y = Aᵀ p_z``, ``R_y = Aᵀ R_z``), lengths
written in the chosen unit, rotations as (x, y, z, w) quaternions or intrinsic Euler degrees.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.io.optitrack import Y_UP_TO_Z_UP

UNIT_SCALE = {"Meters": 1.0, "Millimeters": 1000.0}


def _fmt(x: float) -> str:
    return "" if np.isnan(x) else f"{x:.9f}"


def _rotation_cells(rot_y: np.ndarray, rotation: str) -> np.ndarray:
    """(T, 4) quaternions XYZW or (T, 3) Euler degrees in the X, Y, Z column order."""
    r = torch.from_numpy(rot_y.astype(np.float64))
    if rotation == "Quaternion":
        return roma.rotmat_to_unitquat(r).numpy()
    angles = roma.rotmat_to_euler(rotation, r, degrees=True).numpy()
    order = [rotation.index(a) for a in "XYZ"]
    return angles[:, order]


def plate_columns(names, pos, rot, valid, rotation, scale):
    """Header cells (type, name, kind, axis) and (T, C) values of the rigid bodies."""
    head, cols = [], []
    axes = ("X", "Y", "Z", "W") if rotation == "Quaternion" else ("X", "Y", "Z")
    for k, name in enumerate(names):
        p_y = pos[:, k].astype(np.float64) @ Y_UP_TO_Z_UP  # = (Aᵀ p)ᵀ
        r_y = Y_UP_TO_Z_UP.T @ rot[:, k].astype(np.float64)
        rc = _rotation_cells(r_y, rotation)
        block = np.concatenate([rc, p_y * scale, np.full((len(p_y), 1), 0.0001 * scale)], 1)
        block[~valid[:, k]] = np.nan
        cols.append(block)
        head += [("Rigid Body", name, "Rotation", a) for a in axes]
        head += [("Rigid Body", name, "Position", a) for a in "XYZ"]
        head.append(("Rigid Body", name, "Mean Marker Error", ""))
    return head, cols


def point_columns(point_names, point_types, points, point_valid, scale):
    """Header cells and (T, C) values of labelled points (``Marker Quality`` after a
    ``Rigid Body Marker``'s position, as Motive writes it)."""
    head, cols = [], []
    for k, (name, typ) in enumerate(zip(point_names, point_types, strict=True)):
        block = points[:, k].astype(np.float64) @ Y_UP_TO_Z_UP * scale
        head += [(typ, name, "Position", a) for a in "XYZ"]
        if typ == "Rigid Body Marker":
            block = np.concatenate([block, np.ones((len(block), 1))], 1)
            head.append((typ, name, "Marker Quality", ""))
        block[~point_valid[:, k]] = np.nan
        cols.append(block)
    return head, cols


def write_optitrack(
    path,
    names,
    pos,
    rot,
    valid,
    *,
    fps=120.0,
    units="Meters",
    rotation="Quaternion",
    points=None,
    point_names=(),
    point_types=(),
    point_valid=None,
    frame_numbers=None,
    newline="\r\n",
    bom=False,
    pad=0,
    label_cells=False,
) -> Path:
    """Write plates (Z up, metres: pos (T, N, 3), rot (T, N, 3, 3), valid (T, N)) and points
    (T, M, 3) as a Motive CSV; ``pad`` trailing commas on every row."""
    scale = UNIT_SCALE[units]
    t = len(pos)
    head, cols = plate_columns(names, pos, rot, valid, rotation, scale)
    if points is not None:
        pv = np.ones(points.shape[:2], bool) if point_valid is None else point_valid
        h2, c2 = point_columns(point_names, point_types, points, pv, scale)
        head, cols = head + h2, cols + c2
    frames = np.arange(t) if frame_numbers is None else frame_numbers
    values = np.concatenate([c for c in cols], 1) if cols else np.zeros((t, 0))
    settings = [
        "Format Version",
        "1.21",
        "Take Name",
        "Täke ü",
        "Capture Frame Rate",
        f"{fps:.6f}",
        "Export Frame Rate",
        f"{fps:.6f}",
        "Rotation Type",
        rotation,
        "Length Units",
        units,
        "Coordinate Space",
        "Global",
    ]
    label = (lambda s: s) if label_cells else (lambda s: "")
    rows = [
        settings,
        [],
        [label("Type"), "", *(h[0] for h in head)],
        [label("Name"), "", *(h[1] for h in head)],
        [label("ID"), "", *(f"{i:X}" for i, _ in enumerate(head))],
        ["", "", *(h[2] for h in head)],
        ["Frame", "Time (Seconds)", *(h[3] for h in head)],
    ]
    rows = [[str(c) for c in r] for r in rows]
    for i in range(t):
        rows.append([str(int(frames[i])), f"{i / fps:.6f}", *(_fmt(v) for v in values[i])])
    text = newline.join(",".join(r) + "," * pad for r in rows) + newline
    path = Path(path)
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode("utf-8"))
    return path
