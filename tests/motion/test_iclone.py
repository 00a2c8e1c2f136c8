"""Real CMU clips on the iClone / Character Creator rig (shared/data/cmu-iclone) retargeted with
the ``iclone_cc`` joint map, T-pose frames, and the motions-folder builder.

Skipped where the clips are absent: rbmcap itself never needs them.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pytest
import roma
import torch
from helpers.shared import ICLONE

from rbmcap.cli.main import main
from rbmcap.dataset.sources import discover_jobs
from rbmcap.motion import JointMap, read_bvh, read_motion, retarget_bvh
from rbmcap.motion.folder import build_motion_folder
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.motion.quality import ground_penetration_mm
from rbmcap.motion.retarget import is_tpose, support_foot_heights
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

WALK = "002_01"  # subject 2, "walk"
WALK_FRAMES = 120  # its first 2 s
Y_UP_TO_Z_UP = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]])

pytestmark = pytest.mark.skipif(not ICLONE.is_dir(), reason=f"iClone clips not found at {ICLONE}")


def _i(name: str) -> int:
    return SMPL_JOINT_NAMES.index(name)


@pytest.fixture(scope="module")
def kin(standin):
    return MotionKinematics(standin)


@pytest.fixture(scope="module")
def walk_bvh():
    bvh = read_bvh(ICLONE / f"{WALK}.bvh")
    return dataclasses.replace(bvh, frames=bvh.frames[:WALK_FRAMES])


@pytest.fixture(scope="module")
def walk(walk_bvh, kin):
    return retarget_bvh(walk_bvh, "iclone_cc", body=kin.body, fps=60.0)


# ------------------------------------------------------------------------------ the walk
def test_the_walk_is_upright_and_travels(walk, kin):
    joints, _ = kin.pose(walk.poses, walk.trans)
    pelvis, head = joints[:, _i("pelvis")], joints[:, _i("head")]
    up = (head - pelvis) / np.linalg.norm(head - pelvis, axis=-1, keepdims=True)
    assert up[:, 2].min() > 0.95  # pelvis-to-head within 18° of +Z in every frame
    assert 0.8 < np.median(pelvis[:, 2]) < 1.05
    assert np.linalg.norm(pelvis[-1, :2] - pelvis[0, :2]) > 1.5  # metres in 2 s


def test_the_walks_planted_feet_rest_on_the_floor(walk, kin):
    height, planted = support_foot_heights(walk, kin)
    assert planted.mean() > 0.5
    assert np.abs(height[planted]).max() < 0.02
    assert ground_penetration_mm(walk, kin) < 3.0


def test_every_mapped_bone_points_where_the_bvh_bone_points(walk_bvh, walk, kin):
    _, pos = walk_bvh.global_transforms()
    pos = pos @ Y_UP_TO_Z_UP.T
    joints, _ = kin.pose(walk.poses, walk.trans)
    names = JointMap.load("iclone_cc").joints
    for parent, child in (
        ("right_hip", "left_hip"),
        ("left_hip", "left_knee"),
        ("right_knee", "right_ankle"),
        ("left_ankle", "left_foot"),
        ("left_shoulder", "left_elbow"),
        ("right_elbow", "right_wrist"),
        ("spine3", "neck"),
    ):
        smpl = joints[:, _i(child)] - joints[:, _i(parent)]
        ref = pos[:, walk_bvh.index(names[child])] - pos[:, walk_bvh.index(names[parent])]
        cos = (smpl * ref).sum(-1) / np.linalg.norm(smpl, axis=-1) / np.linalg.norm(ref, axis=-1)
        assert cos.min() > np.cos(np.radians(1.0)), (parent, child)


def test_the_subject_faces_where_it_walks_with_its_left_foot_on_its_left(walk_bvh, walk, kin):
    """A map with left and right swapped still copies bone directions, but its mirror image can
    only be matched by turning the body round: it walks backwards."""
    joints, _ = kin.pose(walk.poses, walk.trans)
    root = roma.rotvec_to_rotmat(torch.from_numpy(walk.poses[:, 0])).numpy()
    forward, left = root[:, :, 2], root[:, :, 0]
    travel = joints[-1, 0] - joints[0, 0]
    travel = travel / np.linalg.norm(travel)
    assert (forward @ travel).min() > 0.9
    _, pos = walk_bvh.global_transforms()
    pos = pos @ Y_UP_TO_Z_UP.T * 0.01
    hips = pos[:, walk_bvh.index("CC_Base_L_Thigh")] - pos[:, walk_bvh.index("CC_Base_R_Thigh")]
    assert ((hips * left).sum(-1) > 0.15).all()  # the file's left hip is on SMPL's left
    feet = joints[:, _i("left_ankle")] - joints[:, _i("right_ankle")]
    assert ((feet * left).sum(-1) > 0).mean() > 0.9  # (narrow steps: feet pass close by)


def test_the_spine_bends_smoothly(walk):
    """The rig's short waist bones are bent +22°/-19° by the conversion; copied onto SMPL's
    spine they would zig-zag (+20°/-47°/+14° on spine1-3), so the map leaves them out."""
    for name in ("spine1", "spine2", "spine3"):
        angle = np.degrees(np.linalg.norm(walk.poses[:, _i(name)], axis=-1))
        assert np.median(angle) < 10.0, name


def test_the_toes_lie_straight(walk):
    """The rig's toe bone is turned +27° from its foot bone when the foot is flat; copied, SMPL's
    toes would stay bent up by that much, so the map keeps them straight."""
    for name in ("left_foot", "right_foot"):
        assert np.abs(walk.poses[:, _i(name)]).max() < 1e-9, name


# ------------------------------------------------------------------------------ T-pose frames
def _tpose_row(bvh, motion) -> np.ndarray:
    """Channel values of a frame in which ``bvh``'s rig holds SMPL's T-pose, facing the file's
    +Z: each mapped joint's global rotation B_k = Q_jᵀ, with Q_j read back from ``motion`` (the
    same file retargeted, frame 0) as B_k(0)ᵀ · Cᵀ · G_j(0)."""
    rot, _ = bvh.global_transforms()
    local = roma.rotvec_to_rotmat(torch.from_numpy(motion.poses[0])).numpy()
    smpl_global = np.empty_like(local)
    for j, p in enumerate(SMPL_PARENTS):
        smpl_global[j] = local[j] if p < 0 else smpl_global[p] @ local[j]
    target = {}
    for smpl_name, bvh_name in JointMap.load("iclone_cc").joints.items():
        k = bvh.index(bvh_name)
        q = rot[0, k].T @ Y_UP_TO_Z_UP.T @ smpl_global[_i(smpl_name)]
        target[k] = q.T
    row, start = bvh.frames[0].copy(), 0
    local_bvh = bvh.local_rotmats()[0]
    glob = np.empty_like(local_bvh)
    for k, p in enumerate(bvh.parents):
        parent = glob[p] if p >= 0 else np.eye(3)
        glob[k] = target.get(k, parent @ local_bvh[k])
        chans = bvh.channels[k]
        cols = [start + c for c, n in enumerate(chans) if n.lower().endswith("rotation")]
        order = "".join(n[0].upper() for n in chans if n.lower().endswith("rotation"))
        if cols:
            euler = roma.rotmat_to_euler(order, torch.from_numpy(parent.T @ glob[k]), degrees=True)
            row[cols] = euler.numpy()
        start += len(chans)
    return row


@pytest.fixture(scope="module")
def tpose_walk(walk_bvh, kin):
    """The walk with a T-pose frame prepended, as the dataset's README describes its clips."""
    first = retarget_bvh(walk_bvh, "iclone_cc", body=kin.body, floor="bvh")
    row = _tpose_row(walk_bvh, first)
    return dataclasses.replace(walk_bvh, frames=np.vstack([row, walk_bvh.frames]))


