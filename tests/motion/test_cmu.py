"""The two CMU clips (shared/data/cmu) retargeted with the default CMU joint map.

Skipped where the clips are absent: rbmcap itself never needs them.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.shared import CMU

from rbmcap.motion import JointMap, bvh_to_motion, read_bvh
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.motion.retarget import support_foot_heights

CLIPS = ("131_01", "131_02")

pytestmark = pytest.mark.skipif(not CMU.is_dir(), reason=f"CMU clips not found at {CMU}")


@pytest.fixture(scope="module")
def kin(standin):
    return MotionKinematics(standin)


@pytest.fixture(scope="module", params=CLIPS)
def clip(request, kin):
    path = CMU / f"{request.param}.bvh"
    return read_bvh(path), bvh_to_motion(path, fps=60.0, body=kin.body)


def test_clip_becomes_a_60hz_motion_of_the_same_length(clip):
    bvh, motion = clip
    assert motion.fps == 60.0
    assert motion.duration_s == pytest.approx(bvh.num_frames / bvh.fps, abs=2 / 60)
    assert np.isfinite(motion.poses).all()


def test_planted_feet_stay_within_5cm_of_the_floor(clip, kin):
    """Contact phases: frames where the lower foot moves slower than 0.2 m/s."""
    _, motion = clip
    height, planted = support_foot_heights(motion, kin)
    assert planted.mean() > 0.5  # start, walk, stop: mostly on the floor
    assert np.abs(height[planted]).max() < 0.05
    assert np.abs(np.median(height[planted])) < 0.005


def test_every_mapped_bone_points_where_the_bvh_bone_points(clip, kin):
    bvh, motion = clip
    step = round(bvh.fps / motion.fps)
    _, pos = bvh.global_transforms()
    pos = pos[::step][: motion.num_frames] @ np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]]).T
    joints, _ = kin.pose(motion.poses, motion.trans)
    cmu = JointMap.load("cmu").joints
    for parent, child in (
        ("left_hip", "left_knee"),
        ("right_knee", "right_ankle"),
        ("left_shoulder", "left_elbow"),
        ("right_elbow", "right_wrist"),
        ("spine2", "spine3"),
        ("neck", "head"),
    ):
        smpl = joints[:, _i(child)] - joints[:, _i(parent)]
        ref = pos[:, bvh.index(cmu[child])] - pos[:, bvh.index(cmu[parent])]
        cos = (smpl * ref).sum(-1) / np.linalg.norm(smpl, axis=-1) / np.linalg.norm(ref, axis=-1)
        assert cos.min() > np.cos(np.radians(0.5)), (parent, child)


def test_the_subject_walks_upright_across_the_floor(clip, kin):
    _, motion = clip
    joints, _ = kin.pose(motion.poses, motion.trans)
    pelvis, head = joints[:, 0], joints[:, 15]
    assert np.linalg.norm(pelvis[-1, :2] - pelvis[0, :2]) > 1.5  # metres travelled
    assert (head[:, 2] > pelvis[:, 2] + 0.3).all()
    assert 0.8 < np.median(pelvis[:, 2]) < 1.05


def _i(name: str) -> int:
    from rbmcap.skeleton import SMPL_JOINT_NAMES

    return SMPL_JOINT_NAMES.index(name)
