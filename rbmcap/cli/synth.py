"""``rbmcap synth``: synthesise virtual RBM observations for a folder of motions."""

from __future__ import annotations

import argparse
import sys

from rbmcap.dataset import SynthOptions, synthesize_dataset
from rbmcap.dataset.options import GENDERS

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
