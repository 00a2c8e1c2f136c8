"""Which frames a calibration fits: every capture's frames, thinned to the distinct poses.

A frame is described by the plates' poses relative to the root plate (rotations ``R_rootᵀ R_i``
and positions ``R_rootᵀ (p_i − p_root)``). Constant plate offsets do not change distances between
these descriptors (``‖Cᵀ A B − Cᵀ A' B‖ = ‖A − A'‖`` for rotations C, B), so variety is measured
the same before and after calibration. Frames are picked by farthest-point sampling from the
stillest frame until the next pick is within ``min_distance`` of one already picked: a static
yields one or a few frames, a take with motion up to ``max_frames`` spread over its poses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rbmcap.errors import ConfigError, DataError

POSITION_SCALE_M = 0.3
"""Relative positions are divided by this (m) in the descriptor: 0.3 m counts like a rotation
that changes a matrix entry by 1."""
MIN_SEEN = 0.75
"""A candidate frame sees at least this fraction of the plates."""

FrameSpec = None | tuple[int, int] | Sequence[int]
"""Frames of one capture: None (chosen), (a, b) a half-open range to choose in, or a list."""


def pose_descriptors(pos: np.ndarray, rot: np.ndarray, root: int) -> np.ndarray:
    """(T, N·12) descriptors of frames (see the module docstring).

    Args:
        pos: (T, N, 3) metres; rot: (T, N, 3, 3) world-from-plate; root: the root plate's index.
    """
    r0 = rot[:, root]
    rel_rot = np.einsum("tji,tnjk->tnik", r0, rot)
    rel_pos = np.einsum("tji,tnj->tni", r0, pos - pos[:, root : root + 1]) / POSITION_SCALE_M
    return np.concatenate([rel_rot.reshape(len(pos), -1), rel_pos.reshape(len(pos), -1)], 1)


def select_frames(
    pos: np.ndarray,
    rot: np.ndarray,
    valid: np.ndarray,
    root: int,
    *,
    spec: FrameSpec = None,
    max_frames: int = 40,
    min_distance: float = 0.5,
) -> np.ndarray:
    """Frame indices (K,) of one capture to calibrate on, sorted.

    Args:
        pos, rot, valid: (T, N, 3), (T, N, 3, 3), (T, N) the capture's plates.
        root: index of the root plate (its frame anchors the descriptor).
        spec: None (choose among all frames), (a, b) (choose within [a, b)), or explicit
            indices (used as given).
        max_frames: most frames chosen.
        min_distance: stop when the farthest remaining frame is this close (descriptor units).

    Raises:
        ConfigError: a frame index or range outside the capture.
        DataError: no frame sees enough plates (and the root plate).
    """
    num = len(pos)
    if spec is not None and not isinstance(spec, tuple):
        idx = np.asarray(list(spec), dtype=np.int64)
        if idx.size == 0 or idx.min() < 0 or idx.max() >= num:
            raise ConfigError(f"frames {list(spec)[:5]}...: outside the capture's {num} frames")
        return np.unique(idx)
    a, b = (0, num) if spec is None else (int(spec[0]), int(spec[1]))
    if not 0 <= a < b <= num:
        raise ConfigError(f"frames [{a}, {b}): outside the capture's {num} frames")
    seen = valid[a:b].mean(axis=1) >= MIN_SEEN
    seen &= valid[a:b, root]
    cand = np.flatnonzero(seen) + a
    if cand.size == 0:
        raise DataError(
            f"no frame in [{a}, {b}) sees the root plate and {MIN_SEEN:.0%} of the plates"
        )
    desc = pose_descriptors(pos[cand].astype(np.float64), rot[cand].astype(np.float64), root)
    start = _stillest(desc)
    picked = [start]
    dist = np.linalg.norm(desc - desc[start], axis=1)
    while len(picked) < min(max_frames, len(cand)):
        k = int(np.argmax(dist))
        if dist[k] < min_distance:
            break
        picked.append(k)
        dist = np.minimum(dist, np.linalg.norm(desc - desc[k], axis=1))
    return np.sort(cand[picked])


def _stillest(desc: np.ndarray) -> int:
    """Index of the candidate whose neighbours in the sequence differ least from it."""
    if len(desc) < 3:
        return 0
    step = np.linalg.norm(np.diff(desc, axis=0), axis=1)
    score = np.concatenate([[step[0]], step[:-1] + step[1:], [step[-1]]])
    return int(np.argmin(score))
