"""Test-side writer of C3D files with ezc3d: plate marker clusters as ``POINT`` data (gaps as
residual −1) and, optionally, the plates' poses as a ``ROTATION`` group."""

from __future__ import annotations

from pathlib import Path

import numpy as np

CLUSTER = np.array(
    [[0.030, 0.020, 0.000], [-0.030, 0.020, 0.000], [0.000, -0.035, 0.000], [0.010, 0.000, 0.015]]
)
"""(4, 3) plate-local marker offsets (m): an asymmetric cluster, 4 markers per plate."""

UNIT_SCALE = {"mm": 1000.0, "m": 1.0}


def cluster_points(pos: np.ndarray, rot: np.ndarray, offsets: np.ndarray = CLUSTER) -> np.ndarray:
    """(T, N·K, 3) world marker positions ``p + R · offset`` of plates (T, N, 3), (T, N, 3, 3)
    with K plate-local ``offsets`` (K, 3); plate-major order."""
    pts = pos[:, :, None, :] + np.einsum("tnij,kj->tnki", rot.astype(np.float64), offsets)
    return pts.reshape(len(pos), -1, 3)


def cluster_names(names) -> list[str]:
    """``plate:m0`` … ``plate:m3`` for each plate, in :func:`cluster_points`'s order."""
    return [f"{n}:m{k}" for n in names for k in range(len(CLUSTER))]


def write_c3d(
    path,
    point_names,
    points,
    point_valid,
    *,
    fps=100.0,
    units="mm",
    first_frame=0,
    plate_names=None,
    pos=None,
    rot=None,
    valid=None,
) -> Path:
    """Write points (T, M, 3) metres with validity (T, M) and, when ``plate_names`` is given,
    plates (T, N, 3) m / (T, N, 3, 3) / valid (T, N) as ROTATION (NaN matrices when invalid)."""
    import ezc3d

    scale = UNIT_SCALE[units]
    c = ezc3d.c3d()
    c["parameters"]["POINT"]["RATE"]["value"] = [float(fps)]
    c["parameters"]["POINT"]["LABELS"]["value"] = list(point_names)
    c["parameters"]["POINT"]["UNITS"]["value"] = [units]
    t, m = point_valid.shape
    data = np.ones((4, m, t))
    data[:3] = (points.astype(np.float64) * scale).transpose(2, 1, 0)
    res = np.where(point_valid.T, 0.5, -1.0)[None]
    data[:3, ~point_valid.T] = 0.0
    c["data"]["points"] = data
    c["data"]["meta_points"]["residuals"] = res
    if plate_names is not None:
        mats = np.tile(np.eye(4), (t, len(plate_names), 1, 1))
        mats[..., :3, :3] = rot
        mats[..., :3, 3] = pos * scale
        mats[~valid] = np.nan
        c["data"]["rotations"] = mats.transpose(2, 3, 1, 0)
        c.add_parameter("ROTATION", "LABELS", list(plate_names))
    c["header"]["points"]["first_frame"] = int(first_frame)
    path = Path(path)
    c.write(str(path))
    return path
