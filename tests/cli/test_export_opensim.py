"""``rbmcap export opensim``: virtual markers under the Gait 2392 names and the motion's
coordinates, OpenSim's inverse kinematics with a model (its knees bent as the motion's), and one
error line with nothing written for a model that does not parse or a file that is not a motion."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.shared import SHARED_DATA

from rbmcap.cli.main import main
from rbmcap.io.opensim.files import read_mot
from rbmcap.io.opensim.markers import load_marker_map
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES

GENERIC = SHARED_DATA / "opensim" / "gait2392_thelen2003muscle.osim"


@pytest.fixture
def motion_file(tmp_path):
    rng = np.random.default_rng(1)
    poses = rng.normal(0.0, 0.1, (12, 24, 3))
    poses[:, 0] = [np.pi / 2, 0.0, 0.0]  # standing in the Z-up world, facing -y
    trans = np.zeros((12, 3))
    trans[:, 1] = -np.linspace(0.0, 0.3, 12)
    trans[:, 2] = 0.9
    return SMPLMotion(poses=poses, trans=trans, betas=np.zeros(10), fps=30.0).save(
        tmp_path / "walk.npz"
    )


def test_the_markers_and_coordinates_are_written_under_their_documented_names(
    motion_file, tmp_path, capsys
):
    assert main(["export", "opensim", str(motion_file), "--out", str(tmp_path / "os")]) == 0
    header = (tmp_path / "os" / "markers.trc").read_text().splitlines()[3].split()
    assert header[2:] == load_marker_map("gait2392").names
    names, values = read_mot(tmp_path / "os" / "coordinates.mot")
    assert names[:4] == ["time", "pelvis_tx", "pelvis_ty", "pelvis_tz"] and len(names) == 76
    assert values.shape == (12, 76) and np.allclose(values[:, 0], np.arange(12) / 30.0)
    assert 0.85 < values[:, 2].mean() < 0.95  # the pelvis's height is OpenSim's y


def test_inverse_kinematics_on_the_generic_gait_model_bends_the_knees_as_the_motion(
    tmp_path, capsys
):
    pytest.importorskip("opensim")
    if not GENERIC.is_file():
        pytest.skip(f"{GENERIC} is absent")
    flexion = np.linspace(0.0, 60.0, 6)  # degrees: the left knee bends as the right straightens
    poses = np.zeros((6, 24, 3))
    poses[:, 0] = [np.pi / 2, 0.0, 0.0]  # standing in the Z-up world, facing -y
    # about the body's left axis (SMPL's canonical x): the foot goes back
    poses[:, SMPL_JOINT_NAMES.index("left_knee"), 0] = np.radians(flexion)
    poses[:, SMPL_JOINT_NAMES.index("right_knee"), 0] = np.radians(flexion[::-1])
    trans = np.tile([0.0, 0.0, 0.9], (6, 1))
    motion = SMPLMotion(poses=poses, trans=trans, betas=np.zeros(10), fps=30.0)
    out = tmp_path / "os"
    args = ["export", "opensim", str(motion.save(tmp_path / "knees.npz")), "--out", str(out)]
    assert main([*args, "--model", str(GENERIC)]) == 0
    assert "marker_rms_mm" in capsys.readouterr().out
    names, values = read_mot(out / "ik.mot")
    assert len(values) == 6
    # Gait 2392's knee_angle is negative in flexion; the stand-in's straight knee, its hip, knee
    # and ankle centres not in line, reads some 5° of flexion, and the model is not scaled to it
    for name, posed in (("knee_angle_l", flexion), ("knee_angle_r", flexion[::-1])):
        knee = -values[:, names.index(name)]
        np.testing.assert_allclose(knee, posed, atol=10.0, err_msg=name)
        assert knee[-1] - knee[0] == pytest.approx(posed[-1] - posed[0], rel=0.1), name


def test_a_model_that_does_not_parse_is_one_line_and_leaves_no_file(motion_file, tmp_path, capsys):
    pytest.importorskip("opensim")
    bad = tmp_path / "gait.osim"
    bad.write_text("<OpenSimDocument><Model", encoding="utf-8")
    out = tmp_path / "os"
    code = main(["export", "opensim", str(motion_file), "--out", str(out), "--model", str(bad)])
    err = capsys.readouterr().err
    assert code == 3 and err.count("\n") == 1 and "not an OpenSim model" in err
    assert not out.exists() or not any(out.iterdir())


def test_a_file_that_is_not_a_motion_is_one_line_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "walk.npz"
    np.savez(bad, something=np.zeros(3))
    out = tmp_path / "os"
    assert main(["export", "opensim", str(bad), "--out", str(out)]) == 3
    assert capsys.readouterr().err.count("\n") == 1 and not out.exists()
