"""``rbmcap synth`` (and its Hydra twin ``rbmcap-synthesize``) and ``rbmcap dataset
info|merge|verify`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rbmcap.cli.main import main
from rbmcap.config.packaged import conf_dir
from rbmcap.errors import EXIT_DATA


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
        (["--shard", "3/2"], "shard='3/2'"),
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
    assert main(["dataset", "verify", str(merged)]) == EXIT_DATA
    assert "checksum mismatch" in capsys.readouterr().err


def test_hydra_twin_writes_the_same_dataset_as_the_cli(dataset, motions, tmp_path):
    from hydra import compose, initialize_config_dir

    from rbmcap.cli.synth import register_configs, synthesize

    register_configs()
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


# ------------------------------------------------------------------ one source of truth
def _hydra_options(tmp_path, overrides: list[str]):
    """SynthOptions as the Hydra twin builds them from its composed configuration."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from rbmcap.cli.synth import register_configs
    from rbmcap.config.packaged import HYDRA_CONFIG_MODULE
    from rbmcap.dataset import SynthOptions

    register_configs()
    with initialize_config_module(config_module=HYDRA_CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="data_prep/synthesize", overrides=overrides)
    values = OmegaConf.to_container(cfg, resolve=True)
    values["out"] = values["out"] or tmp_path / "out"
    return SynthOptions.from_mapping(values)


def _cli_options(argv: list[str]):
    from rbmcap.cli.main import build_parser
    from rbmcap.cli.synth import options_from_args

    return options_from_args(build_parser().parse_args(["synth", *argv]))


def _resolved(options) -> dict:
    """Options as plain data, with the marker set and realism preset loaded (the Hydra twin
    holds them as config-group mappings, the CLI by name)."""
    import dataclasses

    from rbmcap.markers import load_marker_set
    from rbmcap.markers.realism import load_realism

    values = dataclasses.asdict(options)
    values["markers"] = load_marker_set(options.markers).to_dict()
    values["realism"] = load_realism(options.realism).to_dict()
    return values


def test_cli_hydra_and_library_defaults_are_the_same_options(tmp_path):
    from rbmcap.dataset import SynthOptions

    motions, out = tmp_path / "m", tmp_path / "out"
    library = SynthOptions(motions=motions, out=out)
    cli = _cli_options(["--motions", str(motions), "--out", str(out)])
    hydra = _hydra_options(tmp_path, [f"motions={motions}"])
    assert cli == library
    assert _resolved(hydra) == _resolved(library)
    assert library.markers == "rbm14" and library.realism == "none"  # what `resolved` compared
    assert isinstance(hydra.markers, dict) and hydra.markers["name"] == "rbm14"


def test_cli_and_hydra_options_agree_when_set(tmp_path):
    motions, out = tmp_path / "m", tmp_path / "out"
    cli = _cli_options(
        [
            "--motions",
            str(motions),
            "--out",
            str(out),
            "--fps",
            "30",
            "--seed",
            "7",
            "--shard",
            "1/4",
            "--markers",
            "rbm_a",
            "--realism",
            "harsh",
            "--no-progress",
        ]
    )
    hydra = _hydra_options(
        tmp_path,
        [
            f"motions={motions}",
            f"out={out}",
            "fps=30",
            "seed=7",
            "shard=1/4",
            "markers=rbm_a",
            "realism=harsh",
            "progress=false",
        ],
    )
    assert _resolved(cli) == _resolved(hydra)
    assert cli.shard == (1, 4) and cli.fps == 30.0 and cli.progress is False


@pytest.mark.parametrize(
    ("field", "cli_value", "message"),
    [
        ("fps", "-5", "fps=-5.0"),
        ("workers", "0", "workers=0"),
        ("shard", "4/4", "shard='4/4'"),
    ],
)
def test_a_bad_value_is_one_config_error_from_each_entry_point(
    field, cli_value, message, tmp_path, capsys
):
    from rbmcap.cli.synth import register_configs, synthesize
    from rbmcap.dataset import SynthOptions
    from rbmcap.errors import ConfigError

    motions, out = tmp_path / "m", tmp_path / "out"
    value = {"fps": -5.0, "workers": 0, "shard": "4/4"}[field]
    with pytest.raises(ConfigError, match=message):
        SynthOptions(motions=motions, out=out, **{field: value})

    flag = f"--{field}"
    capsys.readouterr()
    assert main(["synth", "--motions", str(motions), "--out", str(out), flag, cli_value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rbmcap: error:") and message in err and err.count("\n") == 1

    from hydra import compose, initialize_config_module

    register_configs()
    with initialize_config_module(config_module="rbmcap.conf", version_base="1.3"):
        cfg = compose(
            config_name="data_prep/synthesize", overrides=[f"motions={motions}", f"{field}={value}"]
        )
    with pytest.raises(ConfigError, match=message):
        synthesize(cfg, tmp_path / "run")
    assert not out.exists() and not (tmp_path / "run" / "dataset").exists()


def test_options_refuse_wrong_types_naming_the_field(tmp_path):
    from rbmcap.dataset import SynthOptions
    from rbmcap.errors import ConfigError

    for field, value in [
        ("gender", "other"),
        ("seed", 1.5),
        ("seed", "1"),
        ("progress", "yes"),
        ("fps", float("nan")),
        ("markers", ""),
        ("motions", ""),
    ]:
        with pytest.raises(ConfigError, match=f"^{field}="):
            SynthOptions(**{"motions": tmp_path, "out": tmp_path / "o", field: value})
