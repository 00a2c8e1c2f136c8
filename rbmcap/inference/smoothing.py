"""Zero-phase temporal smoothing of a whole sequence's answer (offline prediction only).

A regression network answers each frame with a little independent noise, which shows as joint
jitter well above the truth's. A Gaussian over time of :data:`DEFAULT_SIGMA_FRAMES` (a kernel of
7 frames at 60 Hz) removes that noise and not the motion; σ was chosen on validation data
(docs/history.md#how-the-settings-were-chosen).

Rotations are smoothed as unit quaternions, each made continuous in sign first (q and −q are
the same rotation), then renormalised; translation as it is. The ends are padded by odd
reflection (2·x₀ − x_k), so a motion at constant velocity stays exactly as it is. Streams cannot
look ahead and are not smoothed.
"""

from __future__ import annotations

import math

import numpy as np
import roma
import torch
from scipy.ndimage import gaussian_filter1d

DEFAULT_SIGMA_FRAMES = 0.7
"""σ (frames at the model's rate) of :meth:`rbmcap.inference.Predictor.predict`'s smoothing."""

_TRUNCATE = 4.0  # the kernel reaches ±4σ (scipy's default)


def smooth_series(x: np.ndarray, sigma: float) -> np.ndarray:
    """``x`` (T, ...) filtered along its first axis by a Gaussian of σ ``sigma`` frames, the
    ends padded by odd reflection; returned as it is when ``sigma`` is 0 or T < 2."""
    x = np.asarray(x, dtype=np.float64)
    if sigma <= 0 or len(x) < 2:
        return x
    r = min(math.ceil(_TRUNCATE * sigma), len(x) - 1)
    head = 2 * x[:1] - x[r:0:-1]
    tail = 2 * x[-1:] - x[-2 : -r - 2 : -1]
    padded = np.concatenate([head, x, tail])
    out = gaussian_filter1d(padded, sigma, axis=0, mode="nearest", truncate=_TRUNCATE)
    return out[r : r + len(x)]


def continuous_quaternions(q: np.ndarray) -> np.ndarray:
    """Unit quaternions (T, ..., 4) with signs flipped so that each frame's is on the same side
    as the frame before (the same rotations)."""
    q = np.array(q, dtype=np.float64)
    if len(q) < 2:
        return q
    flip = np.sum(q[1:] * q[:-1], axis=-1) < 0
    sign = np.cumprod(np.where(flip, -1.0, 1.0), axis=0)
    q[1:] *= sign[..., None]
    return q


def smooth_rotations(rotmats: torch.Tensor, sigma: float) -> torch.Tensor:
    """Rotation matrices (T, J, 3, 3) smoothed over time (σ ``sigma`` frames)."""
    if sigma <= 0 or rotmats.shape[0] < 2:
        return rotmats
    q = continuous_quaternions(roma.rotmat_to_unitquat(rotmats.double()).numpy())
    q = smooth_series(q, sigma)
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return roma.unitquat_to_rotmat(torch.from_numpy(q)).to(rotmats.dtype)


def smooth_answer(
    rotmats: torch.Tensor, trans: torch.Tensor, sigma: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """A whole sequence's local rotations (T, 24, 3, 3) and translation (T, 3) m smoothed over
    time with σ ``sigma`` frames (0: unchanged)."""
    if sigma <= 0:
        return rotmats, trans
    smoothed = torch.from_numpy(smooth_series(trans.double().numpy(), sigma)).to(trans.dtype)
    return smooth_rotations(rotmats, sigma), smoothed
