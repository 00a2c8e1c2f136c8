"""A subject's joint correction: a stand-in "subject" whose left knee and right elbow sit away
from where the body model's regressor puts them, tracked by exact plates, gives those offsets
back, and the joints it did not move stay where they were.

The truth is the offset the subject was built with (:meth:`BodyModel.with_joint_offsets`); the
prior the measurement leans on is the uncorrected body's joints, as a calibration's fit gives.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from rbmcap.calibrate.calibration import Calibration, PlateOffsets, from_dict, to_physical
from rbmcap.calibrate.functional import adjacent_pairs, in_frames, measure_joints
from rbmcap.calibrate.joint_correction import joint_correction
from rbmcap.errors import ConfigError
from rbmcap.markers.synth import Synthesizer
from rbmcap.motion.procedural import generate
from rbmcap.skeleton import SMPL_JOINT_NAMES

KNEE, ELBOW = SMPL_JOINT_NAMES.index("left_knee"), SMPL_JOINT_NAMES.index("right_elbow")


def _truth() -> np.ndarray:
    d = np.zeros((24, 3))
    d[KNEE] = [0.0, 0.015, 0.02]  # up and forward: across the knee's flexion axis
    d[ELBOW] = [0.0, -0.012, 0.015]
    return d


@pytest.fixture(scope="module")
def measured(standin):
    """The knees and elbows measured on a range-of-motion take of the corrected subject, its
    plates strapped on 3 cm and 20° off their virtual places."""
    subject = standin.with_joint_offsets(_truth())
    motion = generate("explore", 0, fps=60.0, body=standin)[:400]
    synth = Synthesizer(subject, "rbm14")
    obs = synth(motion.poses, motion.trans, motion.betas, fps=60.0)
    names = list(synth.markers.names)
    rng = np.random.default_rng(3)
    axes = rng.normal(size=(len(names), 3))
    r_off = Rotation.from_rotvec(np.radians(20) * axes / np.linalg.norm(axes, axis=1)[:, None])
    t_off = 0.03 * rng.normal(size=(len(names), 3)) / np.sqrt(3)
    obs.pos, obs.rot = to_physical(obs.pos, obs.rot, r_off.as_matrix(), t_off)
    with torch.no_grad():
        body_joints = (
            standin.pose_joints(
                torch.as_tensor(motion.poses),
                torch.as_tensor(motion.betas),
                torch.as_tensor(motion.trans),
            )[0]
            .double()
            .numpy()
        )
    pairs = [p for p in adjacent_pairs(synth.markers) if p.joint.endswith(("knee", "elbow"))]
    priors = {}
    for p in pairs:
        a, b = names.index(p.parent), names.index(p.child)
        j = SMPL_JOINT_NAMES.index(p.joint)
        priors[p.joint] = in_frames(
            body_joints[:, j], obs.rot[:, a], obs.pos[:, a], obs.rot[:, b], obs.pos[:, b]
        )
    found = measure_joints(obs.pos, obs.rot, obs.valid, names, pairs, priors)
    exact = PlateOffsets(tuple(names), r_off.as_matrix(), t_off)
    return found, motion.betas, exact


def test_the_offsets_a_subject_was_built_with_come_back(standin, measured):
    found, betas, exact = measured
    d = joint_correction(found, standin, "rbm14", betas, exact)
    truth = _truth()
    for j in ("left_knee", "right_knee", "left_elbow", "right_elbow"):
        k = SMPL_JOINT_NAMES.index(j)
        assert np.linalg.norm(d[k] - truth[k]) < 0.003, (j, d[k], truth[k])
    assert not d[[k for k in range(24) if k not in (4, 5, 18, 19)]].any()


def test_a_joint_the_take_did_not_measure_keeps_the_regressor_s_place(standin, measured):
    found, betas, exact = measured
    for fj in found:
        fj.frames = 3  # as a take with the plates seen together in three frames
    assert not joint_correction(found, standin, "rbm14", betas, exact).any()


def test_the_correction_is_kept_in_the_calibration_file(tmp_path):
    calib = Calibration(np.zeros(10), [[0]], np.zeros(3), np.zeros(3))
    calib.joint_offsets = {"left_knee": np.array([0.001, 0.015, 0.02])}
    back = Calibration.load(calib.save(tmp_path / "calib.yaml"))
    assert np.allclose(back.joint_offset_array()[KNEE], [0.001, 0.015, 0.02])
    assert back.joint_offset_array()[[k for k in range(24) if k != KNEE]].sum() == 0
    older = {k: v for k, v in calib.to_dict().items() if k != "joint_offsets"}
    assert from_dict(older).joint_offset_array() is None  # a file from before: the regressor's


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"left_kne": [0, 0, 0]}, "'left_kne' is not an SMPL joint name"),
        ({"left_knee": [0, 0]}, r"joint_offsets.left_knee: expected 3 finite numbers"),
        ({"left_knee": [0, 0, 0.5]}, r"joint_offsets.left_knee: expected 3 finite numbers"),
    ],
)
def test_a_bad_correction_is_one_clear_error(value, message):
    data = Calibration(np.zeros(10), [[0]], np.zeros(3), np.zeros(3)).to_dict()
    data["joint_offsets"] = value
    with pytest.raises(ConfigError, match=message):
        from_dict(data, "calib.yaml")
