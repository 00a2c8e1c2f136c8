"""The viewer's one clock: timeline steps at the highest layer rate, and which frame of each layer
(whatever its own rate and length) a step shows."""

from __future__ import annotations

import math

import numpy as np


def timeline_steps(fps: float, duration_s: float) -> int:
    """Steps of a timeline at ``fps`` (Hz) covering ``duration_s`` seconds (at least one)."""
    return max(1, math.ceil(round(duration_s * fps, 6)))


def layer_frames(steps: int, fps: float, layer_fps: float, layer_frames: int) -> np.ndarray:
    """(steps,) the frame of a layer (``layer_frames`` frames at ``layer_fps``) shown at each
    timeline step: the last frame at or before the step's time, held after the layer ends."""
    t = np.arange(steps) / fps
    idx = np.floor(t * layer_fps + 1e-6).astype(int)
    return np.clip(idx, 0, layer_frames - 1)
