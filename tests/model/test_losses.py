"""Specifications of the training losses and the 6D rotation representation."""

from __future__ import annotations

import math

import pytest
import roma
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.errors import ConfigError
from rbmcap.geometry import rotmat_geodesic_angle
from rbmcap.model.losses import (
    ROTATION_LOSSES,
    axis_angle_mse,
    betas_l1,
    chordal_loss,
    geodesic_loss,
    rotation_loss,
    rotmat_mse,
    sixd_mse,
    trans_l2,
)
from rbmcap.model.rotation6d import matrix_to_rotation_6d, rotation_6d_to_matrix

# Angles that break naive formulas: exactly 0, tiny, generic, just below π and exactly π.
HARD_ANGLES = [0.0, 1e-7, 1e-4, 0.3, 1.0, 2.5, math.pi - 1e-3, math.pi - 1e-4, math.pi]


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors gain nothing from intra-op threads, and when other processes share the
    cores, spinning OpenMP workers make these tests 10-30x slower; run them on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _pairs_at_angles(
    angles: list[float], dtype: torch.dtype, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random R and R·exp(θ·axis) for each θ (built in float64, then cast)."""
    g = torch.Generator().manual_seed(seed)
    n = len(angles)
    R = roma.random_rotmat(n, dtype=torch.float64, generator=g)
    axis = torch.randn(n, 3, generator=g, dtype=torch.float64)
    axis = axis / axis.norm(dim=-1, keepdim=True)
    theta = torch.tensor(angles, dtype=torch.float64)
    R2 = R @ roma.rotvec_to_rotmat(axis * theta[:, None])
    return R.to(dtype), R2.to(dtype), theta


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_geodesic_angle_equals_the_true_rotation_angle(dtype):
    R1, R2, theta = _pairs_at_angles(HARD_ANGLES, dtype)
    angle = rotmat_geodesic_angle(R1, R2)
    assert angle.dtype == dtype
    torch.testing.assert_close(angle.double(), theta, atol=1e-5, rtol=0)
    torch.testing.assert_close(rotmat_geodesic_angle(R2, R1).double(), theta, atol=1e-5, rtol=0)


def test_geodesic_angle_is_exactly_zero_for_identical_rotations():
    R = roma.random_rotmat(64, generator=torch.Generator().manual_seed(1))
    assert rotmat_geodesic_angle(R, R).abs().max() < 1e-6


def test_geodesic_angle_keeps_leading_dims_and_broadcasts():
    g = torch.Generator().manual_seed(2)
    R1 = roma.random_rotmat((2, 5, 24), generator=g)
    R2 = roma.random_rotmat((2, 5, 24), generator=g)
    assert rotmat_geodesic_angle(R1, R2).shape == (2, 5, 24)
    assert rotmat_geodesic_angle(R1, torch.eye(3)).shape == (2, 5, 24)
    torch.testing.assert_close(geodesic_loss(R1, R2), rotmat_geodesic_angle(R1, R2).mean())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("angle", [0.0, 1e-6, math.pi - 1e-4, math.pi - 1e-6, math.pi])
def test_geodesic_gradients_are_finite_and_bounded_at_zero_and_near_pi(angle, dtype):
    R1, R2, _ = _pairs_at_angles([angle] * 4, dtype, seed=3)
    R1.requires_grad_(True)
    R2.requires_grad_(True)
    rotmat_geodesic_angle(R1, R2).sum().backward()
    assert torch.isfinite(R1.grad).all() and torch.isfinite(R2.grad).all()
    # bounded, not merely finite: |∂θ/∂R|_F is 1/√2 away from the end points (0 at them)
    assert R1.grad.norm(dim=(-2, -1)).max() <= 0.71


@pytest.mark.parametrize("angle", [0.0, math.pi - 1e-4, math.pi])
def test_geodesic_gradients_through_6d_decoding_are_finite(angle):
    R1, R2, _ = _pairs_at_angles([angle] * 4, torch.float32, seed=4)
    x = matrix_to_rotation_6d(R1).requires_grad_(True)
    geodesic_loss(rotation_6d_to_matrix(x), R2).backward()
    assert torch.isfinite(x.grad).all()


def test_geodesic_gradient_moves_prediction_towards_target():
    R1, R2, _ = _pairs_at_angles([0.5, 2.0, math.pi - 1e-3], torch.float64, seed=5)
    x = matrix_to_rotation_6d(R1).requires_grad_(True)
    before = rotmat_geodesic_angle(rotation_6d_to_matrix(x), R2)
    before.sum().backward()
    with torch.no_grad():
        after = rotmat_geodesic_angle(rotation_6d_to_matrix(x - 1e-3 * x.grad), R2)
    assert (after < before).all()


unit_quats = st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=4, max_size=4).filter(
    lambda q: sum(c * c for c in q) > 1e-3
)


@settings(max_examples=60, deadline=None)
@given(q=unit_quats, axis=unit_quats, angle=st.floats(0.0, math.pi))
def test_geodesic_is_exact_with_finite_gradients_for_any_rotation_pair(q, axis, angle):
    quat = torch.tensor(q, dtype=torch.float64)
    R1 = roma.unitquat_to_rotmat(quat / quat.norm())
    u = torch.tensor(axis[:3], dtype=torch.float64)
    if u.norm() < 1e-3:
        u = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    R2 = R1 @ roma.rotvec_to_rotmat(u / u.norm() * angle)
    R1f = R1.float().requires_grad_(True)
    value = rotmat_geodesic_angle(R1f, R2.float())
    assert abs(value.item() - angle) < 1e-5
    value.backward()
    assert torch.isfinite(R1f.grad).all()


def test_geodesic_agrees_with_roma_away_from_pi():
    g = torch.Generator().manual_seed(6)
    R1 = roma.random_rotmat(256, dtype=torch.float64, generator=g)
    R2 = roma.random_rotmat(256, dtype=torch.float64, generator=g)
    reference = roma.rotmat_geodesic_distance(R1, R2)
    keep = reference < 3.0
    torch.testing.assert_close(rotmat_geodesic_angle(R1, R2)[keep], reference[keep])


@pytest.mark.parametrize("name", sorted(ROTATION_LOSSES))
def test_rotation_losses_are_zero_for_identical_inputs_and_positive_otherwise(name):
    loss = rotation_loss(name)
    g = torch.Generator().manual_seed(7)
    R = roma.random_rotmat((3, 24), generator=g)
    assert loss(R, R).item() == pytest.approx(0.0, abs=1e-6)
    R1, R2, _ = _pairs_at_angles([0.01, 0.5, 2.0, 3.0], torch.float32, seed=8)
    for i in range(4):
        assert loss(R1[i], R2[i]).item() > 1e-6


@pytest.mark.parametrize("name", sorted(ROTATION_LOSSES))
@pytest.mark.parametrize("angle", [0.0, 1.0, math.pi - 1e-4])
def test_rotation_losses_have_finite_gradients(name, angle):
    R1, R2, _ = _pairs_at_angles([angle] * 3, torch.float32, seed=9)
    R1.requires_grad_(True)
    rotation_loss(name)(R1, R2).backward()
    assert torch.isfinite(R1.grad).all()


def test_chordal_loss_is_four_sin_squared_of_half_the_angle():
    angles = [0.0, 0.2, 1.0, 2.0, math.pi - 1e-3, math.pi]
    R1, R2, theta = _pairs_at_angles(angles, torch.float64, seed=10)
    for i in range(len(angles)):
        expected = 4 * math.sin(theta[i].item() / 2) ** 2
        assert chordal_loss(R1[i], R2[i]).item() == pytest.approx(expected, abs=1e-9)


def test_matrix_losses_match_their_closed_forms():
    R1, R2, _ = _pairs_at_angles([0.7], torch.float64, seed=11)
    # ‖R₁ − R₂‖²_F = 8 sin²(θ/2)
    assert rotmat_mse(R1, R2).item() == pytest.approx(8 * math.sin(0.35) ** 2 / 9, rel=1e-9)
    r1, r2 = roma.rotmat_to_rotvec(R1), roma.rotmat_to_rotvec(R2)
    assert axis_angle_mse(R1, R2).item() == pytest.approx(((r1 - r2) ** 2).mean().item())


def test_sixd_mse_accepts_matrices_or_raw_6d():
    g = torch.Generator().manual_seed(12)
    R1 = roma.random_rotmat(5, generator=g)
    R2 = roma.random_rotmat(5, generator=g)
    expected = ((R1[..., :2] - R2[..., :2]) ** 2).mean()
    torch.testing.assert_close(sixd_mse(R1, R2), expected)
    torch.testing.assert_close(sixd_mse(matrix_to_rotation_6d(R1), R2), expected)
    raw = torch.randn(5, 6, generator=g)
    torch.testing.assert_close(sixd_mse(raw, R2), ((raw - matrix_to_rotation_6d(R2)) ** 2).mean())


def test_unknown_rotation_loss_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"geodesic.*chordal"):
        rotation_loss("quaternion_l1")


def test_betas_l1_is_mean_absolute_difference():
    pred = torch.tensor([[1.0, -2.0, 0.0], [0.5, 0.5, 0.5]])
    true = torch.zeros(2, 3)
    assert betas_l1(pred, true).item() == pytest.approx(4.5 / 6)
    assert betas_l1(true, true).item() == 0.0


def test_trans_l2_is_mean_euclidean_distance_in_metres_with_finite_gradient_at_zero():
    pred = torch.tensor([[[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]]], requires_grad=True)
    true = torch.zeros(1, 2, 3)
    loss = trans_l2(pred, true)
    assert loss.item() == pytest.approx(2.5)
    loss.backward()
    assert torch.isfinite(pred.grad).all()
    torch.testing.assert_close(pred.grad[0, 1], torch.zeros(3))


def test_6d_round_trip_recovers_the_rotation():
    R = roma.random_rotmat((4, 24), generator=torch.Generator().manual_seed(13))
    x = matrix_to_rotation_6d(R)
    assert x.shape == (4, 24, 6)
    torch.testing.assert_close(x[..., :3], R[..., :, 0])
    torch.testing.assert_close(x[..., 3:], R[..., :, 1])
    torch.testing.assert_close(rotation_6d_to_matrix(x), R, atol=1e-6, rtol=0)


def test_6d_decoding_gives_rotations_keeping_the_first_column_direction():
    x = torch.randn(100, 6, generator=torch.Generator().manual_seed(14)) * 3
    R = rotation_6d_to_matrix(x)
    eye = torch.eye(3).expand(100, 3, 3)
    torch.testing.assert_close(R.transpose(-1, -2) @ R, eye, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.linalg.det(R), torch.ones(100), atol=1e-5, rtol=0)
    first = x[:, :3] / x[:, :3].norm(dim=-1, keepdim=True)
    torch.testing.assert_close(R[:, :, 0], first)
    # the second column lies in the plane of the two inputs
    normal = torch.cross(x[:, :3], x[:, 3:], dim=-1)
    assert ((R[:, :, 1] * normal).sum(-1).abs() < 1e-4 * normal.norm(dim=-1)).all()