def test_a_tpose_frame_retargets_to_smpls_zero_pose(tpose_walk, walk, kin):
    keep = dataclasses.replace(JointMap.load("iclone_cc"), first_frame="keep")
    motion = retarget_bvh(tpose_walk, keep, body=kin.body, floor="bvh")
    body_angles = np.degrees(np.linalg.norm(motion.poses[0, 1:22], axis=-1))
    assert body_angles.max() < 0.5
    assert is_tpose(motion.poses[0])
    assert not is_tpose(walk.poses[0])  # the real first frame: arms hanging, mid-stride


def test_a_leading_tpose_frame_is_dropped_and_the_motion_kept(tpose_walk, walk, kin):
    motion = retarget_bvh(tpose_walk, "iclone_cc", body=kin.body, fps=60.0)
    assert motion.source["first_frame_dropped"] and not walk.source["first_frame_dropped"]
    assert motion.num_frames == walk.num_frames == WALK_FRAMES
    np.testing.assert_allclose(motion.poses, walk.poses, atol=1e-6)
    np.testing.assert_allclose(motion.trans, walk.trans, atol=1e-6)


def test_a_tpose_reference_frame_gives_the_rest_alignments_motion(tpose_walk, walk, kin):
    """The same rig aligned from its T-pose frame instead of its rest pose."""
    ref = dataclasses.replace(JointMap.load("iclone_cc"), reference_frame=0, first_frame="drop")
    motion = retarget_bvh(tpose_walk, ref, body=kin.body, fps=60.0)
    assert motion.num_frames == WALK_FRAMES
    diff = roma.rotmat_geodesic_distance(
        roma.rotvec_to_rotmat(torch.from_numpy(motion.poses)),
        roma.rotvec_to_rotmat(torch.from_numpy(walk.poses)),
    )
    diff = np.degrees(diff.numpy())
    assert diff[:, 0].max() < 5.0  # the facing fitted on the T-pose's joint positions
    assert diff[:, 1:22].max() < 5.0  # local rotations conjugated by that 3° difference


