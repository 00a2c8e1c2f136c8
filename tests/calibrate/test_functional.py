"""Functional joint centres and axes: recovered from two plates' motion where it determines them,
from the prior where it does not, and said so.

The truth here is built without the code under test: two segments posed by rotations drawn with
scipy, a joint at a chosen point, plates at chosen places on each segment; and the stand-in body
posed through a range-of-motion take, its joints from the body model.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from rbmcap.calibrate.functional import (
    AXIS_RANGE_DEG,
    JointPair,
    adjacent_pairs,
    bone_axes,
    correlation_frames,
    fit_joint,
    in_frames,
    measure_joints,
    rest_plate_rotations,
)
from rbmcap.errors import ConfigError
from rbmcap.markers.markerset import load_marker_set

PAIR = JointPair("left_knee", "left_thigh", "left_shin")
CENTRE_A = np.array([0.03, -0.02, -0.21])  # the joint in the parent plate's frame, m
CENTRE_B = np.array([-0.01, 0.04, 0.18])  # and in the child plate's
AXIS_B = np.array([0.2, 0.9, -0.1]) / np.linalg.norm([0.2, 0.9, -0.1])  # the hinge, child frame


def _two_plates(flex_deg, off_deg, frames=200, noise_m=0.0, seed=0):
    """Parent and child plate poses of a joint at CENTRE_A / CENTRE_B: the parent wanders, the
    child turns about AXIS_B through ``flex_deg`` and ``off_deg`` about the other two axes."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, frames)
    ra = Rotation.from_rotvec(0.4 * np.stack([np.sin(t), np.cos(1.3 * t), np.sin(0.7 * t)], 1))
    pa = np.stack([0.5 * t, 0.1 * np.sin(t), 0.9 + 0.05 * np.cos(t)], 1)
    perp = np.linalg.svd(AXIS_B[None])[2][1:]  # two unit vectors across the axis
    turn = np.radians(flex_deg) * 0.5 * (1 - np.cos(t))[:, None] * AXIS_B
    turn += np.radians(off_deg) * (
        np.sin(2 * t)[:, None] * perp[0] + np.cos(3 * t)[:, None] * perp[1]
    )
    rb = ra * Rotation.from_rotvec(turn)  # child frame = parent frame, then the joint's turn
    joint = pa + ra.apply(CENTRE_A)
    pb = joint - rb.apply(CENTRE_B)
    pa = pa + rng.normal(scale=noise_m, size=pa.shape)
    pb = pb + rng.normal(scale=noise_m, size=pb.shape)
    return ra.as_matrix(), pa, rb.as_matrix(), pb, joint


def _axis_error_deg(fj) -> float:
    """Angle between the recovered axis and AXIS_B (either sign), in the child's frame."""
    return float(np.degrees(np.arccos(min(1.0, abs(float(fj.axis_child @ AXIS_B))))))


def test_a_ball_joint_turned_every_way_is_found_from_the_motion_alone():
    ra, pa, rb, pb, joint = _two_plates(flex_deg=70, off_deg=30, noise_m=0.0005)
    far = in_frames(joint + 0.04, ra, pa, rb, pb)  # a prior 69 mm off: the data must win
    fj = fit_joint(PAIR, ra, pa, rb, pb, prior=far)
    assert fj.from_prior == 0 and fj.centre_determined
    assert np.linalg.norm(fj.centre_parent - CENTRE_A) < 0.003
    assert np.linalg.norm(fj.centre_child - CENTRE_B) < 0.003
    assert fj.residual_mm < 2.0


def test_a_hinge_gives_its_axis_and_takes_the_centre_along_it_from_the_prior():
    ra, pa, rb, pb, joint = _two_plates(flex_deg=60, off_deg=0.0, noise_m=0.0005)
    axis_world = np.einsum("tij,j->ti", rb, AXIS_B)
    across = np.cross(axis_world, [0.0, 0.0, 1.0])
    across /= np.linalg.norm(across, axis=1, keepdims=True)
    # a prior 20 mm off along the axis and 20 mm off across it
    prior = in_frames(joint + 0.02 * axis_world + 0.02 * across, ra, pa, rb, pb)
    fj = fit_joint(PAIR, ra, pa, rb, pb, prior=prior)
    assert fj.hinge and fj.axis_determined
    assert _axis_error_deg(fj) < 1.0 and fj.axis_uncertainty_deg < 1.0
    assert fj.range_deg == pytest.approx(60.0, abs=1.0)
    assert fj.from_prior == 1  # the one direction along the axis
    ea, eb = fj.estimates(pa, ra, pb, rb)
    centre = 0.5 * (ea + eb)
    along = np.einsum("ti,ti->t", centre - joint, axis_world)
    off = centre - joint - along[:, None] * axis_world
    assert np.abs(along).mean() == pytest.approx(0.02, abs=0.002)  # the prior's, along the axis
    assert np.linalg.norm(off, axis=1).mean() < 0.002  # the motion's, across it
    assert "hinge" in fj.describe() and "1 of 6 directions from the body model" in fj.describe()


