"""``rbmcap synth`` and its Hydra twin ``rbmcap-synthesize`` (``data_prep/synthesize.py``):
synthesise virtual RBM observations for a folder of motions.

    rbmcap synth --motions data/amass --out data/amass_rbm14 --realism realistic
    rbmcap-synthesize motions=data/amass shard=3/16 out=data/amass_rbm14_s3
    rbmcap-synthesize -m motions=data/amass markers=rbm_a,rbm_b,rbm_c

Both front ends take their options and defaults from :class:`~rbmcap.dataset.SynthOptions` and
call :func:`~rbmcap.dataset.synthesize_dataset`, the path the training data recipe
(:func:`rbmcap.dataset.recipe.make_dataset`) takes too. The Hydra twin's configuration is the
packaged ``conf/data_prep/synthesize.yaml`` (Hydra's own keys) over ``data_prep/synth_options``,
which :func:`register_configs` builds from the dataclass; ``markers`` and ``realism`` are config
groups there, so ``markers=rbm_a`` or ``realism.occlusion.rate=…`` work. Hydra does not change
directory; without ``out`` the dataset goes to ``<run dir>/dataset``, and a summary to
``<run dir>/dataset_info.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from rbmcap.config.packaged import HYDRA_CONFIG_MODULE
from rbmcap.dataset import SynthOptions, dataset_info, synthesize_dataset
from rbmcap.dataset.synth_options import GENDERS
from rbmcap.errors import USER_ERRORS, user_error

_DEFAULTS = SynthOptions.defaults()  # the one place the defaults live


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synth",
        help="synthesise virtual RBM data from motions",
        description=(
            "Pose the body with every motion under --motions, attach virtual markers and write a "
            "dataset (manifest + memory-mapped arrays, one folder per split). An interrupted run "
            "resumes where it stopped; an output made with another configuration is refused. "
            "Shard outputs (--shard i/n) are combined with `rbmcap dataset merge`."
        ),
    )
    p.add_argument("--motions", required=True, help="folder of AMASS-style *_poses.npz (or a file)")
    p.add_argument("--out", required=True, help="dataset folder to write")
    d = _DEFAULTS
    p.add_argument("--body", default=d["body"], help="'standin' or a model file/folder")
    p.add_argument("--gender", default=d["gender"], choices=GENDERS)
    p.add_argument("--markers", default=d["markers"], help="marker set name or YAML path")
    p.add_argument("--realism", default=d["realism"], help="none, realistic, harsh or a YAML path")
    p.add_argument("--fps", type=float, default=d["fps"], help="frame rate of the output (Hz)")
    p.add_argument("--seed", type=int, default=d["seed"], help="seed of the realism models")
    p.add_argument("--workers", type=int, default=d["workers"], help="worker processes")
    p.add_argument("--shard", default=d["shard"], help="i/n: do the i-th of n shards (0-based)")
    p.add_argument(
        "--split-lists",
        default=d["split_lists"],
        help="folder with train.txt/val.txt/test.txt (default: lists in --motions, "
        "else AMASS's recommended split)",
    )
    p.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        default=d["progress"],
        help="no progress bar",
    )
    p.set_defaults(func=_run)


def options_from_args(args: argparse.Namespace) -> SynthOptions:
    """The parsed command line as :class:`SynthOptions` (which checks every value)."""
    return SynthOptions.from_mapping(vars(args))


def _run(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    report = synthesize_dataset(options)
    m = report.manifest
    splits = ", ".join(
        f"{k} {v['sequences']} seq / {v['frames']} frames" for k, v in m.splits().items()
    )
    state = (
        "up to date"
        if report.up_to_date
        else (f"{report.made} made, {report.reused} reused, {len(report.skipped)} skipped")
    )
    print(f"{args.out}: {splits} ({state}; config {m.config_hash[:12]})", file=sys.stderr)
    return 0


# ------------------------------------------------------------------------------- Hydra twin
def hydra_node() -> dict[str, Any]:
    """The Hydra config of the synthesis app built from :class:`SynthOptions`' defaults.

    The marker set and realism preset are Hydra config groups (so ``markers=rbm_a`` or
    ``realism.occlusion.rate=…`` work on the command line); their default names come from the
    dataclass too. ``motions`` is required (``???``) and ``out`` defaults to the run folder.
    """
    values = SynthOptions.defaults()
    markers, realism = values.pop("markers"), values.pop("realism")
    return {
        "defaults": [{"/markers": markers}, {"/realism": realism}, "_self_"],
        "motions": "???",
        "out": None,
        **values,
    }


def register_configs() -> None:
    """Register the synthesis options (built from :class:`SynthOptions`' defaults) with Hydra's
    ConfigStore as ``data_prep/synth_options``, which ``data_prep/synthesize.yaml`` extends."""
    from hydra.core.config_store import ConfigStore  # Hydra only for this entry point

    ConfigStore.instance().store(
        group="data_prep", name="synth_options", node=hydra_node(), package="_global_"
    )


def synthesize(cfg: Any, output_dir: str | Path) -> dict:
    """Run the synthesis the composed Hydra configuration ``cfg`` describes; returns the dataset
    summary (also saved as ``output_dir/dataset_info.json``).

    Raises:
        ConfigError: a bad value (from :class:`SynthOptions`, naming the key).
    """
    output_dir = Path(output_dir)
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    values["out"] = values.get("out") or output_dir / "dataset"
    options = SynthOptions.from_mapping(values)
    synthesize_dataset(options)
    info = dataset_info(options.out)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "dataset_info.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


def _hydra_run(cfg: Any) -> None:
    """Synthesise as ``cfg`` says; print the summary as JSON, or one error line and the error's
    exit status (:mod:`rbmcap.errors`)."""
    from hydra.core.hydra_config import HydraConfig  # Hydra only for this entry point

    try:
        info = synthesize(cfg, HydraConfig.get().runtime.output_dir)
    except USER_ERRORS as exc:
        message, status = user_error(exc)
        print(f"synthesize: error: {message}", file=sys.stderr)
        sys.exit(status)
    print(json.dumps(info))


def hydra_main() -> None:
    """The ``rbmcap-synthesize`` command: Hydra parses the command line (overrides, ``-m``
    sweeps) and runs :func:`_hydra_run` once per configuration."""
    import hydra  # the rbmcap command imports this module and starts without Hydra

    register_configs()
    config = f"pkg://{HYDRA_CONFIG_MODULE}"
    hydra.main(version_base="1.3", config_path=config, config_name="data_prep/synthesize")(
        _hydra_run
    )()
