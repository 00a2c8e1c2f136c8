"""Foot skate and ground penetration, measured on the stand-in body."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.motion import SMPLMotion, foot_skate_mm, ground_penetration_mm, motion_info
from rbmcap.motion.kinematics import MotionKinematics

UPRIGHT = np.array([np.pi / 2, 0.0, 0.0])


@pytest.fixture(scope="module")
def kin(standin):
    return MotionKinematics(standin)


def standing(kin: MotionKinematics, frames: int = 12, step=(0.0, 0.0), drop: float = 0.0):
    """A body standing upright in the rest pose, its soles on the floor, sliding ``step``
    metres a frame and lowered by ``drop`` metres."""
    poses = np.zeros((frames, 24, 3))
    poses[:, 0] = UPRIGHT
    lowest, _ = kin.lowest_candidates(poses[:1])
    trans = np.zeros((frames, 3))
    trans[:, :2] = np.arange(frames)[:, None] * np.asarray(step)
    trans[:, 2] = -lowest[0] - drop
    return SMPLMotion(poses=poses, trans=trans, betas=np.zeros(10), fps=60.0, name="stand")


def test_a_body_standing_still_on_the_floor_neither_skates_nor_sinks(kin):
    motion = standing(kin)
    assert foot_skate_mm(motion, kin) == pytest.approx(0.0, abs=1e-9)
    assert ground_penetration_mm(motion, kin) == pytest.approx(0.0, abs=1e-3)


@settings(max_examples=8, deadline=None)
@given(vx=st.floats(-0.01, 0.01), vy=st.floats(-0.01, 0.01))
def test_skate_is_the_slide_per_frame_of_a_planted_foot(kin, vx, vy):
    motion = standing(kin, step=(vx, vy))
    assert foot_skate_mm(motion, kin) == pytest.approx(1000 * math.hypot(vx, vy), abs=1e-6)


def test_a_floating_foot_does_not_count_as_skating(kin):
    motion = standing(kin, step=(0.01, 0.0), drop=-0.2)  # 20 cm up in the air
    assert math.isnan(foot_skate_mm(motion, kin))


def test_penetration_is_the_mean_depth_of_the_lowest_point(kin):
    motion = standing(kin, drop=0.03)
    assert ground_penetration_mm(motion, kin) == pytest.approx(30.0, abs=1e-3)
    half = motion.replace(
        trans=motion.trans + np.array([0, 0, 0.03]) * (np.arange(12) % 2)[:, None]
    )
    assert ground_penetration_mm(half, kin) == pytest.approx(15.0, abs=1e-3)


def test_info_reports_the_documented_fields(kin):
    info = motion_info(standing(kin), body=kin.body)
    assert set(info) == {
        "name",
        "frames",
        "fps",
        "duration_s",
        "num_joints",
        "betas",
        "gender",
        "foot_skate_mm",
        "ground_penetration_mm",
    }
    assert info["frames"] == 12 and info["duration_s"] == pytest.approx(0.2)
    assert info["num_joints"] == 24 and len(info["betas"]) == 10


@pytest.mark.parametrize(("drop", "expected_mm"), [(-0.05, 0.0), (0.0, 0.0), (0.03, 30.0)])
def test_motion_info_cli_reports_the_depth_below_the_floor(
    kin, tmp_path, capsys, drop, expected_mm
):
    """``rbmcap motion info`` on a body lifted 5 cm, standing, and sunk 3 cm into the floor."""
    import json

    from rbmcap.cli.main import main

    path = standing(kin, drop=drop).save(tmp_path / "stand_poses.npz")
    capsys.readouterr()
    assert main(["motion", "info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["ground_penetration_mm"] == pytest.approx(expected_mm, abs=0.05)
