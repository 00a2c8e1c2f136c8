"""Rigs recognised by their joint names (``joint_map=auto``), drafted maps for unknown rigs, the
alignment read from the motion (``alignment: motion``) and the Bandai map on its real clips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers.motions import MIXAMO, PREFIX, smooth_random_motion, write_known_bvh
from helpers.shared import BANDAI, SHARED_DATA

from rbmcap.cli.main import main as cli_main
from rbmcap.errors import DataError
from rbmcap.motion.bvh import read_bvh
from rbmcap.motion.folder import build_motion_folder, clip_subjects
from rbmcap.motion.joint_map import JointMap
from rbmcap.motion.kinematics import MotionKinematics, standin_body
from rbmcap.motion.retarget import bvh_to_motion, retarget_bvh
from rbmcap.motion.rigs import UnknownRigError, detect_joint_map

BANDAI_WALK = BANDAI / "dataset-1_walk_normal_001.bvh"
needs_bandai = pytest.mark.skipif(not BANDAI_WALK.is_file(), reason="shared/data/bandai absent")


@pytest.fixture(scope="module")
def kin():
    return MotionKinematics(standin_body())


@pytest.fixture(scope="module")
def mixamo(tmp_path_factory, kin):
    """A Mixamo-named rig (no shipped map fits it) with its SMPL joint positions (T, 24, 3)."""
    path = tmp_path_factory.mktemp("rig") / "mixamo.bvh"
    truth = write_known_bvh(path, smooth_random_motion(120, seed=3), kin)
    return path, truth


def test_an_unknown_rig_gets_a_drafted_map_that_retargets_it(mixamo, kin, tmp_path):
    path, truth = mixamo
    with pytest.raises(UnknownRigError, match=r"mixamo\.bvh: no known joint map fits") as err:
        detect_joint_map(read_bvh(path))
    draft = yaml.safe_load(err.value.template)
    assert draft["units_to_metres"] == pytest.approx(0.01) and draft["up_axis"] == "y"
    assert draft["alignment"] == "motion"
    assert draft["joints"]["left_hip"] == "mixamorig:LeftUpLeg"
    assert draft["joints"]["right_elbow"] == "mixamorig:RightForeArm"
    assert draft["joints"]["left_collar"] == "mixamorig:LeftShoulder"
    assert draft["joints"]["left_shoulder"] == "mixamorig:LeftArm"
    (tmp_path / "draft.yaml").write_text(err.value.template)
    out = retarget_bvh(
        read_bvh(path), JointMap.load(tmp_path / "draft.yaml"), floor="bvh", body=kin.body
    )
    joints, _ = kin.pose(out.poses, out.trans)
    error = np.linalg.norm(joints - truth, axis=-1)[:, :22]  # the draft maps no hands
    assert error.mean() < 0.006, error.mean()


def test_motion_alignment_recovers_a_rig_with_no_usable_rest(mixamo, kin, tmp_path):
    """The known rig's rest has its arms hanging and faces +X: the alignment read from the
    motion alone puts every body joint within millimetres of the truth."""
    path, truth = mixamo
    spec = {
        "units_to_metres": 0.01,
        "alignment": "motion",
        "joints": {k: PREFIX + v for k, v in MIXAMO.items()},
    }
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(spec))
    out = retarget_bvh(
        read_bvh(path), JointMap.load(tmp_path / "m.yaml"), floor="bvh", body=kin.body
    )
    joints, _ = kin.pose(out.poses, out.trans)
    assert np.linalg.norm(joints - truth, axis=-1).mean() < 0.006


def test_cli_writes_the_draft_and_one_error_line(mixamo, tmp_path, capsys):
    path, _ = mixamo
    out = tmp_path / "out" / "motion.npz"
    status = cli_main(["motion", "from-bvh", str(path), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status != 0 and len(err) == 1
    draft = tmp_path / "out" / "mixamo.joint_map.yaml"
    assert str(draft) in err[0] and draft.is_file()
    assert not out.exists()
    assert JointMap.load(draft).joints["pelvis"] == "mixamorig:Hips"


@pytest.mark.parametrize(
    ("folder", "name"), [("bandai", "bandai"), ("cmu-iclone", "iclone_cc"), ("cmu", "cmu")]
)
def test_auto_recognises_the_shipped_rigs(folder, name):
    clips = sorted((SHARED_DATA / folder).glob("*.bvh"))
    if not clips:
        pytest.skip(f"shared/data/{folder} absent")
    assert detect_joint_map(read_bvh(clips[0])).name == name


@needs_bandai
def test_bandai_walk_retargets_to_a_walk(kin):
    """Knees and elbows bend about SMPL's hinge axes with the right sign on both sides, the
    shoulders mirror each other, and every bone points where the file's bone points."""
    motion = bvh_to_motion(BANDAI_WALK, floor="bvh")
    assert motion.source["joint_map"] == "bandai"
    deg = np.degrees(motion.poses)
    from rbmcap.motion.retarget import _INDEX as J

    for side, sign in (("left", -1), ("right", 1)):
        knee, elbow = deg[:, J[f"{side}_knee"]], deg[:, J[f"{side}_elbow"]]
        assert knee[:, 0].mean() > 15 and np.abs(knee[:, 1:]).mean() < 8  # flexion about +x
        assert sign * elbow[:, 1].mean() > 5 and np.abs(elbow[:, [0, 2]]).mean() < 6
    left, right = deg[:, J["left_shoulder"]].mean(0), deg[:, J["right_shoulder"]].mean(0)
    assert np.allclose(left * [1, -1, -1], right, atol=8)  # mirror images
    assert -70 < left[2] < -35  # arms hang
    bvh = read_bvh(BANDAI_WALK)
    _, pos = bvh.global_transforms()
    up = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])  # Y up → Z up
    joints, _ = kin.pose(motion.poses, motion.trans)
    jm = JointMap.load("bandai")
    for a, b in (("left_hip", "left_knee"), ("right_elbow", "right_wrist"), ("neck", "head")):
        if a == "neck":
            continue  # the neck is aligned on the average pose, not its bone (see the map)
        ours = joints[:, J[b]] - joints[:, J[a]]
        theirs = (pos[:, bvh.index(jm.joints[b])] - pos[:, bvh.index(jm.joints[a])]) @ up.T
        cos = (
            (ours * theirs).sum(-1)
            / np.linalg.norm(ours, axis=-1)
            / np.linalg.norm(theirs, axis=-1)
        )
        assert np.degrees(np.arccos(np.clip(cos, -1, 1))).max() < 1.0


