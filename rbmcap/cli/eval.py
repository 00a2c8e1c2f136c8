"""``rbmcap eval``: the network against the optimisation baseline, the hybrid and refinement.

Every option is a field of :class:`rbmcap.evaluation.EvalOptions` (``dest`` is the field's name)
and defaults to it; the checks are the dataclass's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
from pathlib import Path

from rbmcap.evaluation.options import (
    HYBRID_CLAIM_FRACTION,
    PRECISIONS,
    REFINE_DEFAULT,
    defaults,
)
from rbmcap.evaluation.wording import fraction_in_words


def register(sub: argparse._SubParsersAction) -> None:
    """The command's arguments. Long because each option is one ``add_argument`` call."""
    d = defaults()
    p = sub.add_parser("eval", help="evaluate a checkpoint (and the baselines) on a dataset split")
    p.set_defaults(**d)
    p.add_argument("--ckpt", required=True, type=Path, help="checkpoint written by train.py")
    p.add_argument("--data", required=True, type=Path, help="dataset folder (rbmcap synth)")
    p.add_argument("--split", help=f"split to evaluate (default {d['split']})")
    p.add_argument("--baseline", action="store_true", help="also run the 6-DoF optimisation")
    p.add_argument("--hybrid", action="store_true", help="also run network + optimisation")
    p.add_argument(
        "--refine",
        type=int,
        nargs="?",
        const=REFINE_DEFAULT,
        metavar="SWEEPS",
        help="also run refinement: the network's answer, then SWEEPS Levenberg–Marquardt "
        "sweeps of the solver's objective (default: the refine config's count)",
    )
    p.add_argument(
        "--point-data",
        type=Path,
        help="a point-marker dataset (e.g. moshpp53) of the same motions: run the "
        "point-marker optimisation on it",
    )
    p.add_argument(
        "--prior", type=Path, help="pose prior .npz (default: the one shipped with rbmcap)"
    )
    _solver_arguments(p, d)
    p.add_argument("--body", help="body model path (default: the data's stand-in)")
    p.add_argument("--max-frames", type=int, help="frames to evaluate at most")
    p.add_argument(
        "--frames-per-sequence",
        type=int,
        help="evaluate only each sequence's first N frames (a quick look at every sequence)",
    )
    p.add_argument(
        "--sequences",
        metavar="GLOB",
        help="evaluate only the sequences whose names match (e.g. 'cmu-iclone/*')",
    )
    p.add_argument(
        "--occlude",
        action="append",
        default=[],
        metavar="PLATE[,PLATE]",
        help="hide these plates for whole sequences (invalid in every frame, for every method) "
        "and report each method against every plate seen; repeat for more conditions "
        "(--occlude left_hand --occlude left_foot,right_foot)",
    )
    p.add_argument(
        "--no-vertices", dest="vertices", action="store_false", help="skip V2V (a mesh per frame)"
    )
    p.add_argument(
        "--angles",
        action="store_true",
        help="also compare every answer's clinical joint angles (Plug-in Gait) with the truth's: "
        "RMS per angle set and plane",
    )
    _network_arguments(p, d)
    p.add_argument("--out", required=True, type=Path, help="output folder")
    p.add_argument("--json", action="store_true", help="print the metrics object")
    p.add_argument(
        "--render-worst",
        action="store_true",
        help="also draw the network's worst sequence, every method side by side with the "
        "plates, as worst_<sequence>.gif beside the report (see rbmcap render)",
    )
    p.set_defaults(func=_run)


def _solver_arguments(p: argparse.ArgumentParser, d: dict) -> None:
    """The solvers' options: configs, iterations, the hybrid's budget and oracle starts."""
    for flag in ("solver", "hybrid", "refine", "point"):
        p.add_argument(
            f"--{flag}-config",
            help=f"conf/baseline name or YAML path (default {d[f'{flag}_config']})",
        )
    p.add_argument(
        "--solver-iterations",
        type=int,
        help="iterations of every solve without a planned budget (default: each config's)",
    )
    p.add_argument(
        "--hybrid-fraction",
        type=float,
        help="with --baseline: the hybrid gets the iterations that fit in this fraction of the "
        f"baseline's converged time (default {d['hybrid_fraction']:g}; the method's claim: "
        f"{fraction_in_words(HYBRID_CLAIM_FRACTION)}); 0: the hybrid config's",
    )
    p.add_argument(
        "--hybrid-start-error",
        dest="start_errors",
        type=float,
        nargs="+",
        metavar="F",
        help="with --hybrid: also run it, same budget, from oracle starts with F times the "
        "network's error (truth + F·(network − truth)): what network the hybrid claim needs",
    )


def _network_arguments(p: argparse.ArgumentParser, d: dict) -> None:
    p.add_argument(
        "--smoothing",
        type=float,
        metavar="FRAMES",
        help="σ of the network's smoothing over time, in frames (0: its raw answer; default: "
        "the predictor's, rbmcap.inference.smoothing)",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        help=f"the network's weights as a live stream may hold them (default {d['precision']}; "
        "bfloat16 and int8: a causal GRU)",
    )
    p.add_argument("--device", help=f"torch device (default {d['device']})")


def _run(args) -> int:
    # start-up: the evaluation loads torch, the predictor and the solver (seconds); every
    # `rbmcap` command builds this command's parser
    from rbmcap.evaluation import EvalOptions, evaluate
    from rbmcap.evaluation.report import write_report

    opts = EvalOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(EvalOptions)})
    if not args.json:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    metrics = write_report(evaluate(opts), args.out)
    clip = _render_worst(args.out) if args.render_worst else None
    if args.json:
        print(json.dumps(metrics))
    else:
        print((args.out / "report.md").read_text())
        print(f"wrote {args.out}/report.md, metrics.json, per_sequence.csv and plots")
        if clip is not None:
            print(f"wrote {clip}")
    return 0


def _render_worst(out: Path) -> Path:
    from rbmcap.render.worst import render_worst  # start-up: as in _run

    logging.getLogger(__name__).info("rendering the worst sequence")
    return render_worst(out)
