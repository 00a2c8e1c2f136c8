"""``rbmcap synth`` and ``rbmcap dataset info|merge|verify`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rbmcap.cli.main import main
from rbmcap.configfiles import conf_dir


def _write_motion(path: Path, frames: int, seed: int, nan: bool = False) -> None:
    rng = np.random.default_rng(seed)
    poses = np.zeros((frames, 156))
    poses[:, :66] = np.cumsum(rng.normal(0, 0.01, (frames, 66)), 0)
    if nan:
        poses[1, 1] = np.nan
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path,
        poses=poses,
        trans=np.zeros((frames, 3)),
        betas=np.zeros(16),
        gender=np.array("male"),
        mocap_framerate=np.array(30.0),
    )


@pytest.fixture(scope="module")
def motions(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli_motions")
    _write_motion(root / "BMLrub" / "a" / "walk_poses.npz", 40, 0)
    _write_motion(root / "BMLrub" / "a" / "run_poses.npz", 30, 1)
    _write_motion(root / "SFU" / "b" / "jump_poses.npz", 20, 2)
    _write_motion(root / "BMLrub" / "a" / "broken_poses.npz", 20, 3, nan=True)
    return root


@pytest.fixture(scope="module")
def dataset(motions, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli_out") / "ds"
    code = main(
        [
            "synth",
            "--motions",
            str(motions),
            "--out",
            str(out),
            "--markers",
            "rbm_a",
            "--realism",
            "realistic",
            "--fps",
            "60",
            "--no-progress",
        ]
    )
    assert code == 0
    return out


def test_synth_writes_per_split_outputs_and_names_skipped_files(dataset, motions, capsys, tmp_path):
    assert (dataset / "train" / "rbm_pos.npy").is_file() and (dataset / "val").is_dir()
    code = main(
        [
            "synth",
            "--motions",
            str(motions),
            "--out",
            str(tmp_path / "x"),
            "--markers",
            "rbm_d",
            "--no-progress",
        ]
    )
    assert code == 0
    err = capsys.readouterr().err
    assert "warning: skipped BMLrub/a/broken_poses.npz" in err and "NaN" in err


def test_dataset_info_json(dataset, capsys):
    capsys.readouterr()
    assert main(["dataset", "info", str(dataset), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["splits"] == {
        "train": {"sequences": 2, "frames": 79 + 59},
        "val": {"sequences": 1, "frames": 39},
    }
    assert info["marker_set"] == "rbm_a" and info["num_markers"] == 10
    assert info["realism"] == "realistic" and info["body_model"].startswith("standin")
    assert len(info["config_hash"]) == 64


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--markers", "rbm99"], "unknown marker set 'rbm99'"),
        (["--realism", "wild"], "unknown realism preset 'wild'"),
        (["--shard", "3/2"], "shard '3/2'"),
        (["--realism", "harsh"], "another configuration"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(dataset, motions, capsys, extra, message):
    capsys.readouterr()
    code = main(
        [
            "synth",
            "--motions",
            str(motions),
            "--out",
            str(dataset),
            "--markers",
            "rbm_a",
            "--realism",
            "realistic",
            "--no-progress",
            *extra,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err
    assert err.startswith("rbmcap: error:") and err.count("\n") == 1


def test_shards_merge_and_verify_from_the_cli(motions, dataset, tmp_path, capsys):
    args = [
        "--motions",
        str(motions),
        "--markers",
        "rbm_a",
        "--realism",
        "realistic",
        "--no-progress",
    ]
    for i in range(2):
        assert main(["synth", *args, "--out", str(tmp_path / f"s{i}"), "--shard", f"{i}/2"]) == 0
    merged = tmp_path / "merged"
    assert (
        main(["dataset", "merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(merged)])
        == 0
    )
    for f in ("manifest.json", "train/rbm_rot.npy", "val/joints.npy"):
        assert (merged / f).read_bytes() == (dataset / f).read_bytes()
    assert main(["dataset", "verify", str(merged)]) == 0
    data = bytearray((merged / "train" / "rbm_pos.npy").read_bytes())
    data[-5] ^= 0xFF
    (merged / "train" / "rbm_pos.npy").write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["dataset", "verify", str(merged)]) == 2
    assert "checksum mismatch" in capsys.readouterr().err


def test_hydra_twin_writes_the_same_dataset_as_the_cli(dataset, motions, tmp_path):
    from hydra import compose, initialize_config_dir

    from rbmcap.dataset.app import synthesize

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(
            config_name="data_prep/synthesize",
            overrides=[
                f"motions={motions}",
                "markers=rbm_a",
                "realism=realistic",
                "progress=false",
            ],
        )
    info = synthesize(cfg, tmp_path / "run")
    out = tmp_path / "run" / "dataset"
    assert json.loads((tmp_path / "run" / "dataset_info.json").read_text()) == info
    for f in ("manifest.json", "train/rbm_pos.npy", "val/rbm_valid.npy"):
        assert (out / f).read_bytes() == (dataset / f).read_bytes()
