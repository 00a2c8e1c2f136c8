"""The evaluation's clinical-angle metric: an answer equal to the truth scores zero, a knee bent
by a known angle scores that angle in the knee's flexion alone, an answer turned the wrong way
scores twice the angle, and frames of every sequence count once in the RMS."""

from __future__ import annotations

import json

import numpy as np
import pytest
import roma
import torch

from rbmcap.body import load_body_model
from rbmcap.cli.main import main
from rbmcap.evaluation.angles import (
    AngleErrors,
    angle_difference,
    motion_angles,
    saved_angle_errors,
)
from rbmcap.evaluation.results import MethodResult, Scorer
from rbmcap.evaluation.sequences import Sequence
from rbmcap.skeleton import SMPL_JOINT_NAMES

FACING_X = np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]])  # canonical Y up, Z forward -> Z up, +X
BETAS = np.array([1.0, -0.5, 0.3, 0, 0, 0, 0, 0, 0, 0])


@pytest.fixture(scope="module")
def body():
    return load_body_model("standin", gender="neutral")


def _walk(
    frames: int, degrees: float = 0.0, seed: int = 0, joint: str = "left_knee", axis: str = "x"
) -> dict[str, np.ndarray]:
    """A body walking 1 m along +X with small random rotations of every joint but ``joint``,
    which is turned by ``degrees`` about the body's canonical ``axis`` in every frame (the
    default: the left knee about x, the body's left axis: flexion)."""
    rng = np.random.default_rng(seed)
    rotmats = roma.rotvec_to_rotmat(torch.as_tensor(0.15 * rng.standard_normal((frames, 24, 3))))
    rotmats = rotmats.numpy()
    rotmats[:, 0] = FACING_X
    bend = roma.euler_to_rotmat(axis, [np.radians(degrees)]).numpy()
    rotmats[:, SMPL_JOINT_NAMES.index(joint)] = bend
    trans = np.stack([np.linspace(0, 1, frames), np.zeros(frames), np.full(frames, 0.9)], -1)
    poses = roma.rotmat_to_rotvec(torch.as_tensor(rotmats)).numpy()
    return {"poses": poses, "betas": BETAS, "trans": trans}


def _errors(body, pairs) -> AngleErrors:
    errors = AngleErrors()
    for answer, truth in pairs:
        errors.add(motion_angles(body, answer, 60.0), motion_angles(body, truth, 60.0))
    return errors


def test_an_answer_equal_to_the_truth_scores_zero_in_every_angle(body):
    truth = _walk(12)
    rms = _errors(body, [(truth, truth)]).rms()
    assert {"LHipAngles", "RKneeAngles", "LAnkleAngles", "RPelvisAngles", "LElbowAngles"} <= set(
        rms
    )
    for name, comps in rms.items():
        np.testing.assert_allclose(list(comps.values()), 0.0, atol=1e-6, err_msg=name)


def test_a_knee_bent_20_degrees_more_scores_20_in_its_flexion_alone(body):
    errors = _errors(body, [(_walk(12, degrees=20.0), _walk(12))])
    rms = errors.rms()
    assert rms["LKneeAngles"]["flexion"] == pytest.approx(20.0, abs=0.5)
    # the stand-in's knee rests in some 6° of adduction, so a bend about its own axis leaks
    # a little into the knee's other two components
    assert rms["LKneeAngles"]["adduction"] < 2.0
    assert rms["LKneeAngles"]["internal rotation"] < 2.0
    for name in ("RKneeAngles", "LHipAngles", "LAnkleAngles", "LPelvisAngles"):
        np.testing.assert_allclose(list(rms[name].values()), 0.0, atol=1e-6, err_msg=name)
    assert errors.worst()["sagittal"][1] in ("LKneeAngles", "LFootProgressAngles")
    assert not errors.meets_goal()


