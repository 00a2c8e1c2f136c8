"""BVH parsing and writing, and retargeting a BVH skeleton onto SMPL."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch
import yaml
from scipy.interpolate import PchipInterpolator

from rbmcap.errors import ConfigError, FormatError
from rbmcap.motion import JointMap, SMPLMotion, parse_bvh, read_bvh, retarget_bvh, write_bvh
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.motion.limits import JointLimits
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

TINY = """HIERARCHY
ROOT Hips
{
  OFFSET 0 0 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
  JOINT Knee
  {
    OFFSET 0 -10 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 -10 0
    }
  }
}
MOTION
Frames: 2
Frame Time: 0.5
1 2 3 0 0 0 0 0 0
0 0 0 90 0 0 0 90 0
"""

MIXAMO = {
    "pelvis": "Hips",
    "left_hip": "LeftUpLeg",
    "right_hip": "RightUpLeg",
    "spine1": "Spine",
    "left_knee": "LeftLeg",
    "right_knee": "RightLeg",
    "spine2": "Spine1",
    "left_ankle": "LeftFoot",
    "right_ankle": "RightFoot",
    "spine3": "Spine2",
    "left_foot": "LeftToeBase",
    "right_foot": "RightToeBase",
    "neck": "Neck",
    "left_collar": "LeftShoulder",
    "right_collar": "RightShoulder",
    "head": "Head",
    "left_shoulder": "LeftArm",
    "right_shoulder": "RightArm",
    "left_elbow": "LeftForeArm",
    "right_elbow": "RightForeArm",
    "left_wrist": "LeftHand",
    "right_wrist": "RightHand",
    "left_hand": "LeftHandIndex1",
    "right_hand": "RightHandIndex1",
}
PREFIX = "mixamorig:"
CM = 100.0


def _rot(axis: str, deg: float) -> np.ndarray:
    return roma.euler_to_rotmat(axis, [np.radians(deg)]).double().numpy()


def smooth_random_motion(num_frames: int = 60, fps: float = 30.0, seed: int = 0) -> SMPLMotion:
    """Every joint wanders smoothly inside half its limit box; the root turns and travels."""
    rng = np.random.default_rng(seed)
    lo, hi = JointLimits.load().sample_box(0.5)
    keys_t = np.linspace(0, num_frames - 1, 5)
    keys = rng.uniform(lo, hi, (5, 24, 3))
    poses = PchipInterpolator(keys_t, keys, axis=0)(np.arange(num_frames))
    yaw = np.linspace(0, rng.uniform(-2, 2), num_frames)
    root = torch.from_numpy(np.stack([_rot("z", np.degrees(y)) for y in yaw]))
    poses[:, 0] = roma.rotmat_to_rotvec(root @ torch.from_numpy(_rot("x", 90.0))).numpy()
    trans = np.stack(
        [
            np.linspace(0, 1.5, num_frames),
            np.zeros(num_frames),
            0.95 + 0.02 * np.sin(np.arange(num_frames) / 5),
        ],
        1,
    )
    return SMPLMotion(poses=poses, trans=trans, betas=np.zeros(10), fps=fps, name="smooth")


def write_known_bvh(path, motion: SMPLMotion, kin: MotionKinematics, order: str = "YXZ"):
    """The SMPL motion as a BVH with Mixamo-like names, centimetres, a skeleton facing +X (not
    +Z) with its arms hanging down in the rest pose, an extra unmapped head-top joint, and
    ``order`` Euler channels. Returns the SMPL joint positions (T, 24, 3) it encodes."""
    rest = kin.rest_joints
    joints, grot = kin.pose(motion.poses, motion.trans)
    face_x = _rot("y", 90.0)
    align = np.stack([face_x] * 24)
    bvh_rest = rest.copy()
    for side, down in (("left", -90.0), ("right", 90.0)):
        chain = [
            SMPL_JOINT_NAMES.index(f"{side}_{n}") for n in ("shoulder", "elbow", "wrist", "hand")
        ]
        pivot = rest[chain[0]]
        bvh_rest[chain] = pivot + (rest[chain] - pivot) @ _rot("z", down).T
        align[chain] = face_x @ _rot("z", down)
    bvh_rest = bvh_rest @ face_x.T
    world_from_bvh = _rot("x", 90.0)  # Y-up file world → rbmcap's Z-up world
    bvh_global = world_from_bvh.T @ grot @ align.transpose(0, 2, 1)
    parents = [*list(SMPL_PARENTS), SMPL_JOINT_NAMES.index("head")]
    head_top = bvh_global[:, 15]
    bvh_global = np.concatenate([bvh_global, head_top[:, None]], axis=1)
    local = bvh_global.copy()
    for j, p in enumerate(parents):
        if p >= 0:
            local[:, j] = bvh_global[:, p].transpose(0, 2, 1) @ bvh_global[:, j]
    offsets = np.zeros((25, 3))
    for j, p in enumerate(parents[:24]):
        if p >= 0:
            offsets[j] = (bvh_rest[j] - bvh_rest[p]) * CM
    offsets[24] = np.array([0.0, 12.0, 0.0])
    names = [PREFIX + MIXAMO[n] for n in SMPL_JOINT_NAMES] + [PREFIX + "HeadTop_End"]
    root = joints[:, 0] @ world_from_bvh * CM  # (world_from_bvh.T @ p) for each row
    write_bvh(path, names, parents, offsets, local, root, 1.0 / motion.fps, order=order)
    return joints


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
    bvh = parse_bvh(TINY)
    assert bvh.names == ["Hips", "Knee"] and bvh.parents == [-1, 0]
    assert bvh.num_frames == 2 and bvh.fps == pytest.approx(2.0)
    assert np.allclose(bvh.end_sites[1], [0, -10, 0])
    rot, pos = bvh.global_transforms()
    assert np.allclose(pos[0], [[1, 2, 3], [1, -8, 3]])
    # Frame 1: hips turned 90° about Z, so the knee (10 below) swings to +X.
    assert np.allclose(pos[1, 1], [10, 0, 0], atol=1e-9)
    # The knee's channels are Z X Y: R = Rz(0) Rx(90) Ry(0) relative to the hips.
    assert np.allclose(rot[1, 1], _rot("z", 90) @ _rot("x", 90), atol=1e-9)


def test_written_bvh_reads_back_the_same_skeleton_and_motion(tmp_path, kin):
    motion = smooth_random_motion(20)
    truth = write_known_bvh(tmp_path / "k.bvh", motion, kin, order="ZXY")
    bvh = read_bvh(tmp_path / "k.bvh")
    assert len(bvh.names) == 25 and bvh.channels[1] == ["Zrotation", "Xrotation", "Yrotation"]
    _, pos = bvh.global_transforms()
    idx = [bvh.index(PREFIX + MIXAMO[n]) for n in SMPL_JOINT_NAMES]
    world = pos[:, idx] / CM @ _rot("x", 90.0).T
    assert np.abs(world - truth).max() < 1e-4  # six decimals in the file


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            TINY.replace("OFFSET 0 -10 0\n    CHANNELS", "CHANNELS"),
            r"bad\.bvh:8:5: expected 'OFFSET', found 'CHANNELS'",
        ),
        (TINY.replace("Zrotation Xrotation", "Zrotation Wrotation"), "channel names"),
        (TINY.replace("0 0 0 90 0 0 0 90 0\n", "0 0 0 90\n"), r"bad\.bvh:20: frame 1 has 4 val"),
        (TINY.replace("0 0 0 90 0 0 0 90 0\n", ""), "truncated motion data"),
        (TINY.replace("Frame Time: 0.5", "Frame Time: 0"), "expected a Frame Time between"),
        (TINY.replace("1 2 3", "1 x 3"), r"bad\.bvh:19:3: frame 0: non-numeric"),
        (TINY.split("MOTION")[0], "expected 'MOTION', found end of file"),
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
