"""Training-time pieces: whole-window plate hiding, the velocity and acceleration terms."""

from __future__ import annotations

import torch

from rbmcap.training.dropout import hide_plates
from rbmcap.training.module import _difference_error, _velocity_error


def test_hidden_plates_vanish_for_whole_windows_and_never_the_root():
    valid = torch.ones(400, 30, 14, dtype=torch.bool)
    gen = torch.Generator().manual_seed(0)
    out = hide_plates(valid, 0.5, gen, protect=1)
    gone = ~out.any(1)  # (B, N): plates missing in every frame of the window
    assert torch.equal(~out, gone[:, None, :].expand_as(out))  # whole windows only
    assert not gone[:, 1].any()
    per_window = gone.sum(1)
    assert set(per_window.tolist()) == {0, 1, 2}
    assert 0.4 < (per_window > 0).float().mean() < 0.6
    assert torch.equal(hide_plates(valid, 0.0, gen), valid)


def test_the_velocity_term_sees_jitter_but_not_an_offset():
    t = torch.linspace(0, 1, 20)[:, None, None].expand(20, 24, 3)
    true = torch.sin(3 * t)
    assert _velocity_error(true + 0.01, true) < 1e-6  # a constant offset moves nothing
    shake = 0.001 * (-1.0) ** torch.arange(20.0)[:, None, None]
    assert _velocity_error(true + shake, true) > 1.5e-3  # 2 mm per frame, on 3 axes
    assert _velocity_error(true[:1], true[:1]) == 0


def test_the_acceleration_term_sees_shake_but_not_a_steady_drift():
    t = torch.linspace(0, 1, 20)[:, None, None].expand(20, 24, 3)
    true = torch.sin(3 * t)
    drift = 0.002 * torch.arange(20.0)[:, None, None]  # constant velocity error
    assert _difference_error(true + drift, true, order=2) < 1e-6
    assert _velocity_error(true + drift, true) > 3e-3
    shake = 0.001 * (-1.0) ** torch.arange(20.0)[:, None, None]
    assert _difference_error(true + shake, true, order=2) > 6e-3  # 4 mm per frame², 3 axes
    assert _difference_error(true[:2], true[:2], order=2) == 0
