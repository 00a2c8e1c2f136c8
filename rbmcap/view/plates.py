"""Plate poses as drawn: observed plates where they were seen, missing ones (``valid`` False)
greyed out where they were last seen (before it was first seen: where it will first be).

A plate without a rotation (a point marker) is drawn with the world's axes.
"""

from __future__ import annotations

import numpy as np
import roma
import torch


def held_poses(pos: np.ndarray, rot: np.ndarray | None, valid: np.ndarray):
    """Plate poses with every missing entry replaced by the nearest earlier observed one (or the
    first observed one, before any).

    Args:
        pos: (T, N, 3) metres; rot: (T, N, 3, 3) world-from-plate or None; valid: (T, N) bool.

    Returns:
        (wxyz (T, N, 4) float32, w first; pos (T, N, 3) float32; ever (N,) bool: seen at all).
    """
    t, n = valid.shape
    rot = np.broadcast_to(np.eye(3), (t, n, 3, 3)) if rot is None else rot
    frames = np.arange(t)[:, None]
    last = np.maximum.accumulate(np.where(valid, frames, -1), axis=0)
    first = np.argmax(valid, axis=0)[None].repeat(t, 0)
    src = np.where(last >= 0, last, first)  # (T, N) frame whose pose is shown
    cols = np.arange(n)[None]
    xyzw = roma.rotmat_to_unitquat(torch.as_tensor(np.asarray(rot[src, cols], np.float64)))
    wxyz = xyzw[..., [3, 0, 1, 2]].numpy().astype(np.float32)
    return wxyz, np.asarray(pos[src, cols], np.float32), valid.any(axis=0)


def axis_segments(wxyz: np.ndarray, pos: np.ndarray, length: float) -> np.ndarray:
    """(N·3, 2, 3) line segments of N coordinate frames (x, y, z axes of ``length`` metres)."""
    xyzw = torch.as_tensor(np.asarray(wxyz, np.float64)[:, [1, 2, 3, 0]])
    axes = roma.unitquat_to_rotmat(xyzw).numpy().transpose(0, 2, 1) * length  # rows: x, y, z
    start = np.repeat(pos[:, None], 3, axis=1)
    return np.stack([start, start + axes], axis=2).reshape(-1, 2, 3).astype(np.float32)
