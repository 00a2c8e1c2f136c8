"""``rbmcap eval-capture``: a motion against the reference joint centres its capture carries.

Synthetic: a capture whose "Plug-in Gait" points are the true SMPL joints of a procedural walk,
so the truth is 0 mm away, a shifted truth exactly the shift, and the floor (SMPL fitted to the
points) near 0. Real: the shared Plug-in Gait walk (skipped where absent).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from helpers.shared import PIG

from rbmcap.cli.main import main
from rbmcap.errors import EXIT_DATA, EXIT_USAGE
from rbmcap.evaluation.reference import ReferenceMap, reference_points
from rbmcap.io.capture import Capture
from rbmcap.motion.procedural import generate
from rbmcap.skeleton import SMPL_JOINT_NAMES

FRAMES = 30
FLOOR_ITERATIONS = "150"


@pytest.fixture(scope="module")
def scene(standin, tmp_path_factory):
    """(folder, truth motion): ``capture.npz`` whose points are the truth's SMPL joints under
    the plug-in-gait names (no plates: none are needed), ``truth.npz``, ``shifted.npz`` (the
    truth 10 mm along x)."""
    folder = tmp_path_factory.mktemp("ref")
    m = generate("walk", seed=1, body=standin)
    truth = replace(m, poses=m.poses[:FRAMES], trans=m.trans[:FRAMES], name="truth")
    b = torch.as_tensor(truth.betas[: standin.num_betas], dtype=torch.float32)
    joints = standin.pose_joints(
        torch.as_tensor(truth.poses, dtype=torch.float32),
        b,
        torch.as_tensor(truth.trans, dtype=torch.float32),
    )[0]
    ref = ReferenceMap.load("plug-in-gait")
    points = joints[:, [SMPL_JOINT_NAMES.index(j) for j in ref.all_joints]].numpy()
    cap = Capture(
        fps=60.0,
        names=[],
        pos=np.zeros((FRAMES, 0, 3)),
        rot=np.zeros((FRAMES, 0, 3, 3)),
        valid=np.zeros((FRAMES, 0), bool),
        point_names=list(ref.all_joints.values()),
        points=points,
        point_valid=np.ones(points.shape[:2], bool),
    )
    cap.save(folder / "capture.npz")
    truth.save(folder / "truth.npz")
    replace(truth, trans=truth.trans + np.array([0.01, 0.0, 0.0])).save(folder / "shifted.npz")
    return folder, truth


def _report(capsys, *args) -> dict:
    assert main(["eval-capture", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_truth_is_at_the_reference_and_a_shift_is_measured(scene, capsys):
    folder, _ = scene
    exact = _report(capsys, folder / "truth.npz", folder / "capture.npz", "--no-floor")
    shifted = _report(capsys, folder / "shifted.npz", folder / "capture.npz", "--no-floor")
    assert set(exact["joints"]) == {
        "left_knee",
        "right_knee",
        "left_ankle",
        "right_ankle",
        "left_elbow",
        "right_elbow",
        "left_wrist",
        "right_wrist",
    }
    assert exact["joints"]["left_knee"]["point"] == "LFEO"
    assert exact["frames"] == FRAMES and exact["mean_mm"] < 1e-3
    assert all(j["frames"] == FRAMES and j["motion_mm"] < 1e-3 for j in exact["joints"].values())
    assert shifted["mean_mm"] == pytest.approx(10.0, abs=1e-2)
    assert all(j["motion_mm"] == pytest.approx(10.0, abs=1e-2) for j in shifted["joints"].values())
    for row in exact["segments"].values():
        assert row["ratio"] == pytest.approx(1.0, abs=1e-4) and 0.2 < row["reference_m"] < 0.5


def test_a_joint_counts_only_the_frames_where_its_reference_is_valid(scene, capsys):
    folder, _ = scene
    cap = Capture.load(folder / "capture.npz")
    k = cap.point_names.index("LTIO")
    cap.points[:10, k] += 0.5  # garbage where the point is not valid
    cap.point_valid[:10, k] = False
    cap.save(folder / "gappy.npz")
    report = _report(capsys, folder / "truth.npz", folder / "gappy.npz", "--no-floor")
    assert report["joints"]["left_ankle"]["frames"] == FRAMES - 10
    assert report["joints"]["left_ankle"]["motion_mm"] < 1e-3


def test_the_floor_on_smpl_joints_is_near_zero(scene, capsys):
    folder, _ = scene
    report = _report(
        capsys,
        folder / "shifted.npz",
        folder / "capture.npz",
        "--floor-iterations",
        FLOOR_ITERATIONS,
    )
    assert report["floor_mean_mm"] < 2.0, report
    assert report["floor"]["fit_mm"] < 2.0 and report["floor"]["iterations"] > 0
    assert report["mean_mm"] == pytest.approx(10.0, abs=1e-2)
    for row in report["segments"].values():  # the floor's body has the subject's proportions
        assert row["floor_m"] == pytest.approx(row["reference_m"], abs=0.005)


@pytest.mark.parametrize(
    "bad, status, message",
    [
        ("frames", EXIT_DATA, "not the same take"),
        ("no_points", EXIT_DATA, "no reference point LFEO, RFEO"),
        ("reference", EXIT_USAGE, "unknown reference 'nope'"),
    ],
)
def test_bad_inputs_are_one_line_and_a_non_zero_exit(scene, tmp_path, capsys, bad, status, message):
    folder, truth = scene
    motion, cap, extra = folder / "truth.npz", folder / "capture.npz", []
    if bad == "frames":
        motion = replace(truth, poses=truth.poses[:-1], trans=truth.trans[:-1]).save(
            tmp_path / "short.npz"
        )
    elif bad == "no_points":
        c = Capture.load(cap)
        cap = replace(c, point_names=None, points=None, point_valid=None).save(tmp_path / "c.npz")
    else:
        extra = ["--reference", "nope"]
    assert main(["eval-capture", str(motion), str(cap), *extra]) == status
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


@pytest.mark.skipif(
    not PIG.is_dir(), reason="the Plug-in Gait samples (../shared/data/pig) are absent"
)
def test_the_plug_in_gait_walk_carries_plausible_joint_centres():
    """The real walk: every reference point read, limb segments of human length, the hip centres
    below the pelvis's front markers, and SMPL fits the centres within a few millimetres."""
    from rbmcap.evaluation.floor import fit_joint_centres
    from rbmcap.evaluation.reference import joint_distances_mm, segment_lengths
    from rbmcap.io.c3d import read_c3d

    cap = read_c3d(PIG / "PiG_Motion-FlatFoot-One.c3d")
    ref = ReferenceMap.load("plug-in-gait")
    points, valid = reference_points(cap, ref.all_joints)
    assert points.shape == (255, 12, 3) and valid.mean() > 0.95
    index = {j: i for i, j in enumerate(ref.all_joints)}
    lengths = segment_lengths(points, valid, index, ref.segments)
    for side in ("left", "right"):
        assert 0.3 < lengths[f"{side}_thigh"] < 0.5 and 0.3 < lengths[f"{side}_shank"] < 0.5
        assert 0.2 < lengths[f"{side}_upper_arm"] < 0.4
        assert 0.15 < lengths[f"{side}_forearm"] < 0.35
    asis = [cap.points[:, cap.point_names.index(n)] for n in ("LASI", "RASI")]
    drop = (asis[0] + asis[1])[:, 2] / 2 - points[:, index["left_hip"], 2]
    assert 0.03 < np.median(drop) < 0.15  # hip centre some centimetres below the ASIS
    joints = [SMPL_JOINT_NAMES.index(j) for j in ref.all_joints]
    from rbmcap.body import load_body_model

    fit = fit_joint_centres(
        load_body_model("standin"), points[:60], valid[:60], joints, iterations=150
    )
    assert np.nanmean(joint_distances_mm(fit.joints, points[:60], valid[:60])) < 10.0
