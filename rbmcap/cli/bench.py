"""``rbmcap bench NAME [--json]``."""

from __future__ import annotations

import argparse

from rbmcap.bench import BENCHMARKS, run_benchmark
from rbmcap.cli.output import print_mapping


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run a benchmark", description="Run a named benchmark.")
    p.add_argument("name", help="one of: " + ", ".join(sorted(BENCHMARKS)))
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (for smoke tests)")
    p.add_argument("--device", help="torch device (train, baseline; default cpu), e.g. cuda")
    p.add_argument("--experiment", help="train: time this experiment's model (e.g. paper_rbm14)")
    p.add_argument(
        "--batches",
        type=lambda text: tuple(int(x) for x in text.split(",")),
        help="train: also time these batch sizes, e.g. 64,256",
    )
    p.add_argument("--data", help="refine: a dataset whose test split holds the real sets")
    p.add_argument(
        "--budgets",
        type=lambda text: tuple(float(x) for x in text.split(",")),
        help="refine: the budgets in ms per frame, e.g. 0,2,4",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    given = {
        "device": args.device,
        "experiment": args.experiment,
        "batches": args.batches,
        "data": args.data,
        "budgets": args.budgets,
    }
    options = {k: v for k, v in given.items() if v is not None}
    result = run_benchmark(args.name, quick=args.quick, **options)
    print_mapping(result, args.json)
    return 0