def test_too_little_motion_leaves_the_axis_undetermined_and_the_centre_to_the_prior():
    ra, pa, rb, pb, joint = _two_plates(flex_deg=6, off_deg=0.5, noise_m=0.001)
    prior = in_frames(joint + 0.01, ra, pa, rb, pb)
    fj = fit_joint(PAIR, ra, pa, rb, pb, prior=prior)
    assert not fj.axis_determined and not fj.centre_determined
    assert fj.range_deg < AXIS_RANGE_DEG and fj.axis_uncertainty_deg > 5.0
    assert np.linalg.norm(fj.centre_parent - prior[0]) < 0.01  # no worse than the prior
    assert "axis not determined" in fj.describe() and "turned 6°" in fj.describe()


@pytest.mark.parametrize("smooth", [False, True], ids=["white", "smooth"])
def test_too_little_motion_with_measured_noise_is_no_worse_than_the_prior(smooth):
    """6° of turn under 1 mm of error, white or persisting over about 40 frames, the noise
    measured: the turn places the centre to some mm, so the data may move it, but the axis stays
    flagged and the centre no farther from the joint than the prior was."""
    ra, pa, rb, pb, joint = _two_plates(flex_deg=6, off_deg=0.5)
    rng = np.random.default_rng(0)
    error = _ar1(39.0 / 41.0, len(pb), rng) if smooth else rng.normal(size=pb.shape)
    pb = pb + 0.001 * error
    prior = in_frames(joint + 0.01, ra, pa, rb, pb)
    fj = fit_joint(PAIR, ra, pa, rb, pb, prior=prior, noise="measured")
    assert not fj.axis_determined
    prior_off = np.linalg.norm(prior[0] - CENTRE_A)
    assert np.linalg.norm(fj.centre_parent - CENTRE_A) <= prior_off


def test_a_joint_seen_in_too_few_frames_is_not_measured():
    ra, pa, rb, pb, joint = _two_plates(flex_deg=60, off_deg=10, frames=200)
    prior = in_frames(joint, ra, pa, rb, pb)
    fj = fit_joint(PAIR, ra[:4], pa[:4], rb[:4], pb[:4], prior=prior)
    assert fj.from_prior == 6 and not fj.axis_determined
    np.testing.assert_allclose(fj.centre_parent, prior[0])
    assert "not measured" in fj.describe()


def _ar1(phi, frames, rng):
    """An AR(1) series (frames, 3) of unit variance: x_t = φ x_(t−1) + √(1−φ²) e_t, whose
    integrated autocorrelation time is (1 + φ) / (1 − φ) (a textbook result)."""
    out = np.empty((frames, 3))
    out[0] = rng.normal(size=3)
    shocks = rng.normal(size=(frames, 3)) * np.sqrt(1 - phi**2)
    for t in range(1, frames):
        out[t] = phi * out[t - 1] + shocks[t]
    return out


@pytest.mark.parametrize("phi", [0.0, 0.8, 0.95])
def test_the_correlation_time_of_a_residual_is_the_ar1_one(phi):
    expected = (1 + phi) / (1 - phi)
    rng = np.random.default_rng(1)
    got = np.median([correlation_frames(_ar1(phi, 20000, rng)) for _ in range(5)])
    assert got == pytest.approx(expected, rel=0.15)


def test_a_constant_residual_counts_as_one_frame_and_white_noise_as_every_frame():
    assert correlation_frames(np.tile([[0.001, 0.0, -0.002]], (300, 1))) == 300.0
    white = np.random.default_rng(2).normal(size=(3000, 3))
    assert correlation_frames(white) < 1.3


