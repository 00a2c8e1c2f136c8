"""``rbmcap session SESSION_DIR [--out DIR] [--markers NAME] [--plates NAME] [--model NAME]
[--method NAME] [--export bvh|glb ...] [--workers N | --scheduler ADDRESS | --jobqueue KIND]
[--json]``: every trial of a session folder processed
(:mod:`rbmcap.session`), incrementally, with a report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

EXIT_SOME_FAILED = 1
"""The exit status when the run finished but some trials failed."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "session",
        help="process a session folder: import, calibrate, infer, angles, exports, a report",
        description="Process every trial of a session folder (C3D, Vicon or OptiTrack exports): "
        "import, calibrate per subject on its static, infer, clinical angles and gait events, "
        "the exports asked for, and an HTML report. A step whose inputs and settings have not "
        "changed is not redone; a failed trial is one line and the others go on (exit status 1 "
        "when some failed). What to run: session.yaml in the folder, or the defaults.",
    )
    p.add_argument("folder", help="the session folder")
    p.add_argument("--out", default=None, help="output folder (default: FOLDER/rbmcap)")
    p.add_argument("--markers", default=None, help="marker set (default: session.yaml's, rbm14)")
    p.add_argument("--plates", default=None, help="plate definitions to read plates from points")
    p.add_argument("--model", default=None, help="network (default standin-rbm14)")
    p.add_argument("--method", default=None, help="rbmcap infer's method (default refine)")
    p.add_argument(
        "--export", action="append", default=None, choices=("bvh", "glb"), help="also write"
    )
    p.add_argument(
        "--workers", type=int, default=None, help="trials in parallel on a local Dask cluster"
    )
    p.add_argument("--scheduler", default=None, help="a Dask scheduler's address instead")
    p.add_argument(
        "--jobqueue",
        default=None,
        choices=("slurm", "pbs", "sge"),
        help="workers as batch jobs (dask-jobqueue; options from session.yaml's cluster:)",
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=_session)


def _session(args: argparse.Namespace) -> int:
    # start-up: the library loads torch, only when the command runs (not for --help)
    from rbmcap.session import dask_mapper, load_session, run_session, write_report

    spec = load_session(
        args.folder,
        markers=args.markers,
        plates=args.plates,
        model=args.model,
        method=args.method,
        exports=args.export,
    )
    out = Path(args.out) if args.out else Path(args.folder) / "rbmcap"
    say = (lambda line: print(line, file=sys.stderr)) if args.json else print
    jobqueue = None
    if args.jobqueue or (spec.cluster and not args.workers and not args.scheduler):
        jobqueue = dict(spec.cluster or {}) | ({"kind": args.jobqueue} if args.jobqueue else {})
    with dask_mapper(args.workers, args.scheduler, jobqueue) as mapper:
        result = run_session(spec, out, say, mapper)
    report = write_report(result, out)
    if args.json:
        print(json.dumps(result.to_dict() | {"report": str(report)}))
    else:
        failed = len(result.failed)
        print(f"{len(result.trials)} trials, {failed} failed, {result.seconds:.1f} s -> {report}")
    return EXIT_SOME_FAILED if result.failed else 0
