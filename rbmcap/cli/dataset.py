"""``rbmcap dataset info|merge|verify``: inspect and combine synthesised datasets."""

from __future__ import annotations

import argparse
import json

from rbmcap.dataset import Manifest, RBMDataset, dataset_info, merge_datasets
from rbmcap.errors import DataError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dataset", help="inspect, merge or verify synthesised datasets")
    dsub = p.add_subparsers(dest="dataset_command", metavar="ACTION", required=True)

    info = dsub.add_parser("info", help="splits, marker set, realism, body model, config hash")
    info.add_argument("path", help="dataset folder")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.set_defaults(func=_info)

    merge = dsub.add_parser(
        "merge",
        help="merge shard outputs of `rbmcap synth --shard i/n`",
        description="Merge datasets made with one configuration (all n shards of a run) into "
        "one, byte-identical to the unsharded run.",
    )
    merge.add_argument("inputs", nargs="+", help="shard dataset folders")
    merge.add_argument("--out", required=True, help="merged dataset folder")
    merge.set_defaults(func=_merge)

    verify = dsub.add_parser("verify", help="recompute every sequence checksum")
    verify.add_argument("path", help="dataset folder")
    verify.set_defaults(func=_verify)


def _info(args: argparse.Namespace) -> int:
    info = dataset_info(args.path)
    if args.json:
        print(json.dumps(info))
        return 0
    print(f"{info['path']}: {info['sequences']} sequences, {info['frames']} frames")
    for split, d in info["splits"].items():
        print(f"  {split}: {d['sequences']} sequences, {d['frames']} frames")
    for key in ("marker_set", "num_markers", "realism", "body_model", "fps", "seed", "config_hash"):
        print(f"  {key}: {info[key]}")
    return 0


def _merge(args: argparse.Namespace) -> int:
    m = merge_datasets(args.inputs, args.out)
    print(f"{args.out}: merged {len(args.inputs)} datasets, {len(m.sequences)} sequences")
    return 0


def _verify(args: argparse.Namespace) -> int:
    bad = []
    for split in Manifest.load(args.path).splits():
        bad += [f"{split}/{name}" for name in RBMDataset(args.path, split).verify()]
    if bad:
        raise DataError(f"{args.path}: checksum mismatch in {len(bad)} sequence(s): {bad[:5]}")
    print(f"{args.path}: all checksums match")
    return 0
