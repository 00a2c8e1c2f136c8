"""AMASS readers (SMPL+H G and SMPL-X N files, told apart by keys) and AMASS-style folders."""

from __future__ import annotations

import numpy as np
import pytest

from rbmcap.errors import DataError, FormatError
from rbmcap.motion import discover, iter_motions, read_motion, read_split_lists

T = 12


def write_smplh_g(path, rng, **overrides):
    """An AMASS SMPL+H G file as the release ships it (52 joints, 16 betas, dmpls)."""
    arrays = {
        "poses": rng.normal(0, 0.3, (T, 156)),
        "trans": rng.normal(0, 1, (T, 3)),
        "betas": rng.normal(0, 1, 16),
        "gender": np.array("female"),
        "mocap_framerate": np.array(120.0),
        "dmpls": np.zeros((T, 8)),
    }
    arrays.update(overrides)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return arrays


def write_smplx_n(path, rng, split_keys: bool):
    """An AMASS SMPL-X N file: 55 joints in ``poses`` or in the split keys only."""
    poses = rng.normal(0, 0.3, (T, 165))
    arrays = {
        "trans": rng.normal(0, 1, (T, 3)),
        "betas": rng.normal(0, 1, 16),
        "gender": np.array("neutral"),
        "surface_model_type": np.array("smplx"),
        "mocap_frame_rate": np.array(60.0),
        "mocap_time_length": np.array(T / 60.0),
    }
    if split_keys:
        arrays |= {
            "root_orient": poses[:, :3],
            "pose_body": poses[:, 3:66],
            "pose_jaw": poses[:, 66:69],
            "pose_eye": poses[:, 69:75],
            "pose_hand": poses[:, 75:165],
        }
    else:
        arrays["poses"] = poses
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return poses.reshape(T, 55, 3), arrays


def test_smplh_g_file_gives_body_joints_and_first_index_finger_as_hands(tmp_path):
    rng = np.random.default_rng(0)
    arrays = write_smplh_g(tmp_path / "CMU/01/01_01_poses.npz", rng)
    motion = read_motion(tmp_path / "CMU/01/01_01_poses.npz")
    joints = arrays["poses"].reshape(T, 52, 3)
    assert np.array_equal(motion.poses[:, :22], joints[:, :22])
    assert np.array_equal(motion.poses[:, 22], joints[:, 22])
    assert np.array_equal(motion.poses[:, 23], joints[:, 37])
    assert np.array_equal(motion.trans, arrays["trans"])
    assert len(motion.betas) == 16 and motion.gender == "female" and motion.fps == 120.0
    assert motion.name == "01_01" and motion.source["format"] == "amass-smplh"


@pytest.mark.parametrize("split_keys", [False, True])
def test_smplx_n_file_is_detected_by_its_keys(tmp_path, split_keys):
    rng = np.random.default_rng(1)
    joints, _arrays = write_smplx_n(tmp_path / "any_name.npz", rng, split_keys)
    motion = read_motion(tmp_path / "any_name.npz")
    assert np.allclose(motion.poses[:, :22], joints[:, :22])
    assert np.allclose(motion.poses[:, 22], joints[:, 25])  # left index 1
    assert np.allclose(motion.poses[:, 23], joints[:, 40])  # right index 1
    assert motion.fps == 60.0 and motion.gender == "neutral"
    assert motion.source["format"] == "amass-smplx"


def test_bytes_gender_as_older_amass_files_store_it(tmp_path):
    rng = np.random.default_rng(2)
    write_smplh_g(tmp_path / "m_poses.npz", rng, gender=np.array(b"male"))
    assert read_motion(tmp_path / "m_poses.npz").gender == "male"


def test_truncated_npz_raises_format_error_naming_the_file(tmp_path):
    path = tmp_path / "cut_poses.npz"
    write_smplh_g(path, np.random.default_rng(3))
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(FormatError, match=r"cut_poses\.npz.*truncated"):
        read_motion(path)


def test_missing_key_raises_format_error_saying_which(tmp_path):
    path = tmp_path / "nokey_poses.npz"
    write_smplh_g(path, np.random.default_rng(4), trans=None)
    with pytest.raises(FormatError, match=r"nokey_poses\.npz.*missing trans"):
        read_motion(path)


