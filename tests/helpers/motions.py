"""Motion files the tests write: AMASS-style ``.npz`` files of smooth random motion, and BVH
files whose SMPL truth is known (a Mixamo-like rig in centimetres, facing +X)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import roma
import torch
from scipy.interpolate import PchipInterpolator

from rbmcap.motion import SMPLMotion, write_bvh
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.motion.limits import JointLimits
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

TINY_BVH = """HIERARCHY
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
"""A two-joint, two-frame BVH file (hips and a knee, Euler channels in two orders)."""

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
"""The Mixamo rig's joint names by SMPL joint name."""
PREFIX = "mixamorig:"
"""What :func:`write_known_bvh` puts before each :data:`MIXAMO` name."""
CM = 100.0
"""Centimetres per metre: the unit of the BVH files written here."""


def rotmat_deg(axis: str, deg: float) -> np.ndarray:
    """The (3, 3) float64 rotation by ``deg`` degrees about ``axis`` (``"x"``, ``"y"``, ``"z"``)."""
    return roma.euler_to_rotmat(axis, [np.radians(deg)]).double().numpy()


def smooth_random_motion(num_frames: int = 60, fps: float = 30.0, seed: int = 0) -> SMPLMotion:
    """Every joint wanders smoothly inside half its limit box; the root turns and travels."""
    rng = np.random.default_rng(seed)
    lo, hi = JointLimits.load().sample_box(0.5)
    keys_t = np.linspace(0, num_frames - 1, 5)
    keys = rng.uniform(lo, hi, (5, 24, 3))
    poses = PchipInterpolator(keys_t, keys, axis=0)(np.arange(num_frames))
    yaw = np.linspace(0, rng.uniform(-2, 2), num_frames)
    root = torch.from_numpy(np.stack([rotmat_deg("z", np.degrees(y)) for y in yaw]))
    poses[:, 0] = roma.rotmat_to_rotvec(root @ torch.from_numpy(rotmat_deg("x", 90.0))).numpy()
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
    face_x = rotmat_deg("y", 90.0)
    align = np.stack([face_x] * 24)
    bvh_rest = rest.copy()
    for side, down in (("left", -90.0), ("right", 90.0)):
        chain = [
            SMPL_JOINT_NAMES.index(f"{side}_{n}") for n in ("shoulder", "elbow", "wrist", "hand")
        ]
        pivot = rest[chain[0]]
        bvh_rest[chain] = pivot + (rest[chain] - pivot) @ rotmat_deg("z", down).T
        align[chain] = face_x @ rotmat_deg("z", down)
    bvh_rest = bvh_rest @ face_x.T
    world_from_bvh = rotmat_deg("x", 90.0)  # Y-up file world → rbmcap's Z-up world
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


def write_motion(path: Path, frames: int, seed: int, fps: float = 60.0, nan: bool = False) -> Path:
    """An AMASS SMPL+H style motion file: smooth random joint swings, a Z-up root."""
    rng = np.random.default_rng(seed)
    t = np.arange(frames) / fps
    poses = np.zeros((frames, 156))
    freq, phase, amp = rng.uniform(0.2, 1.0, 66), rng.uniform(0, 6.3, 66), rng.uniform(0, 0.4, 66)
    poses[:, :66] = amp * np.sin(2 * np.pi * freq * t[:, None] + phase)
    poses[:, 0] += np.pi / 2
    trans = np.stack([0.5 * np.sin(t), 0.3 * t, 0.9 + 0.02 * np.sin(3 * t)], 1)
    if nan:
        poses[frames // 2, 5] = np.nan
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        poses=poses,
        trans=trans,
        betas=rng.normal(0, 1, 16),
        gender=np.array("neutral"),
        mocap_framerate=np.array(fps),
    )
    return path
