"""Numerical safety at the input boundaries: NaN, infinities, float32 overflow and
matrices that are not rotations are refused where arrays enter the library (a Capture, a capture
file, an AMASS file, an SMPLMotion), naming the file, the plate or sequence, and the frame; small
rounding in rotation matrices is corrected and the correction reported."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch

from rbmcap.errors import DataError
from rbmcap.geometry import ROTATION_TOLERANCE, orthonormalize
from rbmcap.io.capture import Capture
from rbmcap.motion.smpl_motion import SMPLMotion, read_motion

T, N = 6, 3
NAMES = ["head", "pelvis", "left_shin"]


def _plates(seed: int = 0):
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-1, 1, (T, N, 3))
    rot = roma.rotvec_to_rotmat(torch.from_numpy(rng.normal(size=(T, N, 3)))).numpy()
    return pos, rot, np.ones((T, N), bool)


def _capture(pos, rot, valid, **kw) -> Capture:
    return Capture(fps=100.0, names=NAMES, pos=pos, rot=rot, valid=valid, source="take.csv", **kw)


# ------------------------------------------------------------------------- NaN and overflow
def test_nan_position_at_a_valid_frame_names_the_plate_and_the_frame():
    pos, rot, valid = _plates()
    pos[4, 1, 2] = np.nan
    with pytest.raises(DataError, match=r"^take\.csv: plate 'pelvis', frame 4: position .*NaN"):
        _capture(pos, rot, valid)


def test_nan_rotation_at_a_valid_frame_names_the_plate_and_the_frame():
    pos, rot, valid = _plates()
    rot[2, 2, 1, 0] = np.inf
    with pytest.raises(DataError, match=r"^take\.csv: plate 'left_shin', frame 2: .*NaN or inf"):
        _capture(pos, rot, valid)


def test_nan_where_a_plate_is_missing_is_accepted_and_cleared():
    """Importers write NaN with valid False for an occluded plate: that is no error."""
    pos, rot, valid = _plates()
    pos[3, 0], rot[3, 0], valid[3, 0] = np.nan, np.nan, False
    cap = _capture(pos, rot, valid)
    assert (cap.pos[3, 0] == 0).all() and (cap.rot[3, 0] == np.eye(3)).all()
    assert np.isfinite(cap.pos).all() and np.isfinite(cap.rot).all()


def test_a_position_beyond_float32_is_refused_not_made_infinite():
    pos, rot, valid = _plates()
    pos[5, 0, 0] = 1e308
    with pytest.raises(DataError, match=r"plate 'head', frame 5: .*beyond float32's range"):
        _capture(pos, rot, valid)


def test_nan_point_at_a_valid_frame_names_the_point():
    pos, rot, valid = _plates()
    points = np.zeros((T, 2, 3))
    points[1, 1] = np.nan
    pv = np.ones((T, 2), bool)
    with pytest.raises(DataError, match=r"take\.csv: point 'M1', frame 1: position"):
        _capture(pos, rot, valid, point_names=["M0", "M1"], points=points, point_valid=pv)
    pv[1, 1] = False
    cap = _capture(pos, rot, valid, point_names=["M0", "M1"], points=points, point_valid=pv)
    assert np.isfinite(cap.points).all()


@pytest.mark.parametrize("fps", [0.0, -100.0, float("nan"), float("inf")])
def test_a_frame_rate_that_is_not_positive_and_finite_is_refused(fps):
    pos, rot, valid = _plates()
    with pytest.raises(DataError, match=r"take\.csv: frame rate"):
        Capture(fps=fps, names=NAMES, pos=pos, rot=rot, valid=valid, source="take.csv")


def test_a_capture_file_with_nan_names_the_file_plate_and_frame(tmp_path):
    pos, rot, valid = _plates()
    arrays = _capture(pos, rot, valid).to_npz_dict()
    arrays["pos"][2, 2, 0] = np.nan
    np.savez(tmp_path / "take.npz", **arrays)
    with pytest.raises(DataError, match=r"take\.npz: plate 'left_shin', frame 2: position"):
        Capture.load(tmp_path / "take.npz")


# ---------------------------------------------------------------------------------- rotations
def test_a_reflection_is_refused():
    pos, rot, valid = _plates()
    rot[3, 1, :, 2] *= -1
    with pytest.raises(DataError, match=r"plate 'pelvis', frame 3: not a rotation: determinant"):
        _capture(pos, rot, valid)


def test_a_matrix_scaled_by_one_percent_is_refused():
    pos, rot, valid = _plates()
    rot[1, 0] *= 1.01
    with pytest.raises(DataError, match=r"plate 'head', frame 1: not a rotation: singular"):
        _capture(pos, rot, valid)


def test_the_first_bad_frame_is_named():
    pos, rot, valid = _plates()
    rot[4, 0] *= 1.01
    rot[2, 2] *= 1.01
    with pytest.raises(DataError, match=r"plate 'left_shin', frame 2:"):
        _capture(pos, rot, valid)


def test_a_small_perturbation_is_corrected_and_the_deviation_reported():
    pos, rot, valid = _plates()
    noisy = rot + np.random.default_rng(3).normal(scale=1e-4, size=rot.shape)
    measured = float(np.abs(np.linalg.svd(noisy, compute_uv=False) - 1.0).max())
    assert 1e-5 < measured < ROTATION_TOLERANCE
    cap = _capture(pos, noisy, valid)
    assert cap.rotation_deviation == pytest.approx(measured, rel=1e-6)
    expected = roma.special_procrustes(torch.from_numpy(noisy)).numpy()
    np.testing.assert_allclose(cap.rot, expected, atol=2e-7)
    # the correction made is kept when the capture is cut or its plates selected
    assert cap.select(["pelvis", "head"]).frames(0, 3).rotation_deviation == cap.rotation_deviation


def test_rotations_written_with_six_decimals_pass():
    pos, rot, valid = _plates()
    cap = _capture(pos, np.round(rot.astype(np.float32), 6), valid)
    assert 0 < cap.rotation_deviation < 1e-5


def test_orthonormalize_matches_the_nearest_rotation_and_ignores_invalid_entries():
    rng = np.random.default_rng(4)
    rot = roma.random_rotmat(500, dtype=torch.float64).numpy()
    noisy = rot + rng.normal(scale=2e-4, size=rot.shape)
    valid = rng.random(500) > 0.2
    noisy[~valid] = np.nan
    out, dev = orthonormalize(noisy, valid)
    ref = roma.special_procrustes(torch.from_numpy(noisy[valid])).numpy()
    np.testing.assert_allclose(out[valid], ref, atol=1e-12)
    assert (out[~valid] == np.eye(3)).all()
    sigma = np.linalg.svd(noisy[valid], compute_uv=False)
    assert dev == pytest.approx(float(np.abs(sigma - 1).max()), rel=1e-9)


# ------------------------------------------------------------------------------ motion files
def test_amass_nan_names_the_file_the_sequence_and_the_frame(tmp_path):
    rng = np.random.default_rng(5)
    motion = SMPLMotion(poses=rng.normal(size=(T, 24, 3)), trans=np.zeros((T, 3)), name="walk")
    arrays = motion.to_npz_dict()
    arrays["trans"][4, 1] = np.inf
    np.savez(tmp_path / "walk_poses.npz", **arrays)
    with pytest.raises(DataError, match=r"walk_poses\.npz: sequence 'walk', frame 4: trans .*axis"):
        read_motion(tmp_path / "walk_poses.npz")


def test_smpl_motion_nan_names_the_sequence_frame_and_joint():
    poses = np.zeros((T, 24, 3))
    poses[2, 5, 0] = np.nan
    with pytest.raises(DataError, match=r"^sequence 'kick', frame 2: poses .*\(joint 5\)"):
        SMPLMotion(poses=poses, trans=np.zeros((T, 3)), name="kick")
