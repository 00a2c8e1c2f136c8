"""rbmcap.geometry: rotations between vectors, slerp, rigid registration and kinematic trees."""

from __future__ import annotations

import math

import pytest
import roma
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.geometry import (
    forward_kinematics,
    global_to_local,
    local_to_global,
    points_rotation,
    rigid_registration,
    rotation_between,
    rotmat_geodesic_angle,
    rotmat_slerp,
    unitquat_slerp,
)
from rbmcap.skeleton import SMPL_PARENTS

F64 = torch.float64
vectors = st.lists(st.floats(-10.0, 10.0), min_size=3, max_size=3).filter(
    lambda v: math.dist(v, (0.0, 0.0, 0.0)) > 1e-3
)


def _assert_rotation(r: torch.Tensor, atol: float = 1e-9) -> None:
    eye = torch.eye(3, dtype=r.dtype).expand_as(r)
    assert torch.allclose(r.transpose(-1, -2) @ r, eye, atol=atol)
    assert torch.allclose(torch.det(r), torch.ones(r.shape[:-2], dtype=r.dtype), atol=atol)


def _assert_turns(r: torch.Tensor, u: torch.Tensor, v: torch.Tensor, atol: float = 1e-9) -> None:
    """r is a rotation and r û = v̂."""
    _assert_rotation(r, atol)
    u_hat = u / u.norm(dim=-1, keepdim=True)
    v_hat = v / v.norm(dim=-1, keepdim=True)
    assert torch.allclose((r @ u_hat[..., None])[..., 0], v_hat, atol=atol)


# ------------------------------------------------------------------------- rotation_between
@settings(max_examples=50, deadline=None)
@given(u=vectors, v=vectors)
def test_rotation_between_turns_u_onto_v(u, v):
    u, v = torch.tensor(u, dtype=F64), torch.tensor(v, dtype=F64)
    if torch.linalg.cross(u, v).norm() < 1e-6 * u.norm() * v.norm():
        return  # (anti)parallel pairs have their own tests
    r = rotation_between(u, v)
    _assert_turns(r, u, v, atol=1e-9)
    # the smallest such rotation: its angle is the angle between the vectors, about u × v
    angle = torch.atan2(torch.linalg.cross(u, v).norm(), u @ v)
    assert float(roma.rotmat_to_rotvec(r).norm()) == pytest.approx(float(angle), abs=1e-9)


@settings(max_examples=50, deadline=None)
@given(u=vectors, scale=st.floats(0.01, 100.0))
def test_rotation_between_opposite_vectors_is_a_half_turn(u, scale):
    u = torch.tensor(u, dtype=F64)
    r = rotation_between(u, -scale * u)
    _assert_turns(r, u, -u, atol=1e-9)
    assert float(rotmat_geodesic_angle(r, torch.eye(3, dtype=F64))) == pytest.approx(math.pi)


def test_rotation_between_opposite_coordinate_axes_and_parallel_vectors():
    axes = torch.eye(3, dtype=F64)
    for u in torch.cat([axes, -axes]):
        _assert_turns(rotation_between(u, -u), u, -u)
        assert torch.allclose(rotation_between(u, 3.0 * u), torch.eye(3, dtype=F64), atol=1e-12)


def test_rotation_between_is_batched_and_float32_safe():
    gen = torch.Generator().manual_seed(0)
    u = torch.randn(4, 5, 3, generator=gen)
    v = torch.randn(4, 5, 3, generator=gen)
    v[0, 0] = -u[0, 0]  # one antiparallel pair in the batch
    v[1, 1] = u[1, 1]  # and one parallel pair
    r = rotation_between(u, v)
    assert r.shape == (4, 5, 3, 3) and r.dtype == torch.float32
    _assert_turns(r, u, v, atol=1e-5)


# ------------------------------------------------------------------------------------ slerp
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), w=st.floats(0.0, 1.0))
def test_slerp_ends_and_splits_the_angle(seed, w):
    gen = torch.Generator().manual_seed(seed)
    r0, r1 = roma.random_rotmat(2, generator=gen, dtype=F64)
    total = rotmat_geodesic_angle(r0, r1)
    assert torch.allclose(rotmat_slerp(r0, r1, 0.0), r0, atol=1e-9)
    assert torch.allclose(rotmat_slerp(r0, r1, 1.0), r1, atol=1e-9)
    mid = rotmat_slerp(r0, r1, w)
    _assert_rotation(mid)
    # on the geodesic: w of the way from r0, 1 − w of the way to r1
    assert float(rotmat_geodesic_angle(r0, mid)) == pytest.approx(w * float(total), abs=1e-9)
    assert float(rotmat_geodesic_angle(mid, r1)) == pytest.approx((1 - w) * float(total), abs=1e-9)


