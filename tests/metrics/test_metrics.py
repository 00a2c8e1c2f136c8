"""The metrics on hand-built cases with known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import roma
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.metrics import (
    JOINT_REGIONS,
    average_metrics,
    betas_error,
    evaluate_sequence,
    global_orientation_error,
    jitter,
    joint_angle_error,
    legacy_mpjre,
    mpjpe,
    mpjve,
    pa_mpjpe,
    procrustes_align,
    region_errors,
    root_aligned_mpjpe,
    v2v,
)

DEG = math.pi / 180


def _about_z(angle: float) -> torch.Tensor:
    return roma.rotvec_to_rotmat(torch.tensor([0.0, 0.0, angle], dtype=torch.float64))


def test_mpjpe_is_the_mean_joint_distance():
    true = torch.zeros(2, 4, 3)
    pred = true.clone()
    pred[0, :, 0] = 0.01  # every joint 1 cm off in frame 0
    pred[1, 0, :] = torch.tensor([0.03, 0.04, 0.0])  # one joint 5 cm off in frame 1
    assert torch.allclose(mpjpe(pred, true), torch.tensor([0.01, 0.0125]))


def test_root_alignment_removes_translation_only():
    gen = torch.Generator().manual_seed(0)
    true = torch.randn(3, 24, 3, generator=gen)
    shifted = true + torch.tensor([0.5, -0.2, 1.0])
    assert root_aligned_mpjpe(shifted, true).abs().max() < 1e-6
    turned = true @ _about_z(0.3).float().T
    assert root_aligned_mpjpe(turned, true).min() > 1e-3


@settings(max_examples=25, deadline=None)
@given(
    rotvec=st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),
    shift=st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3),
    seed=st.integers(0, 1000),
)
def test_procrustes_removes_any_rigid_transform_exactly(rotvec, shift, seed):
    gen = torch.Generator().manual_seed(seed)
    true = torch.randn(24, 3, generator=gen, dtype=torch.float64)
    r = roma.rotvec_to_rotmat(torch.tensor(rotvec, dtype=torch.float64))
    moved = true @ r.T + torch.tensor(shift, dtype=torch.float64)
    assert pa_mpjpe(moved, true) < 1e-9
    aligned, r_fit, _ = procrustes_align(moved, true)
    assert torch.allclose(aligned, true, atol=1e-9)
    assert torch.allclose(r_fit, r.T, atol=1e-9)
    assert torch.det(r_fit) == pytest.approx(1.0)


def test_procrustes_does_not_reflect_or_scale():
    gen = torch.Generator().manual_seed(1)
    true = torch.randn(5, 24, 3, generator=gen, dtype=torch.float64)
    mirrored = true * torch.tensor([-1.0, 1.0, 1.0], dtype=torch.float64)
    assert pa_mpjpe(mirrored, true).min() > 1e-3  # a mirror image is not a rigid motion
    scaled = 1.1 * true
    assert pa_mpjpe(scaled, true).min() > 1e-3  # no scale alignment
    _, r, _ = procrustes_align(mirrored, true)
    assert torch.allclose(torch.det(r), torch.ones(5, dtype=torch.float64))


@pytest.mark.parametrize("degrees", [0.0, 1.0, 30.0, 90.0, 179.0])
def test_known_rotation_errors_give_known_angles(degrees):
    true = roma.random_rotmat(6, generator=torch.Generator().manual_seed(2)).double()
    pred = true @ _about_z(degrees * DEG)
    expected = torch.full((6,), degrees * DEG, dtype=torch.float64)
    assert torch.allclose(global_orientation_error(pred, true), expected, atol=1e-7)


def test_joint_rotation_error_averages_body_joints_and_leaves_the_root_out():
    true = torch.eye(3, dtype=torch.float64).repeat(2, 24, 1, 1)
    pred = true.clone()
    pred[:, 0] = _about_z(1.0)  # global orientation: not part of the body pose error
    pred[0, 5] = _about_z(23 * DEG)  # one of 23 body joints off by 23° → mean 1°
    err = joint_angle_error(pred, true)
    assert torch.allclose(err, torch.tensor([1 * DEG, 0.0], dtype=torch.float64), atol=1e-9)
    assert torch.allclose(global_orientation_error(pred, true), torch.ones(2, dtype=torch.float64))


def test_legacy_mpjre_matches_a_hand_computation():
    true = torch.zeros(1, 24, 3, dtype=torch.float64)
    pred = torch.zeros(1, 24, 3, dtype=torch.float64)
    pred[0, 0] = torch.tensor([1.0, 1.0, 1.0])  # root: excluded
    pred[0, 1] = torch.tensor([0.3, 0.0, -0.3], dtype=torch.float64)  # |Δ| = 0.3 + 0 + 0.3
    true[0, 2] = torch.tensor([3.0, 0.0, 0.0])
    pred[0, 2] = torch.tensor([-3.0, 0.0, 0.0])  # Δ = −6 wraps to 2π − 6 ≈ 0.283
    expected = (0.6 + (2 * math.pi - 6.0)) / (23 * 3)
    assert legacy_mpjre(pred, true).item() == pytest.approx(expected, rel=1e-12)


def test_legacy_mpjre_converts_rotation_matrices_to_axis_angle():
    def about_x(a):  # written out, not through roma
        c, s = math.cos(a), math.sin(a)
        return torch.tensor([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]], dtype=torch.float64)

    def about_z(a):
        c, s = math.cos(a), math.sin(a)
        return torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)

    pred = torch.eye(3, dtype=torch.float64).repeat(1, 24, 1, 1)
    true = torch.zeros(1, 24, 3, dtype=torch.float64)  # axis-angle, mixed with matrices
    pred[0, 0] = about_z(1.0)  # root: excluded
    pred[0, 3], true[0, 3, 0] = about_x(0.4), 0.1  # axis-angle (0.4, 0, 0) vs (0.1, 0, 0): 0.3
    pred[0, 5], true[0, 5, 2] = about_z(2.5), -2.5  # 2.5 − (−2.5) = 5 wraps to 2π − 5
    expected = (0.3 + (2 * math.pi - 5.0)) / (23 * 3)
    assert legacy_mpjre(pred, true).item() == pytest.approx(expected, rel=1e-9)


def test_legacy_mpjre_joint_subset():
    pred = torch.zeros(24, 3)
    pred[22] = 1.0  # a hand joint: in 1..23, not in the papers' 1..21
    assert legacy_mpjre(pred, torch.zeros(24, 3), joints=range(1, 22)) == 0.0
    assert legacy_mpjre(pred, torch.zeros(24, 3)) == pytest.approx(3.0 / 69)


def test_jitter_of_constant_acceleration_is_zero_and_of_a_cubic_is_its_jerk():
    fps = 60.0
    t = torch.arange(50, dtype=torch.float64)[:, None, None] / fps
    a = torch.tensor([1.0, -2.0, 9.81], dtype=torch.float64)
    path = 0.3 + 2.0 * t + 0.5 * a * t**2  # (T, 1, 3): constant acceleration
    assert jitter(path.expand(50, 4, 3), fps).abs().max() < 1e-6
    cubic = (t**3 / 6) * torch.tensor([6.0, 0.0, 0.0], dtype=torch.float64)  # jerk 6 m/s³ on x
    assert torch.allclose(jitter(cubic, fps), torch.full((47,), 6.0, dtype=torch.float64))


def test_mpjve_of_a_constant_offset_is_zero_and_of_a_drift_is_its_speed():
    gen = torch.Generator().manual_seed(3)
    true = torch.randn(10, 24, 3, generator=gen, dtype=torch.float64)
    assert mpjve(true + 0.2, true, 30.0).abs().max() < 1e-12
    drift = torch.arange(10, dtype=torch.float64)[:, None, None] * torch.tensor([0.0, 0.0, 0.01])
    err = mpjve(true + drift, true, 30.0)  # 1 cm per frame at 30 fps = 0.3 m/s
    assert err.shape == (9,) and torch.allclose(err, torch.full((9,), 0.3, dtype=torch.float64))


def test_v2v_simple_cases():
    v = torch.zeros(2, 100, 3)
    w = v.clone()
    w[0, :50, 1] = 0.002  # half the vertices 2 mm off
    assert torch.allclose(v2v(w, v), torch.tensor([0.001, 0.0]))


def test_regions_partition_the_skeleton_and_weight_back_to_mpjpe():
    joints = sorted(j for js in JOINT_REGIONS.values() for j in js)
    assert joints == list(range(24))
    gen = torch.Generator().manual_seed(4)
    pred, true = torch.randn(7, 24, 3, generator=gen), torch.randn(7, 24, 3, generator=gen)
    regions = region_errors(pred, true)
    weighted = sum(len(JOINT_REGIONS[k]) * v for k, v in regions.items()) / 24
    assert torch.allclose(weighted, mpjpe(pred, true), atol=1e-6)


def test_betas_error_pads_the_shorter_vector():
    pred = torch.tensor([1.0, 2.0])
    true = torch.tensor([1.0, 1.0, 0.0, 3.0])
    assert betas_error(pred, true).item() == pytest.approx((0 + 1 + 0 + 3) / 4)


def test_metrics_accept_any_batch_dims():
    gen = torch.Generator().manual_seed(5)
    pred, true = torch.randn(2, 3, 24, 3, generator=gen), torch.randn(2, 3, 24, 3, generator=gen)
    assert mpjpe(pred, true).shape == (2, 3)
    assert pa_mpjpe(pred, true).shape == (2, 3)
    assert jitter(torch.randn(2, 8, 24, 3, generator=gen), 60.0).shape == (2, 5)


def test_sequence_metrics_of_the_truth_are_zero(standin):
    gen = np.random.default_rng(0)
    poses = 0.2 * gen.standard_normal((6, 24, 3))
    true = {"poses": poses, "betas": gen.standard_normal(10), "trans": gen.standard_normal((6, 3))}
    m = evaluate_sequence(standin, true, true, fps=30.0)
    for key, value in m.mean.items():
        if key.startswith("jitter"):
            continue
        assert value == pytest.approx(0.0, abs=1e-3), key
    assert m.mean["jitter_pred_m_s3"] == pytest.approx(m.mean["jitter_true_m_s3"])
    assert np.isnan(m.per_frame["mpjve_mm_s"][0]) and np.isnan(m.per_frame["jitter_pred_m_s3"][2])


def test_sequence_metrics_of_a_shift_and_a_turn(standin):
    gen = np.random.default_rng(1)
    poses = 0.2 * gen.standard_normal((5, 24, 3))
    trans = gen.standard_normal((5, 3))
    true = {"poses": poses, "trans": trans}
    shifted = {"poses": torch.as_tensor(poses), "trans": trans + np.array([0.0, 0.0, 0.01])}
    m = evaluate_sequence(standin, shifted, true)
    assert m.mean["mpjpe_mm"] == pytest.approx(10.0, abs=1e-3)
    assert m.mean["v2v_mm"] == pytest.approx(10.0, abs=1e-3)
    assert m.mean["root_aligned_mpjpe_mm"] == pytest.approx(0.0, abs=1e-3)
    assert m.mean["pa_mpjpe_mm"] == pytest.approx(0.0, abs=1e-3)
    assert m.mean["mpjve_mm_s"] == pytest.approx(0.0, abs=1e-2)
    rot = roma.rotvec_to_rotmat(torch.as_tensor(poses))
    bent = rot.clone()
    bent[:, 18] = bent[:, 18] @ _about_z(23 * DEG).to(bent.dtype)
    m = evaluate_sequence(standin, {"poses": bent, "trans": trans}, true, vertices=False)
    assert m.mean["joint_rotation_deg"] == pytest.approx(1.0, abs=1e-3)
    assert m.mean["global_orientation_deg"] == pytest.approx(0.0, abs=1e-3)
    assert "v2v_mm" not in m.mean and m.mean["lower_body_mm"] == pytest.approx(0.0, abs=1e-3)
    both = average_metrics([m, m])
    assert both["joint_rotation_deg"] == pytest.approx(m.mean["joint_rotation_deg"])