def test_errors_that_persist_over_frames_leave_the_centre_less_certain():
    """The noise measured, the same plates and noise size, once white and once smooth over about
    40 frames: the smooth take counts as about 40 times fewer frames, so its uncertainty is about
    √40 as large across the hinge; the shared rule (one error for the take) is wider still."""
    ra, pa, rb, pb, joint = _two_plates(flex_deg=60, off_deg=5, frames=2000)
    rng = np.random.default_rng(3)
    prior = in_frames(joint + 0.02, ra, pa, rb, pb)
    phi = 39.0 / 41.0  # (1 + φ) / (1 − φ) = 40
    found = {}
    for name, noise in (("white", rng.normal(size=(2000, 3))), ("smooth", _ar1(phi, 2000, rng))):
        found[name] = fit_joint(PAIR, ra, pa, rb, pb + 0.002 * noise, prior, noise="measured")
    ratio = found["smooth"].uncertainty_mm[:2] / found["white"].uncertainty_mm[:2]
    assert np.all((ratio > np.sqrt(40) / 2) & (ratio < np.sqrt(40) * 2)), ratio
    assert found["white"].from_prior <= found["smooth"].from_prior
    shared = fit_joint(PAIR, ra, pa, rb, pb + 0.002 * noise, prior)  # the smooth take
    assert np.all(shared.uncertainty_mm[:2] > found["smooth"].uncertainty_mm[:2])


def test_an_unknown_noise_rule_is_one_error():
    ra, pa, rb, pb, _ = _two_plates(flex_deg=60, off_deg=5, frames=50)
    with pytest.raises(ConfigError, match="joint noise 'white': expected one of shared, measured"):
        fit_joint(PAIR, ra, pa, rb, pb, noise="white")
    from rbmcap.calibrate import calibrate

    with pytest.raises(ConfigError, match="joint noise 'white'"):  # before any fitting
        calibrate([], None, joint_noise="white")


def test_the_stand_in_s_knees_and_elbows_come_out_where_the_body_has_them(standin):
    """Exact plates on the stand-in through a range-of-motion take: the knees and elbows (the
    joints whose plates sit on one bone each side) within 3 mm, their axes within 1.5°."""
    import roma
    import torch

    from rbmcap.markers.synth import Synthesizer
    from rbmcap.motion.procedural import generate
    from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

    motion = generate("explore", 0, fps=60.0, body=standin)[:400]
    synth = Synthesizer(standin, "rbm14")
    obs = synth(motion.poses, motion.trans, motion.betas, fps=60.0)
    names = list(synth.markers.names)
    with torch.no_grad():
        joints = (
            standin.forward(
                torch.as_tensor(motion.poses),
                torch.as_tensor(motion.betas),
                torch.as_tensor(motion.trans),
            )
            .joints[:, :24]
            .double()
            .numpy()
        )
    pairs = [p for p in adjacent_pairs(synth.markers) if p.joint.endswith(("knee", "elbow"))]
    rest = rest_plate_rotations(standin, "rbm14", motion.betas)
    found = measure_joints(obs.pos, obs.rot, obs.valid, names, pairs)
    local = roma.rotvec_to_rotmat(torch.as_tensor(motion.poses, dtype=torch.float64))
    for fj in found:
        j = SMPL_JOINT_NAMES.index(fj.joint)
        a = names.index(fj.parent)
        ea = obs.pos[:, a] + np.einsum("tij,j->ti", obs.rot[:, a], fj.centre_parent)
        assert np.linalg.norm(ea - joints[:, j], axis=1).mean() < 0.003, fj.describe()
        # the axis against the joint's own turning about its mean, in the parent bone's frame,
        # carried into the parent plate's frame
        lj = local[:, j]
        mean = roma.special_procrustes(lj.mean(0))
        turns = roma.rotmat_to_rotvec(lj @ mean.T).numpy()
        turns = turns - turns.mean(0)
        true_axis = np.linalg.eigh(turns.T @ turns)[1][:, -1]
        parent_bone = _global(local)[:, SMPL_PARENTS[j]]
        u, _, vt = np.linalg.svd(np.einsum("tji,tjk->ik", obs.rot[:, a], parent_bone))
        axis = (u @ vt) @ true_axis
        angle = np.degrees(np.arccos(min(1.0, abs(float(axis @ fj.axis_parent)))))
        assert angle < 1.5, (fj.joint, angle)
        # and carried into the parent bone's frame, where the joint's own rotation lives
        in_bone = bone_axes([fj], rest, np.tile(np.eye(3), (len(names), 1, 1)), names)[fj.joint]
        angle = np.degrees(np.arccos(min(1.0, abs(float(true_axis @ in_bone)))))
        assert angle < 2.0, (fj.joint, "in the bone", angle)


def _global(local):
    from rbmcap.skeleton import SMPL_PARENTS

    out = [local[:, 0]]
    for j in range(1, 24):
        out.append(out[SMPL_PARENTS[j]] @ local[:, j])
    return np.stack([o.numpy() for o in out], 1)


