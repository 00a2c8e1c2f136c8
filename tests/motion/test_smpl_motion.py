"""SMPLMotion: validation, slicing, resampling and AMASS-style storage."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest
import roma
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.errors import DataError
from rbmcap.geometry.rotations import rotation_between
from rbmcap.motion import SMPLMotion, read_motion


def constant_velocity_motion(fps: float, duration: float, seed: int = 0):
    """A motion whose every joint turns at a constant angular velocity (a geodesic, so slerp
    between samples is exact) while the root translates at a constant velocity; returns the
    motion and a function giving the exact rotations (T, 24, 3, 3) and trans at any times."""
    rng = np.random.default_rng(seed)
    base = roma.rotvec_to_rotmat(torch.from_numpy(rng.normal(0, 0.6, (24, 3))))
    omega = torch.from_numpy(rng.normal(0, 1.5, (24, 3)))  # rad/s, body frame
    start, velocity = rng.normal(0, 1, 3), rng.normal(0, 1, 3)

    def exact(times: np.ndarray):
        t = torch.from_numpy(times)[:, None, None]
        rot = base @ roma.rotvec_to_rotmat(omega * t)
        return rot.numpy(), start + velocity * times[:, None]

    times = np.arange(round(duration * fps)) / fps
    rot, trans = exact(times)
    poses = roma.rotmat_to_rotvec(torch.from_numpy(rot)).numpy()
    motion = SMPLMotion(poses=poses, trans=trans, betas=rng.normal(0, 1, 16), fps=fps, name="cv")
    return motion, exact


def test_resample_120_to_60_hz_matches_the_known_motion_within_1e6():
    motion, exact = constant_velocity_motion(120.0, 2.0)
    out = motion.resample(60.0)
    times = np.arange(out.num_frames) / 60.0
    rot, trans = exact(times)
    assert out.fps == 60.0
    assert out.num_frames == 120  # 0 .. 239/120 s at 60 Hz
    assert np.abs(out.rotmats() - rot).max() < 1e-6
    assert np.abs(out.trans - trans).max() < 1e-6


def test_resample_to_a_rate_that_does_not_divide_interpolates_exactly_between_frames():
    motion, exact = constant_velocity_motion(120.0, 1.5, seed=3)
    out = motion.resample(50.0)
    rot, trans = exact(np.arange(out.num_frames) / 50.0)
    assert np.abs(out.rotmats() - rot).max() < 1e-6
    assert np.abs(out.trans - trans).max() < 1e-6
    assert (out.num_frames - 1) / 50.0 <= (motion.num_frames - 1) / 120.0 + 1e-12


def test_save_and_load_round_trip_is_exact(tmp_path):
    motion, _ = constant_velocity_motion(30.0, 1.0)
    motion.gender = "female"
    motion.source = {"kind": "test", "seed": 3}
    path = motion.save(tmp_path / "a" / "seq_poses.npz")
    back = read_motion(path)
    assert np.array_equal(back.poses, motion.poses)
    assert np.array_equal(back.trans, motion.trans)
    assert np.array_equal(back.betas, motion.betas)
    assert (back.gender, back.fps, back.name) == ("female", 30.0, "cv")
    assert back.source["kind"] == "test" and back.source["seed"] == 3
    assert SMPLMotion.load(path).num_frames == motion.num_frames


def test_saved_file_is_amass_smplh_shaped(tmp_path):
    motion, _ = constant_velocity_motion(30.0, 0.5)
    with np.load(motion.save(tmp_path / "m.npz")) as data:
        assert data["poses"].shape == (motion.num_frames, 156)
        assert float(data["mocap_framerate"]) == 30.0
        # SMPL's hand joints sit at SMPL-H's first index-finger joints (22 and 37).
        full = data["poses"].reshape(-1, 52, 3)
        assert np.array_equal(full[:, 22], motion.poses[:, 22])
        assert np.array_equal(full[:, 37], motion.poses[:, 23])


def test_same_motion_saves_to_identical_bytes_without_timestamps(tmp_path):
    motion, _ = constant_velocity_motion(30.0, 0.5)
    a, b = motion.save(tmp_path / "a.npz"), motion.save(tmp_path / "b.npz")
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as zf:
        assert {info.date_time for info in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary file left behind


def test_a_failed_save_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    motion, _ = constant_velocity_motion(30.0, 0.5)
    target = motion.save(tmp_path / "m.npz")
    before = target.read_bytes()

    def half_written(fh, **arrays):
        fh.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", half_written)
    with pytest.raises(KeyboardInterrupt):
        motion.save(target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz"]


def test_slicing_keeps_frames_and_divides_fps_by_the_step():
    motion, _ = constant_velocity_motion(60.0, 1.0)
    part = motion[10:20]
    assert part.num_frames == 10 and part.fps == 60.0
    assert np.array_equal(part.poses, motion.poses[10:20])
    half = motion[::2]
    assert half.fps == 30.0 and np.array_equal(half.trans, motion.trans[::2])
    assert motion[-1].num_frames == 1
    assert motion.duration_s == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("poses", np.full((4, 24, 3), np.nan), "NaN"),
        ("poses", np.zeros((4, 23, 3)), "expected \\(T, 24, 3\\)"),
        ("trans", np.zeros((5, 3)), "expected \\(4, 3\\)"),
        ("fps", 0.0, "fps"),
        ("gender", "robot", "gender"),
    ],
)
def test_invalid_motion_raises_data_error(field, value, message):
    fields = {"poses": np.zeros((4, 24, 3)), "trans": np.zeros((4, 3)), field: value}
    with pytest.raises(DataError, match=message):
        SMPLMotion(**fields)


@settings(max_examples=25, deadline=None)
@given(fps=st.sampled_from([24.0, 30.0, 60.0, 100.0, 120.0]), seed=st.integers(0, 1000))
def test_resampling_keeps_the_first_frame_and_the_time_span(fps, seed):
    motion, _ = constant_velocity_motion(60.0, 0.5, seed=seed)
    out = motion.resample(fps)
    assert np.allclose(out.rotmats()[0], motion.rotmats()[0], atol=1e-9)
    assert np.allclose(out.trans[0], motion.trans[0])
    span_in = (motion.num_frames - 1) / motion.fps
    assert span_in - 1 / fps < (out.num_frames - 1) / fps <= span_in + 1e-9


@settings(max_examples=50, deadline=None)
@given(
    a=st.lists(st.floats(-1, 1), min_size=3, max_size=3).filter(lambda v: np.linalg.norm(v) > 0.1),
    b=st.lists(st.floats(-1, 1), min_size=3, max_size=3).filter(lambda v: np.linalg.norm(v) > 0.1),
)
def test_rotation_between_turns_one_direction_onto_the_other(a, b):
    a, b = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    rot = rotation_between(a, b)
    assert torch.allclose(rot @ rot.T, torch.eye(3, dtype=torch.float64), atol=1e-9)
    assert torch.allclose(rot @ (a / a.norm()), b / b.norm(), atol=1e-7)


def test_a_subject_s_joint_offsets_survive_the_file(tmp_path):
    d = np.zeros((24, 3))
    d[4] = [0.0, 0.015, 0.02]
    m = SMPLMotion(np.zeros((3, 24, 3)), np.zeros((3, 3)), joint_offsets=d)
    back = read_motion(m.save(tmp_path / "m.npz"))
    np.testing.assert_array_equal(back.joint_offsets, d)
    assert back[1:].joint_offsets is not None  # kept by slices
    assert read_motion(m.replace(joint_offsets=None).save(tmp_path / "n.npz")).joint_offsets is None