def test_a_reference_frame_beyond_the_file_is_a_format_error(walk_bvh):
    from rbmcap.errors import FormatError

    ref = dataclasses.replace(JointMap.load("iclone_cc"), reference_frame=WALK_FRAMES)
    with pytest.raises(FormatError, match="frame 120"):
        retarget_bvh(walk_bvh, ref)


# ------------------------------------------------------------------------------ folders
CLIPS = {"002_01": "2", "002_02": "2", "003_01": "3", "005_01": "5"}
CLIP_FRAMES = 30


def _write_short_clip(src: Path, dst: Path, frames: int) -> None:
    """``src`` cut to its first ``frames`` frames (a BVH's frame lines follow 'Frame Time')."""
    lines = src.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().upper().startswith("FRAME TIME"))
    lines[at - 1] = f"Frames: {frames}"
    dst.write_text("\n".join(lines[: at + 1 + frames]) + "\n")


@pytest.fixture(scope="module")
def clips_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("iclone")
    for clip in CLIPS:
        _write_short_clip(ICLONE / f"{clip}.bvh", folder / f"{clip}.bvh", CLIP_FRAMES)
    shutil.copy(ICLONE / "clips.csv", folder / "clips.csv")
    return folder


def _procedural_folder(out: Path, walk) -> None:
    """A stand-in for ``rbmcap motion procedural --out OUT``: its layout and split lists."""
    rels = {
        "train": "Procedural/S00/walk_0000_poses.npz",
        "test": "Procedural/S01/walk_0001_poses.npz",
    }
    (out / "splits").mkdir(parents=True)
    for split in ("train", "val", "test"):
        rel = rels.get(split)
        if rel:
            walk[:10].save(out / rel)
        (out / "splits" / f"{split}.txt").write_text(f"{rel}\n" if rel else "")


def test_the_builder_splits_by_subject_beside_procedural_motion(clips_dir, tmp_path, walk, standin):
    out = tmp_path / "motions"
    _procedural_folder(out, walk)
    procedural = discover_jobs(out)
    assert len(procedural) == 2
    for _ in range(2):  # building twice replaces the clips' lines, never duplicates them
        lists = build_motion_folder(
            clips_dir,
            out,
            "iclone_cc",
            splits={"2": "test", "3": "val"},
            dataset="iclone",
            body=standin,
        )
    assert lists["test"] == ["iclone/02/002_01_poses.npz", "iclone/02/002_02_poses.npz"]
    assert lists["val"] == ["iclone/03/003_01_poses.npz"]
    assert lists["train"] == ["iclone/05/005_01_poses.npz"]
    jobs = discover_jobs(out)
    assert len(jobs) == len(procedural) + len(CLIPS)
    assert {(j.source, j.split) for j in procedural} <= {(j.source, j.split) for j in jobs}
    subject_splits = {}
    for job in jobs:
        if job.source.startswith("iclone/"):
            subject_splits.setdefault(job.source.split("/")[1], set()).add(job.split)
    assert subject_splits == {"02": {"test"}, "03": {"val"}, "05": {"train"}}
    motion = read_motion(out / lists["train"][0])
    assert motion.source["subject"] == "05" and motion.fps == 60.0


def test_the_command_line_retargets_a_clip_and_a_folder(clips_dir, tmp_path, capsys):
    out = tmp_path / "one.npz"
    assert (
        main(
            [
                "motion",
                "from-bvh",
                str(clips_dir / "002_01.bvh"),
                "--joint-map",
                "iclone_cc",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert read_motion(out).num_frames == CLIP_FRAMES
    clips = tmp_path / "clips"
    clips.mkdir()
    for clip in ("002_01", "005_01"):
        shutil.copy(clips_dir / f"{clip}.bvh", clips)
    argv = ["motion", "from-bvh", str(clips), "--joint-map", "iclone_cc", "--out"]
    assert main([*argv, str(tmp_path / "motions"), "--split", "2=test"]) == 0
    assert "2 motions (1 train, 0 val, 1 test)" in capsys.readouterr().out
    assert main([*argv, str(tmp_path / "bad"), "--split", "2=tset"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown split 'tset'" in err and "\n" not in err
