"""``rbmcap eval``: the network against the optimisation baseline and the hybrid."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a checkpoint (and the baselines) on a dataset split")
    p.add_argument("--ckpt", required=True, type=Path, help="checkpoint written by train.py")
    p.add_argument("--data", required=True, type=Path, help="dataset folder (rbmcap synth)")
    p.add_argument("--split", default="test")
    p.add_argument("--baseline", action="store_true", help="also run the 6-DoF optimisation")
    p.add_argument("--hybrid", action="store_true", help="also run network + optimisation")
    p.add_argument(
        "--point-data",
        type=Path,
        default=None,
        help="a point-marker dataset (e.g. moshpp53) of the same motions: run the "
        "point-marker optimisation on it",
    )
    p.add_argument(
        "--prior",
        type=Path,
        default=None,
        help="pose prior .npz (default: fitted on the data's train split)",
    )
    p.add_argument("--solver-config", default="default", help="conf/baseline name or YAML path")
    p.add_argument("--hybrid-config", default="hybrid", help="conf/baseline name or YAML path")
    p.add_argument(
        "--hybrid-fraction",
        type=float,
        default=0.2,
        help="with --baseline: the hybrid gets the iterations that fit in this fraction of the "
        "baseline's converged time (the method's claim: a fifth); 0: the hybrid config's",
    )
    p.add_argument(
        "--hybrid-start-error",
        type=float,
        nargs="+",
        default=[],
        metavar="F",
        help="with --hybrid: also run it, same budget, from oracle starts with F times the "
        "network's error (truth + F·(network − truth)): what network the hybrid claim needs",
    )
    p.add_argument("--point-config", default="points", help="conf/baseline name or YAML path")
    p.add_argument("--body", default=None, help="body model path (default: the data's stand-in)")
    p.add_argument("--max-frames", type=int, default=None, help="frames to evaluate at most")
    p.add_argument(
        "--frames-per-sequence",
        type=int,
        default=None,
        help="evaluate only each sequence's first N frames (a quick look at every sequence)",
    )
    p.add_argument("--no-vertices", action="store_true", help="skip V2V (a full mesh per frame)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--json", action="store_true", help="print the metrics object")
    p.set_defaults(func=_run)


def _run(args) -> int:
    from rbmcap.errors import ConfigError
    from rbmcap.evaluation import EvalOptions, evaluate
    from rbmcap.evaluation.report import write_report

    for flag, value in (("--max-frames", args.max_frames),
                        ("--frames-per-sequence", args.frames_per_sequence)):  # fmt: skip
        if value is not None and value <= 0:
            raise ConfigError(f"{flag} {value}: must be positive")
    if not 0 <= args.hybrid_fraction <= 1:
        raise ConfigError(f"--hybrid-fraction {args.hybrid_fraction}: expected 0 … 1")
    if args.hybrid_start_error and not args.hybrid:
        raise ConfigError("--hybrid-start-error needs --hybrid")
    if any(f < 0 for f in args.hybrid_start_error):
        raise ConfigError(f"--hybrid-start-error {args.hybrid_start_error}: must be ≥ 0")
    if not args.json:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    opts = EvalOptions(
        ckpt=args.ckpt,
        data=args.data,
        split=args.split,
        baseline=args.baseline,
        hybrid=args.hybrid,
        point_data=args.point_data,
        prior=args.prior,
        max_frames=args.max_frames,
        frames_per_sequence=args.frames_per_sequence,
        solver_config=args.solver_config,
        hybrid_config=args.hybrid_config,
        hybrid_fraction=args.hybrid_fraction,
        start_errors=tuple(dict.fromkeys(args.hybrid_start_error)),
        point_config=args.point_config,
        device=args.device,
        vertices=not args.no_vertices,
        body=args.body,
    )
    metrics = write_report(evaluate(opts), args.out)
    if args.json:
        print(json.dumps(metrics))
    else:
        print((args.out / "report.md").read_text())
        print(f"wrote {args.out}/report.md, metrics.json, per_sequence.csv and plots")
    return 0