def test_rbm14_brackets_its_knees_ankles_elbows_and_wrists():
    pairs = adjacent_pairs(load_marker_set("rbm14"))
    assert {p.joint for p in pairs} == {
        f"{s}_{j}" for s in ("left", "right") for j in ("knee", "ankle", "elbow", "wrist")
    }
    assert JointPair("left_knee", "left_thigh", "left_shin") in pairs
    assert JointPair("right_wrist", "right_forearm", "right_hand") in pairs


def _calibration_with_joints(tmp_path):
    from rbmcap.calibrate import Calibration, PlateOffset

    ra, pa, rb, pb, joint = _two_plates(flex_deg=60, off_deg=3)
    fj = fit_joint(PAIR, ra, pa, rb, pb, prior=in_frames(joint + 0.01, ra, pa, rb, pb))
    plates = {n: PlateOffset(np.zeros(3), np.zeros(3)) for n in (PAIR.parent, PAIR.child)}
    calib = Calibration(np.zeros(10), [[0, 1]], np.zeros(3), np.zeros(3), plates)
    calib.joints = {fj.joint: fj}
    return calib, fj


def test_a_calibration_file_keeps_its_joints_and_an_older_file_has_none(tmp_path):
    from rbmcap.calibrate import Calibration

    calib, fj = _calibration_with_joints(tmp_path)
    path = calib.save(tmp_path / "calib.yaml")
    back = Calibration.load(path).joints[fj.joint]
    np.testing.assert_allclose(back.centre_parent, fj.centre_parent, atol=1e-6)
    np.testing.assert_allclose(back.axis_child, fj.axis_child, atol=1e-6)
    assert back.describe() == fj.describe()
    calib.joints = {}
    older = calib.save(tmp_path / "older.yaml")
    assert "joints" not in older.read_text() and Calibration.load(older).joints == {}


def test_a_joint_naming_a_plate_the_file_lacks_is_one_config_error(tmp_path):
    from rbmcap.calibrate import Calibration
    from rbmcap.errors import ConfigError

    calib, _ = _calibration_with_joints(tmp_path)
    path = calib.save(tmp_path / "calib.yaml")
    path.write_text(path.read_text().replace("child: left_shin", "child: left_shinn"))
    with pytest.raises(ConfigError, match=r"calib.yaml: joints.left_knee.child: 'left_shinn'"):
        Calibration.load(path)


def test_rbm15_s_pelvis_plate_brackets_the_hips_too():
    pairs = adjacent_pairs(load_marker_set("rbm15"))
    assert JointPair("left_hip", "pelvis", "left_thigh") in pairs
    assert JointPair("right_hip", "pelvis", "right_thigh") in pairs
    assert len(pairs) == 10


def test_a_joint_read_back_from_its_file_describes_itself_the_same(tmp_path):
    """An uncertainty of 4.649999 mm reads '±4.6 mm'; rounded to 4.65 on the way to the file
    it would read back '±4.7 mm'."""
    from dataclasses import replace

    from rbmcap.calibrate import Calibration

    calib, fj = _calibration_with_joints(tmp_path)
    fj = replace(fj, uncertainty_mm=np.array([1.0, 2.0, 4.649999]), from_prior=0)
    calib.joints = {fj.joint: fj}
    back = Calibration.load(calib.save(tmp_path / "calib.yaml")).joints[fj.joint]
    assert "±4.6 mm" in fj.describe() and back.describe() == fj.describe()


def test_the_file_keeps_each_joints_noise_rule_and_an_older_entry_reads_shared(tmp_path):
    import yaml

    from rbmcap.calibrate import Calibration

    calib, fj = _calibration_with_joints(tmp_path)
    ra, pa, rb, pb, joint = _two_plates(flex_deg=60, off_deg=3)
    measured = fit_joint(PAIR, ra, pa, rb, pb, in_frames(joint + 0.01, ra, pa, rb, pb), "measured")
    assert fj.noise == "shared" and measured.noise == "measured"
    calib.joints = {fj.joint: measured}
    path = calib.save(tmp_path / "calib.yaml")
    assert Calibration.load(path).joints[fj.joint].noise == "measured"
    data = yaml.safe_load(path.read_text())
    del data["joints"][fj.joint]["noise"]  # as written before the choice
    path.write_text(yaml.safe_dump(data))
    older = Calibration.load(path).joints[fj.joint]
    assert older.noise == "shared" and older.describe() == measured.describe()
    data["joints"][fj.joint]["noise"] = "white"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ConfigError, match=r"joints.left_knee.noise: expected one of shared, measured"
    ):
        Calibration.load(path)