def test_wrong_pose_width_raises_format_error(tmp_path):
    path = tmp_path / "w_poses.npz"
    write_smplh_g(path, np.random.default_rng(5), poses=np.zeros((T, 100)))
    with pytest.raises(FormatError, match=r"expected \(T, 72\)"):
        read_motion(path)


def test_nan_poses_raise_data_error_naming_the_file(tmp_path):
    path = tmp_path / "nan_poses.npz"
    poses = np.zeros((T, 156))
    poses[3, 7] = np.nan
    write_smplh_g(path, np.random.default_rng(6), poses=poses)
    with pytest.raises(
        DataError, match=r"nan_poses\.npz: sequence 'nan', frame 3: poses contains NaN.*joint 2"
    ):
        read_motion(path)


def test_pickled_objects_are_refused(tmp_path):
    path = tmp_path / "obj_poses.npz"
    np.savez(path, poses=np.array([{"a": 1}], dtype=object))
    with pytest.raises(FormatError, match="pickled"):
        read_motion(path)


@pytest.fixture
def amass_root(tmp_path):
    rng = np.random.default_rng(7)
    root = tmp_path / "amass"
    for rel in (
        "CMU/01/01_01_poses.npz",
        "CMU/02/02_01_poses.npz",
        "HumanEva/S1/Walking_poses.npz",
        "MPI_HDM05/bk/jump_poses.npz",
        "Transitions_mocap/mazen/turn_poses.npz",
    ):
        write_smplh_g(root / rel, rng)
    write_smplx_n(root / "SSM/20160330/punch_stageii.npz", rng, split_keys=False)
    np.savez(root / "CMU/01/shape.npz", betas=np.zeros(16), gender=np.array("male"))
    return root


def test_discovery_finds_sequences_with_amass_recommended_split(amass_root):
    entries = {e.relpath: e for e in discover(amass_root)}
    assert set(entries) == {
        "CMU/01/01_01_poses.npz",
        "CMU/02/02_01_poses.npz",
        "HumanEva/S1/Walking_poses.npz",
        "MPI_HDM05/bk/jump_poses.npz",
        "Transitions_mocap/mazen/turn_poses.npz",
        "SSM/20160330/punch_stageii.npz",
    }  # shape.npz is not a sequence
    split = {rel: e.split for rel, e in entries.items()}
    assert split["CMU/01/01_01_poses.npz"] == "train"
    assert split["HumanEva/S1/Walking_poses.npz"] == "val"
    assert split["MPI_HDM05/bk/jump_poses.npz"] == "val"
    assert split["Transitions_mocap/mazen/turn_poses.npz"] == "test"
    assert split["SSM/20160330/punch_stageii.npz"] == "test"
    assert entries["CMU/02/02_01_poses.npz"].dataset == "CMU"


def test_explicit_split_lists_override_the_recommended_split(amass_root, tmp_path):
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "train.txt").write_text(
        "# protocol 1\nCMU/01/01_01_poses\nHumanEva/S1/Walking_poses.npz\n"
    )
    (lists / "test.txt").write_text("CMU/02/02_01_poses.npz\n\n")
    assert read_split_lists(lists)["CMU/01/01_01_poses"] == "train"
    split = {e.relpath: e.split for e in discover(amass_root, split_lists=lists)}
    assert split["HumanEva/S1/Walking_poses.npz"] == "train"
    assert split["CMU/02/02_01_poses.npz"] == "test"
    assert split["MPI_HDM05/bk/jump_poses.npz"] is None  # not listed


def test_folder_reader_skips_a_bad_file_with_a_warning_naming_it(amass_root):
    (amass_root / "CMU/02/02_01_poses.npz").write_bytes(b"not a zip archive")
    with pytest.warns(UserWarning, match=r"skipping .*02_01_poses\.npz"):
        read = [entry.relpath for entry, _ in iter_motions(amass_root)]
    assert len(read) == 5 and "CMU/02/02_01_poses.npz" not in read


def test_folder_reader_filters_a_split_and_resamples(amass_root):
    got = list(iter_motions(discover(amass_root), split="val", fps=60.0))
    assert {e.dataset for e, _ in got} == {"HumanEva", "MPI_HDM05"}
    assert all(m.fps == 60.0 and m.source["relpath"] == e.relpath for e, m in got)