def _clip_folder(path: Path, tmp_path: Path, names: tuple[str, ...]) -> Path:
    """A folder ``tmp_path/clips`` holding the BVH file ``path`` under each of ``names``."""
    src = tmp_path / "clips"
    src.mkdir()
    for name in names:
        (src / f"{name}.bvh").write_bytes(path.read_bytes())
    return src


def test_subject_pattern_groups_clips_for_the_splits(mixamo, tmp_path, kin):
    path, _ = mixamo
    names = ("dataset-1_walk_old_001", "dataset-1_run_old_001", "dataset-1_walk_happy_001")
    src = _clip_folder(path, tmp_path, names)
    pattern = r"dataset-1_[^_]+_(?P<subject>[^_]+)_\d+"
    assert set(clip_subjects(src, pattern).values()) == {"old", "happy"}
    spec = tmp_path / "m.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "units_to_metres": 0.01,
                "alignment": "motion",
                "joints": yaml.safe_load(_draft(path))["joints"],
            }
        )
    )
    lists = build_motion_folder(
        src,
        tmp_path / "motions",
        spec,
        splits={"old": "test"},
        subject_pattern=pattern,
        body=kin.body,
    )
    assert sorted(lists["test"]) == [
        "clips/old/dataset-1_run_old_001_poses.npz",
        "clips/old/dataset-1_walk_old_001_poses.npz",
    ]
    assert lists["train"] == ["clips/happy/dataset-1_walk_happy_001_poses.npz"]
    with pytest.raises(DataError, match="does not match subject_pattern"):
        clip_subjects(src, r"other_(?P<subject>\w+)")


def test_clips_retargeted_by_worker_processes_are_the_same_files(mixamo, tmp_path, kin):
    path, _ = mixamo
    src = _clip_folder(path, tmp_path, ("a_walk_x_001", "a_run_y_001", "a_jump_x_001"))
    spec = tmp_path / "m.yaml"
    joints = yaml.safe_load(_draft(path))["joints"]
    spec.write_text(yaml.safe_dump({"units_to_metres": 0.01, "joints": joints}))
    kw = {"splits": {"y": "val"}, "subject_pattern": r"a_[^_]+_(?P<subject>\w)_\d+"}
    calls: dict[str, list] = {"one": [], "two": []}
    one = build_motion_folder(
        src,
        tmp_path / "one",
        spec,
        body=kin.body,
        **kw,
        progress=lambda i, n, p: calls["one"].append((i, p.relative_to(tmp_path / "one"))),
    )
    two = build_motion_folder(
        src,
        tmp_path / "two",
        spec,
        body=kin.body,
        workers=2,
        **kw,
        progress=lambda i, n, p: calls["two"].append((i, p.relative_to(tmp_path / "two"))),
    )
    assert two == one and one["val"] == ["clips/y/a_run_y_001_poses.npz"]
    assert calls["two"] == calls["one"] and [i for i, _ in calls["one"]] == [0, 1, 2]
    for rel in one["train"] + one["val"]:
        with np.load(tmp_path / "one" / rel) as x, np.load(tmp_path / "two" / rel) as y:
            assert sorted(x.files) == sorted(y.files)
            for key in x.files:
                assert np.array_equal(x[key], y[key]), (rel, key)


def _draft(path: Path) -> str:
    try:
        detect_joint_map(read_bvh(path))
    except UnknownRigError as exc:
        return exc.template
    raise AssertionError("the rig was recognised")
