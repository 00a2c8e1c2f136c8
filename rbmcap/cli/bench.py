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
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    result = run_benchmark(args.name, quick=args.quick)
    print_mapping(result, args.json)
    return 0