def test_slerp_midpoint_of_a_known_turn():
    r0 = torch.eye(3, dtype=F64)
    r1 = roma.rotvec_to_rotmat(torch.tensor([0.0, 0.0, 2.0], dtype=F64))
    half = roma.rotvec_to_rotmat(torch.tensor([0.0, 0.0, 1.0], dtype=F64))
    assert torch.allclose(rotmat_slerp(r0, r1, 0.5), half, atol=1e-12)


def test_quaternion_slerp_takes_each_pair_by_its_own_weight_along_the_shortest_arc():
    gen = torch.Generator().manual_seed(1)
    q0 = roma.random_unitquat(6, generator=gen, dtype=F64)
    q1 = roma.random_unitquat(6, generator=gen, dtype=F64)
    w = torch.linspace(0.0, 1.0, 6, dtype=F64)
    q = unitquat_slerp(q0, -q1, w)  # the sign of q1 must not matter
    expected = torch.stack(
        [roma.unitquat_slerp(q0[i], q1[i], w[i : i + 1], shortest_arc=True)[0] for i in range(6)]
    )
    assert torch.allclose(roma.unitquat_to_rotmat(q), roma.unitquat_to_rotmat(expected), atol=1e-9)


# ------------------------------------------------------------------------------ registration
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_weighted_kabsch_recovers_a_known_rigid_motion(seed):
    gen = torch.Generator().manual_seed(seed)
    rot = roma.random_rotmat(generator=gen, dtype=F64)
    t = torch.randn(3, generator=gen, dtype=F64)
    x = torch.randn(8, 3, generator=gen, dtype=F64)
    y = x @ rot.T + t
    y[0] += 5.0  # an outlier that carries no weight
    w = torch.rand(8, generator=gen, dtype=F64) + 0.1
    w[0] = 0.0
    r_fit, t_fit = rigid_registration(x, y, w)
    assert torch.allclose(r_fit, rot, atol=1e-9) and torch.allclose(t_fit, t, atol=1e-9)
    # the same outlier with weight spoils an unweighted fit
    r_all, _ = rigid_registration(x, y)
    assert float(rotmat_geodesic_angle(r_all, rot)) > 1e-3


def test_points_rotation_broadcasts_rest_points_and_says_when_it_is_determined():
    gen = torch.Generator().manual_seed(2)
    rot = roma.random_rotmat(4, generator=gen, dtype=F64)
    rest = torch.randn(5, 3, generator=gen, dtype=F64)
    obs = rest @ rot.transpose(-1, -2) + 0.3
    weights = torch.ones(4, 5, dtype=F64)
    weights[3, 2:] = 0.0  # frame 3 sees two points only
    fit, ok = points_rotation(rest, obs, weights)
    assert ok.tolist() == [True, True, True, False]
    assert torch.allclose(fit[:3], rot[:3], atol=1e-9)
    _assert_rotation(fit)


# --------------------------------------------------------------------------- kinematic tree
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_global_and_local_rotations_round_trip(seed):
    gen = torch.Generator().manual_seed(seed)
    local = roma.random_rotmat((2, 24), generator=gen, dtype=F64)
    glob = local_to_global(local)
    assert torch.allclose(global_to_local(glob), local, atol=1e-10)
    # a child's global rotation is its parent's times its local one
    for j in (4, 15, 21):
        assert torch.allclose(glob[:, j], glob[:, SMPL_PARENTS[j]] @ local[:, j], atol=1e-12)


def test_forward_kinematics_of_a_known_pose():
    gen = torch.Generator().manual_seed(4)
    rest = torch.randn(24, 3, generator=gen, dtype=F64)
    local = torch.eye(3, dtype=F64).repeat(24, 1, 1)
    quarter = roma.rotvec_to_rotmat(torch.tensor([0.0, 0.0, math.pi / 2], dtype=F64))
    local[0] = quarter  # the whole body turns about the pelvis
    local[4] = quarter  # and the left knee turns the shin and foot once more
    glob, joints = forward_kinematics(local, rest)
    expected = rest[0] + (rest - rest[0]) @ quarter.T
    below_knee = [7, 10]
    half_turn = quarter @ quarter
    expected[below_knee] = expected[4] + (rest[below_knee] - rest[4]) @ half_turn.T
    assert torch.allclose(joints, expected, atol=1e-12)
    assert torch.allclose(glob[10], half_turn, atol=1e-12)
    assert torch.allclose(glob[3], quarter, atol=1e-12)