@pytest.mark.parametrize(
    ("joint", "axis", "degrees", "name", "component"),
    [
        ("left_knee", "x", 30.0, "LKneeAngles", "flexion"),  # the foot back
        ("left_hip", "z", -15.0, "LHipAngles", "adduction"),  # the foot toward the midline
        ("left_hip", "y", -20.0, "LHipAngles", "internal rotation"),  # the knee's front inward
    ],
)
def test_an_answer_turned_the_wrong_way_scores_twice_the_angle_and_the_right_one_zero(
    body, joint, axis, degrees, name, component
):
    truth = _walk(12, degrees, seed=4, joint=joint, axis=axis)
    right = _errors(body, [(_walk(12, degrees, seed=4, joint=joint, axis=axis), truth)])
    wrong = _errors(body, [(_walk(12, -degrees, seed=4, joint=joint, axis=axis), truth)])
    assert right.rms()[name][component] == pytest.approx(0.0, abs=1e-6)
    assert wrong.rms()[name][component] == pytest.approx(2 * abs(degrees), rel=0.1)
    assert right.meets_goal() and not wrong.meets_goal()


def test_every_frame_of_every_sequence_counts_once(body):
    bent = (_walk(10, degrees=20.0, seed=1), _walk(10, seed=1))
    straight = (_walk(30, seed=2), _walk(30, seed=2))
    rms = _errors(body, [bent, straight]).rms()
    # sqrt((10 frames × 20² + 30 × 0²) / 40 frames)
    assert rms["LKneeAngles"]["flexion"] == pytest.approx(10.0, abs=0.3)


def test_a_path_past_the_diagonal_turns_the_progression_unless_the_truths_is_shared(body):
    truth = _walk(12)
    answer = {**truth, "trans": truth["trans"][:, [1, 0, 2]] + [0.9, 0, 0]}  # 1 m along +Y
    answer["trans"][:, 0] = np.linspace(0, 0.9, 12)  # and 0.9 m along +X: snaps to +Y
    own = _errors(body, [(answer, truth)])
    assert own.rms()["LPelvisAngles"]["rotation (side forward)"] == pytest.approx(90.0, abs=0.5)
    shared = AngleErrors()
    at = motion_angles(body, truth, 60.0)
    shared.add(motion_angles(body, answer, 60.0, progression=at.progression), at)
    for name, comps in shared.rms().items():
        np.testing.assert_allclose(list(comps.values()), 0.0, atol=1e-6, err_msg=name)
    assert own.progression_differs == [""] and shared.progression_differs == []


def test_differences_are_wrapped_to_half_a_turn():
    np.testing.assert_allclose(angle_difference([179.0, -170.0], [-179.0, 170.0]), [-2.0, 20.0])


def test_the_scorer_records_angles_only_when_asked(body):
    truth = _walk(8)
    arrays = {**truth, "betas": np.tile(BETAS, (8, 1))}
    seq = Sequence("walk", arrays)
    answer = _walk(8, degrees=10.0)
    result = MethodResult("network", "network")
    Scorer(body, 60.0, vertices=False, angles=True).record_angles(result, seq, answer)
    assert result.angles.rms()["LKneeAngles"]["flexion"] == pytest.approx(10.0, abs=0.5)
    assert result.angles.to_dict()["progression_differs"] == []


def test_eval_with_angles_reports_them_per_method(checkpoint, tiny_dataset, tmp_path, capsys):
    out = tmp_path / "eval"
    args = ["eval", "--ckpt", str(checkpoint), "--data", str(tiny_dataset), "--max-frames", "30"]
    assert main([*args, "--no-vertices", "--angles", "--out", str(out), "--json"]) == 0
    angles = json.loads(capsys.readouterr().out)["methods"]["network"]["angles"]
    assert set(angles["rms_deg"]["LKneeAngles"]) == {"flexion", "adduction", "internal rotation"}
    assert all(v >= 0 for v in angles["rms_deg"]["RHipAngles"].values())
    assert "Clinical angles against the truth" in (out / "report.md").read_text()
    # the saved answers give the same figures again
    again = saved_angle_errors(out, load_body_model("standin", gender="neutral"))["network"]
    for name, comps in angles["rms_deg"].items():
        np.testing.assert_allclose(list(again.rms()[name].values()), list(comps.values()), 1e-6)
