"""T-pose detection: the stillest window of the plates near the start of a capture."""

from __future__ import annotations

import numpy as np
import torch

from rbmcap.errors import DataError
from rbmcap.geometry import rotmat_geodesic_angle

ROTATION_RADIUS_M = 0.1
"""Rotational speed counts as the linear speed of a point this far from the plate (m/rad): a
plate turning at 1 rad/s scores like one sliding at 0.1 m/s."""


def plate_speed(pos: np.ndarray, rot: np.ndarray, valid: np.ndarray, fps: float) -> np.ndarray:
    """Per frame step, the plates' mean speed ``|dp/dt| + ROTATION_RADIUS_M · |dθ/dt|``.

    Args:
        pos: (T, N, 3) metres; rot: (T, N, 3, 3) world-from-plate; valid: (T, N) bool.

    Returns:
        (T - 1,) float64 m/s over the plates seen in both frames of a step (inf if none).
    """
    lin = np.linalg.norm(np.diff(pos.astype(np.float64), axis=0), axis=-1)
    r = torch.as_tensor(rot, dtype=torch.float64)
    ang = rotmat_geodesic_angle(r[1:], r[:-1]).numpy()
    both = valid[1:] & valid[:-1]
    speed = (lin + ROTATION_RADIUS_M * ang) * fps
    count = both.sum(axis=1)
    total = np.where(both, speed, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.inf)


def detect_tpose(
    pos: np.ndarray,
    rot: np.ndarray,
    valid: np.ndarray,
    fps: float,
    *,
    window_s: float = 1.0,
    search_s: float = 10.0,
) -> tuple[int, int]:
    """The stillest window of ``window_s`` seconds starting within the first ``search_s``.

    Stillness is the mean of :func:`plate_speed` over the window; a window in which some plate
    is seen in fewer than half of the frames is not a candidate (its offsets would rest on too
    few frames). Stillness is what is detected: the subject is trusted to hold the T-pose then.

    Args:
        pos, rot, valid: (T, N, 3), (T, N, 3, 3), (T, N) plates of the capture.
        fps: frame rate (Hz).

    Returns:
        (a, b): the frames [a, b) (array positions, half-open like a slice).

    Raises:
        DataError: the capture is shorter than the window, or no window has every plate seen.
    """
    num = len(pos)
    width = max(2, round(window_s * fps))
    if num < width:
        raise DataError(f"capture of {num} frames is shorter than the {window_s:g} s T-pose window")
    speed = plate_speed(pos, rot, valid, fps)
    last = min(num - width, max(0, round(search_s * fps)))
    csum = np.concatenate([[0.0], np.cumsum(np.where(np.isfinite(speed), speed, 1e6))])
    seen = np.concatenate([np.zeros((1, valid.shape[1])), np.cumsum(valid, axis=0)])
    starts = np.arange(last + 1)
    score = (csum[starts + width - 1] - csum[starts]) / (width - 1)
    enough = ((seen[starts + width] - seen[starts]) >= width / 2).all(axis=1)
    score = np.where(enough, score, np.inf)
    if not np.isfinite(score).any():
        raise DataError("no T-pose window: in every candidate window some plate is mostly unseen")
    a = int(np.argmin(score))
    return a, a + width
