"""Frame-rate conversion: where each new frame falls between the old ones.

A sequence of ``T`` frames at ``fps_in`` Hz has frame ``t`` at time ``t / fps_in`` s. A sample at
time ``s`` lies between frames ``lo = floor(s · fps_in)`` and ``hi = lo + 1`` with weight
``w = s · fps_in − lo`` on ``hi``; what is interpolated (slerp for rotations, linear for
positions) is the caller's.
"""

from __future__ import annotations

import math

import numpy as np


def resample_times(num_frames: int, fps_in: float, fps_out: float, *, cover: bool = False):
    """Times (K,) float64 s of the frames ``k / fps_out`` of a sequence resampled to ``fps_out``.

    Frames run while their time lies within the input's span ``[0, (T − 1) / fps_in]``; with
    ``cover``, one more frame when the span is not a whole number of output frames, so the output
    reaches past the span's end (that frame holds the last input frame).
    """
    span = max(num_frames - 1, 0) / fps_in * fps_out
    count = math.ceil(span - 1e-6) if cover else math.floor(span + 1e-6)
    return np.arange(max(count, 0) + 1, dtype=np.float64) / fps_out


def sample_frames(num_frames: int, fps: float, times) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The neighbour frames and weights of samples at ``times`` (K,) s in a sequence of
    ``num_frames`` frames at ``fps`` Hz.

    Returns:
        ``lo`` (K,) int64, ``hi`` (K,) int64 and ``w`` (K,) float64 in [0, 1], the weight of
        ``hi``: sample = (1 − w) · x[lo] + w · x[hi]. Times outside the sequence hold its first
        or last frame (no extrapolation).
    """
    pos = np.clip(np.asarray(times, dtype=np.float64) * fps, 0.0, num_frames - 1)
    lo = np.minimum(np.floor(pos + 1e-9).astype(np.int64), num_frames - 1)
    hi = np.minimum(lo + 1, num_frames - 1)
    return lo, hi, np.clip(pos - lo, 0.0, 1.0)
