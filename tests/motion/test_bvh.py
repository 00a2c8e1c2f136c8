"""BVH parsing and writing, and retargeting a BVH skeleton onto SMPL."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch
import yaml
from helpers.motions import (
    CM,
    MIXAMO,
    PREFIX,
    TINY_BVH,
    rotmat_deg,
    smooth_random_motion,
    write_known_bvh,
)

from rbmcap.errors import ConfigError, FormatError
from rbmcap.motion import JointMap, parse_bvh, read_bvh, retarget_bvh
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.skeleton import SMPL_JOINT_NAMES


@pytest.fixture(scope="module")
def kin(standin):
    return MotionKinematics(standin)


@pytest.fixture
def mixamo_map(tmp_path):
    path = tmp_path / "mixamo.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "mixamo-test",
                "units_to_metres": 0.01,
                "up_axis": "y",
                "joints": {k: PREFIX + v for k, v in MIXAMO.items()},
            }
        )
    )
    return path


def test_parse_reads_hierarchy_channels_and_frames():
    bvh = parse_bvh(TINY_BVH)
    assert bvh.names == ["Hips", "Knee"] and bvh.parents == [-1, 0]
    assert bvh.num_frames == 2 and bvh.fps == pytest.approx(2.0)
    assert np.allclose(bvh.end_sites[1], [0, -10, 0])
    rot, pos = bvh.global_transforms()
    assert np.allclose(pos[0], [[1, 2, 3], [1, -8, 3]])
    # Frame 1: hips turned 90° about Z, so the knee (10 below) swings to +X.
    assert np.allclose(pos[1, 1], [10, 0, 0], atol=1e-9)
    # The knee's channels are Z X Y: R = Rz(0) Rx(90) Ry(0) relative to the hips.
    assert np.allclose(rot[1, 1], rotmat_deg("z", 90) @ rotmat_deg("x", 90), atol=1e-9)


def test_written_bvh_reads_back_the_same_skeleton_and_motion(tmp_path, kin):
    motion = smooth_random_motion(20)
    truth = write_known_bvh(tmp_path / "k.bvh", motion, kin, order="ZXY")
    bvh = read_bvh(tmp_path / "k.bvh")
    assert len(bvh.names) == 25 and bvh.channels[1] == ["Zrotation", "Xrotation", "Yrotation"]
    _, pos = bvh.global_transforms()
    idx = [bvh.index(PREFIX + MIXAMO[n]) for n in SMPL_JOINT_NAMES]
    world = pos[:, idx] / CM @ rotmat_deg("x", 90.0).T
    assert np.abs(world - truth).max() < 1e-4  # six decimals in the file


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            TINY_BVH.replace("OFFSET 0 -10 0\n    CHANNELS", "CHANNELS"),
            r"bad\.bvh:8:5: expected 'OFFSET', found 'CHANNELS'",
        ),
        (TINY_BVH.replace("Zrotation Xrotation", "Zrotation Wrotation"), "channel names"),
        (
            TINY_BVH.replace("0 0 0 90 0 0 0 90 0\n", "0 0 0 90\n"),
            r"bad\.bvh:20: frame 1 has 4 val",
        ),
        (TINY_BVH.replace("0 0 0 90 0 0 0 90 0\n", ""), "truncated motion data"),
        (TINY_BVH.replace("Frame Time: 0.5", "Frame Time: 0"), "expected a Frame Time between"),
        (TINY_BVH.replace("1 2 3", "1 x 3"), r"bad\.bvh:19:3: frame 0: non-numeric"),
        (TINY_BVH.split("MOTION")[0], "expected 'MOTION', found end of file"),
    ],
)
def test_malformed_bvh_raises_one_clear_format_error(text, message):
    with pytest.raises(FormatError, match=message):
        parse_bvh(text, "bad.bvh")


def test_retargeting_a_bvh_of_a_known_motion_recovers_its_joints_within_5mm(
    tmp_path, kin, mixamo_map
):
    motion = smooth_random_motion(60)
    truth = write_known_bvh(tmp_path / "known.bvh", motion, kin)
    out = retarget_bvh(read_bvh(tmp_path / "known.bvh"), mixamo_map, floor="bvh", body=kin.body)
    assert out.fps == pytest.approx(30.0) and out.num_frames == motion.num_frames
    joints, _ = kin.pose(out.poses, out.trans)
    error = np.linalg.norm(joints - truth, axis=-1)
    assert error.mean() < 0.005
    assert error.max() < 0.02
    assert out.source["translation_scale"] == pytest.approx(1.0)
    # Segment twist survives the arms-down rest pose too (it does not show in joint positions).
    _, rot = kin.pose(out.poses, out.trans)
    _, rot_truth = kin.pose(motion.poses, motion.trans)
    angle = roma.rotmat_geodesic_distance(torch.from_numpy(rot), torch.from_numpy(rot_truth))
    assert np.degrees(angle.max().item()) < 0.5


def test_unmapped_spine_joint_takes_half_the_bend_between_its_neighbours(tmp_path, kin, mixamo_map):
    motion = smooth_random_motion(30, seed=1)
    truth = write_known_bvh(tmp_path / "known.bvh", motion, kin)
    data = yaml.safe_load(mixamo_map.read_text())
    del data["joints"]["spine2"]
    jm = JointMap(name="no-spine2", joints=data["joints"], units_to_metres=0.01)
    out = retarget_bvh(read_bvh(tmp_path / "known.bvh"), jm, floor="bvh", body=kin.body)
    _, grot = kin.pose(out.poses, out.trans)
    g = torch.from_numpy(grot)
    below = roma.rotmat_geodesic_distance(g[:, 3], g[:, 6])  # spine1 → spine2
    above = roma.rotmat_geodesic_distance(g[:, 6], g[:, 9])  # spine2 → spine3
    assert torch.allclose(below, above, atol=1e-6)
    joints, _ = kin.pose(out.poses, out.trans)
    assert np.linalg.norm(joints - truth, axis=-1).mean() < 0.02


def test_bvh_whose_joints_the_map_does_not_cover_raises_format_error(tmp_path, kin):
    write_known_bvh(tmp_path / "mixamo.bvh", smooth_random_motion(5), kin)
    with pytest.raises(
        FormatError, match=r"mixamo\.bvh: joint map 'cmu' needs BVH joint\(s\) Hips"
    ):
        retarget_bvh(read_bvh(tmp_path / "mixamo.bvh"), "cmu")


def test_joint_map_errors_are_config_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("joints: {pelvis: Hips, tail: Tail}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: joints = \['tail'\]: unknown SMPL joint"):
        JointMap.load(bad)
    bad.write_text("joints: {left_hip: LeftUpLeg}\n")
    with pytest.raises(ConfigError, match="pelvis must be mapped"):
        JointMap.load(bad)
    with pytest.raises(ConfigError, match=r"missing\.yaml: joint map file not found"):
        JointMap.load(tmp_path / "missing.yaml")
    assert JointMap.load("cmu").units_to_metres == pytest.approx(0.056444)
