"""``rbmcap angles`` and ``rbmcap eval-capture --angles`` as a user runs them."""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import numpy as np
import pytest
from helpers.shared import PIG, require
from helpers.writers_c3d import write_c3d

from rbmcap.cli.main import main
from rbmcap.motion.procedural import generate


@pytest.fixture
def rbmcap(capsys):
    """``rbmcap(*args)``: the command run in this process; its status, stdout and stderr."""

    def run(*args):
        status = main([str(a) for a in args])
        out = capsys.readouterr()
        return SimpleNamespace(returncode=status, stdout=out.out, stderr=out.err)

    return run


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    path = tmp_path_factory.mktemp("walk") / "walk.npz"
    generate("walk", seed=3, fps=60.0).save(path)
    return path


def test_angles_writes_one_row_per_frame_and_the_events_beside(rbmcap, walk, tmp_path):
    out = tmp_path / "angles.csv"
    done = rbmcap("angles", walk, "--out", out, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == summary["frames"] > 100
    knee = np.array([float(r["LKneeAngles.flexion"]) for r in rows])
    assert 30 < knee.max() - knee.min() < 90  # a walk bends the knee
    assert summary["foot_strikes"] >= 2
    assert (tmp_path / "angles.events.csv").read_text().startswith("side,kind,frame,time_s")


def test_a_bad_convention_is_one_line_and_writes_nothing(rbmcap, walk, tmp_path):
    done = rbmcap("angles", walk, "--out", tmp_path / "a.csv", "--convention", "vicon")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "plug-in-gait, isb" in done.stderr
    assert not list(tmp_path.iterdir())


def test_a_motion_without_a_body_is_one_line(rbmcap, tmp_path):
    bare = tmp_path / "bare.npz"
    np.savez(bare, poses=np.zeros((3, 72)), trans=np.zeros((3, 3)), mocap_framerate=60.0)
    done = rbmcap("angles", bare, "--out", tmp_path / "a.csv")
    assert done.returncode != 0 and "missing betas" in done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert not (tmp_path / "a.csv").exists()


def test_eval_capture_angles_compares_a_walk_with_vicons_angles_and_draws_its_cycles(
    rbmcap, walk, tmp_path
):
    # the procedural walk is not the capture's: the figures are poor, the report complete
    png = tmp_path / "cycles.png"
    c3d = require(PIG) / "PiG_Motion-FlatFoot-One.c3d"
    done = rbmcap("eval-capture", walk, c3d, "--angles", "--png", png, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    names = {r["name"] for r in report["angles"]}
    assert {"LHipAngles", "RKneeAngles", "LAnkleAngles", "LPelvisAngles"} <= names
    assert report["events_from"] == "capture" and len(report["events"]) >= 8
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_landmarks_from_the_static_move_the_frames_to_the_subjects(rbmcap, walk, tmp_path):
    static = tmp_path / "static.npz"
    c3d = require(PIG) / "PiG_Calibration-FlatFoot-One.c3d"
    done = rbmcap("import", c3d, "--plates", "plug-in-gait", "--markers", "rbm14", "--out", static)
    assert done.returncode == 0, done.stderr
    standing = tmp_path / "standing.npz"
    done = rbmcap("infer", "--method", "solver", static, "--out", standing)
    assert done.returncode == 0, done.stderr
    plain, subject = tmp_path / "plain.csv", tmp_path / "subject.csv"
    assert rbmcap("angles", walk, "--out", plain).returncode == 0
    done = rbmcap(
        "angles", walk, "--out", subject, "--static", static, "--static-motion", standing, "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["landmarks"] == "static"
    a = np.array([float(r["LPelvisAngles.anterior tilt"]) for r in csv.DictReader(plain.open())])
    b = np.array([float(r["LPelvisAngles.anterior tilt"]) for r in csv.DictReader(subject.open())])
    assert np.abs(a - b).mean() > 1.0  # the subject's ASIS and PSIS are not the body's


def test_a_static_without_its_motion_is_one_clear_line(rbmcap, walk, tmp_path):
    done = rbmcap("angles", walk, "--out", tmp_path / "a.csv", "--static", walk)
    assert done.returncode == 2 and "both the static capture and its motion" in done.stderr
    assert not list(tmp_path.iterdir())


def test_a_c3d_without_angles_is_one_line_and_draws_nothing(rbmcap, walk, tmp_path):
    c3d = write_c3d(tmp_path / "m.c3d", ["LASI"], np.zeros((5, 1, 3)), np.ones((5, 1), bool))
    png = tmp_path / "cycles.png"
    done = rbmcap("eval-capture", walk, c3d, "--angles", "--png", png)
    assert done.returncode != 0 and "no joint angles" in done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert not png.exists()
