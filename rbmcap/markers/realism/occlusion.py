"""Occlusion: per-marker gaps in tracking, stored as ``valid=False``."""

from __future__ import annotations

import numpy as np

from rbmcap.markers.realism.config import OcclusionConfig


def sample_gaps(config: OcclusionConfig, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Gaps (G, 2) as [start, end) times in seconds for one marker over ``duration_s``.

    Visible stretches are exponential with mean 60 / rate_per_min seconds; gap durations are
    log-normal (median ``median_s``, shape ``sigma``) clipped to [min_s, max_s].
    """
    if config.rate_per_min <= 0 or duration_s <= 0:
        return np.zeros((0, 2))
    mean_visible = 60.0 / config.rate_per_min
    gaps: list[np.ndarray] = []
    t = 0.0
    batch = max(8, int(2 * duration_s / mean_visible) + 8)
    while t < duration_s:
        visible = rng.exponential(mean_visible, batch)
        length = np.clip(
            config.median_s * np.exp(config.sigma * rng.normal(0.0, 1.0, batch)),
            config.min_s,
            config.max_s,
        )
        steps = np.stack([visible, length], 1).reshape(-1)
        edges = t + np.cumsum(steps)
        pairs = edges.reshape(-1, 2)
        keep = pairs[:, 0] < duration_s
        gaps.append(pairs[keep])
        t = float(edges[-1])
    return np.concatenate(gaps, 0) if gaps else np.zeros((0, 2))


def gaps_to_valid(gaps: np.ndarray, num_frames: int, fps: float) -> np.ndarray:
    """Validity (T,) of one marker: False in the frames a gap covers.

    Each gap covers at least one frame and is followed by at least one visible frame, so gaps
    never merge into one longer gap.
    """
    valid = np.ones(num_frames, dtype=bool)
    free = 0
    for start, end in gaps:
        a = max(round(start * fps), free)
        b = max(a + 1, a + round((end - start) * fps))
        valid[a : min(b, num_frames)] = False
        free = b + 1
    return valid


def sample_valid(
    config: OcclusionConfig, num_frames: int, num_markers: int, fps: float, rng: np.random.Generator
) -> np.ndarray:
    """Validity (T, N) of every marker over a sequence."""
    valid = np.ones((num_frames, num_markers), dtype=bool)
    if config.rate_per_min <= 0:
        return valid
    for n in range(num_markers):
        valid[:, n] = gaps_to_valid(sample_gaps(config, num_frames / fps, rng), num_frames, fps)
    return valid


def gap_lengths(valid: np.ndarray) -> np.ndarray:
    """Lengths in frames of the runs of False in a (T,) validity track (for statistics)."""
    v = np.concatenate([[True], np.asarray(valid, dtype=bool), [True]])
    d = np.diff(v.astype(np.int8))
    return np.flatnonzero(d == 1) - np.flatnonzero(d == -1)
