"""Realism models: presets, units, seeding, and statistics matching their configuration."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch

from rbmcap.errors import ConfigError
from rbmcap.markers.realism import (
    NoiseConfig,
    OcclusionConfig,
    PlacementConfig,
    RealismConfig,
    SoftTissueConfig,
    apply_perturbation,
    available_realism,
    gap_lengths,
    load_realism,
    sample_perturbation,
    sample_placement,
    sample_valid,
    sample_wobble,
    smooth_noise,
)

FPS = 60.0


def within(measured: float, configured: float, rel: float = 0.10) -> bool:
    return abs(measured - configured) <= rel * configured


def test_presets_exist_and_none_is_off():
    assert {"none", "realistic", "harsh"} <= set(available_realism())
    assert not load_realism("none").enabled
    realistic, harsh = load_realism("realistic"), load_realism("harsh")
    assert realistic.enabled and harsh.enabled
    # optical noise of a good system is sub-millimetre and sub-degree
    assert 0 < realistic.noise.position_mm < 1 and 0 < realistic.noise.rotation_deg < 1
    assert harsh.noise.position_mm > realistic.noise.position_mm
    assert harsh.occlusion.rate_per_min > realistic.occlusion.rate_per_min


def test_unknown_preset_and_bad_values_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown realism preset 'wild'"):
        load_realism("wild")
    bad = tmp_path / "bad.yaml"
    bad.write_text("noise: {position_mm: -1}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: noise.position_mm"):
        load_realism(bad)
    bad.write_text("noise: {positon_mm: 1}\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: unknown key noise\.positon_mm"):
        load_realism(bad)


def test_same_seed_same_bytes_and_draws_depend_on_the_sequence_name():
    cfg = load_realism("harsh")
    a = sample_perturbation(cfg, 300, 14, FPS, seed=7, key="walk")
    b = sample_perturbation(cfg, 300, 14, FPS, seed=7, key="walk")
    c = sample_perturbation(cfg, 300, 14, FPS, seed=7, key="run")
    d = sample_perturbation(cfg, 300, 14, FPS, seed=8, key="walk")
    for field in ("place_offset", "wobble_offset", "noise_pos", "valid"):
        assert getattr(a, field).tobytes() == getattr(b, field).tobytes()
    assert not np.array_equal(a.noise_pos, c.noise_pos)
    assert not np.array_equal(a.noise_pos, d.noise_pos)


def test_switching_one_model_off_leaves_the_others_unchanged():
    full = load_realism("realistic")
    quiet = RealismConfig(
        name="x",
        placement=full.placement,
        soft_tissue=full.soft_tissue,
        noise=NoiseConfig(),
        occlusion=full.occlusion,
    )
    a = sample_perturbation(full, 200, 5, FPS, 1, "s")
    b = sample_perturbation(quiet, 200, 5, FPS, 1, "s")
    assert b.noise_pos is None
    np.testing.assert_array_equal(a.wobble_offset, b.wobble_offset)
    np.testing.assert_array_equal(a.valid, b.valid)


def test_optical_noise_standard_deviation_matches_the_configuration():
    cfg = RealismConfig(noise=NoiseConfig(position_mm=0.5, rotation_deg=0.4))
    p = sample_perturbation(cfg, 4000, 14, FPS, 0, "noise")
    assert within(p.noise_pos.std() * 1e3, 0.5)
    assert within(np.rad2deg(p.noise_rotvec.std()), 0.4)
    assert abs(p.noise_pos.mean()) < 0.05 * 0.5e-3


def test_placement_error_standard_deviations_match_the_configuration():
    rng = np.random.default_rng(0)
    offset, rotvec = sample_placement(PlacementConfig(12.0, 6.0, 3.0), 5000, rng)
    assert np.all(offset[:, 0] == 0)  # a slide stays in the skin's tangent plane
    assert within(offset[:, 1:].std() * 1e3, 12.0)
    assert within(np.rad2deg(rotvec[:, 0].std()), 6.0)
    assert within(np.rad2deg(rotvec[:, 1:].std()), 3.0)


def test_soft_tissue_wobble_is_smooth_with_the_configured_amplitude():
    cfg = SoftTissueConfig(position_mm=4.0, rotation_deg=2.0, bandwidth_hz=1.5)
    offset, rotvec = sample_wobble(cfg, 6000, 14, FPS, np.random.default_rng(3))
    assert within(offset.std() * 1e3, 4.0)
    assert within(np.rad2deg(rotvec.std()), 2.0)
    # low-frequency: frame-to-frame steps are far smaller than the amplitude (white: √2 times)
    step = np.diff(offset, axis=0).std()
    assert step < 0.15 * offset.std()
    spectrum = np.abs(np.fft.rfft(offset[:, 0, 0])) ** 2
    freqs = np.fft.rfftfreq(6000, 1 / FPS)
    assert spectrum[freqs > 6.0].sum() < 0.02 * spectrum.sum()


def test_smooth_noise_has_unit_variance_whatever_the_bandwidth():
    for bandwidth in (0.5, 2.0, 10.0):
        x = smooth_noise(np.random.default_rng(1), 8000, (8,), FPS, bandwidth)
        assert within(x.std(), 1.0)


def test_occlusion_gap_durations_and_rate_match_the_configuration():
    cfg = OcclusionConfig(rate_per_min=6.0, median_s=0.3, sigma=0.7, min_s=0.0, max_s=5.0)
    frames, markers = int(FPS * 1200), 8
    valid = sample_valid(cfg, frames, markers, FPS, np.random.default_rng(5))
    gaps = np.concatenate([gap_lengths(valid[:, n]) for n in range(markers)]) / FPS
    assert within(np.median(gaps), 0.3)
    log_sigma = np.std(np.log(gaps))
    assert within(log_sigma, 0.7, rel=0.15)
    visible_min = valid.sum() / FPS / 60.0
    assert within(len(gaps) / visible_min, 6.0)


def test_occlusion_durations_respect_their_limits():
    cfg = OcclusionConfig(rate_per_min=20.0, median_s=0.5, sigma=1.5, min_s=0.1, max_s=0.8)
    valid = sample_valid(cfg, int(FPS * 600), 4, FPS, np.random.default_rng(2))
    gaps = np.concatenate([gap_lengths(valid[:, n]) for n in range(4)])
    assert gaps.min() >= round(0.1 * FPS) and gaps.max() <= round(0.8 * FPS)


def test_apply_keeps_rotations_valid_and_masks_occluded_entries():
    cfg = load_realism("harsh")
    num = 500
    pert = sample_perturbation(cfg, num, 6, FPS, 0, "x")
    g = torch.Generator().manual_seed(0)
    pos = torch.randn(num, 6, 3, generator=g)
    rot = roma.random_rotmat((num, 6), generator=g)
    p1, r1, v1 = apply_perturbation(pert, 0, pos, rot)
    p2, r2, v2 = apply_perturbation(pert, 100, pos[100:], rot[100:])
    torch.testing.assert_close(p1[100:], p2)
    torch.testing.assert_close(r1[100:], r2)
    assert torch.equal(v1[100:], v2)  # chunks give the same result as one pass
    assert torch.equal(v1, torch.from_numpy(pert.valid))
    assert (~v1).any()
    assert torch.all(p1[~v1] == 0) and torch.all(r1[~v1] == torch.eye(3))
    seen = r1[v1]
    torch.testing.assert_close(
        seen.transpose(-1, -2) @ seen, torch.eye(3).expand_as(seen), atol=1e-5, rtol=0
    )
