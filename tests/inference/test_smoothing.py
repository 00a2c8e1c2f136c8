"""Temporal smoothing of offline answers: noise goes, motion stays, signs and ends handled."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch

from rbmcap.errors import ModelError
from rbmcap.inference import Predictor
from rbmcap.inference.smoothing import (
    DEFAULT_SIGMA_FRAMES,
    continuous_quaternions,
    smooth_answer,
    smooth_series,
)


def _jitter(x: np.ndarray) -> float:
    return float(np.abs(np.diff(x, n=3, axis=0)).mean())


def test_constant_velocity_is_kept_exactly_to_the_ends():
    t = np.arange(50.0)[:, None] * np.array([0.01, -0.02, 0.005])
    np.testing.assert_allclose(smooth_series(t, 1.5), t, atol=1e-12)
    np.testing.assert_array_equal(smooth_series(t, 0.0), t)
    np.testing.assert_array_equal(smooth_series(t[:1], 2.0), t[:1])


def test_noise_is_removed_and_the_motion_kept():
    gen = np.random.default_rng(0)
    time = np.linspace(0, 2, 120)[:, None]
    motion = np.sin(2 * np.pi * 0.8 * time) * np.array([0.3, 0.1, 0.05])
    noisy = motion + 0.003 * gen.standard_normal(motion.shape)
    out = smooth_series(noisy, DEFAULT_SIGMA_FRAMES)
    assert _jitter(out) < 0.4 * _jitter(noisy)
    assert np.abs(out - motion).mean() < np.abs(noisy - motion).mean()


def test_quaternion_signs_do_not_cancel():
    """A constant rotation stored as q, −q, q, ... is the same rotation every frame."""
    q = roma.rotvec_to_unitquat(torch.tensor([0.3, -1.2, 0.4], dtype=torch.float64))
    signs = torch.tensor([(-1.0) ** k for k in range(30)], dtype=torch.float64)
    stored = (signs[:, None] * q)[:, None]  # (T, 1, 4)
    assert np.all(np.sum(continuous_quaternions(stored.numpy()) * q.numpy(), axis=-1) > 0)
    rotmats = roma.unitquat_to_rotmat(stored).float()
    out, _ = smooth_answer(rotmats, torch.zeros(30, 3), 1.0)
    torch.testing.assert_close(out, rotmats, atol=1e-6, rtol=0)


def test_rotation_noise_is_removed():
    gen = torch.Generator().manual_seed(1)
    angle = torch.linspace(0, 1.5, 90, dtype=torch.float64)[:, None, None]
    axis = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    truth = roma.rotvec_to_rotmat(angle * axis)  # (T, 1, 3, 3)
    noise = roma.rotvec_to_rotmat(0.02 * torch.randn(90, 1, 3, generator=gen, dtype=torch.float64))
    noisy = (noise @ truth).float()
    out, _ = smooth_answer(noisy, torch.zeros(90, 3), 1.0)
    err = roma.rotmat_geodesic_distance(out.double(), truth).mean()
    assert err < 0.6 * roma.rotmat_geodesic_distance(noisy.double(), truth).mean()


def test_the_predictor_smooths_by_default_and_can_be_raw(checkpoint):
    gen = torch.Generator().manual_seed(0)
    t = 80
    pos = torch.randn(t, 14, 3, generator=gen).numpy()
    rot = roma.rotvec_to_rotmat(torch.randn(t, 14, 3, generator=gen)).numpy()
    valid = np.ones((t, 14), bool)
    p = Predictor.from_checkpoint(checkpoint)
    assert p.smoothing == DEFAULT_SIGMA_FRAMES
    raw = p.predict(pos, rot, valid, smoothing=0)
    smooth = p.predict(pos, rot, valid)
    again, _ = smooth_answer(raw.rotmats, raw.trans, DEFAULT_SIGMA_FRAMES)
    torch.testing.assert_close(smooth.rotmats, again, atol=1e-5, rtol=0)
    assert _jitter(smooth.trans.numpy()) < _jitter(raw.trans.numpy())
    with pytest.raises(ModelError, match="smoothing=-1"):
        Predictor.from_checkpoint(checkpoint, smoothing=-1)
