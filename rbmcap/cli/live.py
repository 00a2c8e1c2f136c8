"""``rbmcap live SOURCE [--ckpt MODEL] [--subject NAME[:CALIB]]... [--calib CALIB] [--map MAP]
[--vmc [HOST:]PORT] [--udp-json [HOST:]PORT] [--view [[HOST:]PORT]] [--record OUT.npz]
[--bvh OUT.bvh] [--calibrate SECONDS --calib-out CALIB] [--duration S] [--frames N]
[--threads N] [--precision float32|bfloat16|int8] [--refine [SECONDS]] [--json]``:
rigid bodies streamed from a capture system (or a replayed take) into SMPL, live."""

from __future__ import annotations

import argparse
import json
import sys

from rbmcap.evaluation.options import PRECISIONS

DEFAULT_MODEL = "standin-rbm14-stream"
DEFAULT_REFINE_S = 0.003
"""``--refine`` without a value: what leaves a 120 Hz stream's frame its margin
(docs/live.md#live-refinement)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "live",
        help="stream rigid bodies from Motive (NatNet), QTM or a replayed take into SMPL",
        description="Receive rigid-body frames, pose each subject with a causal stream model "
        "and send the poses to the viewer, VMC (OSC), UDP/JSON and recordings. Ctrl-C or "
        "SIGTERM stops it cleanly (recordings are written). Every socket binds loopback unless "
        "told otherwise. See docs/live.md.",
    )
    p.add_argument("source", help="natnet://HOST[:PORT], qtm://HOST[:PORT] or replay:FILE")
    p.add_argument("--ckpt", default=DEFAULT_MODEL, help=f"model (default {DEFAULT_MODEL})")
    p.add_argument(
        "--backend",
        default="compiled",
        choices=("compiled", "trace", "eager"),
        help="stream step backend (default compiled: needs a C++ compiler, once per model)",
    )
    p.add_argument(
        "--precision",
        default=None,
        choices=PRECISIONS,
        help="the network's weights: float32 as trained, or narrower to stay in the core's "
        "cache (default: bfloat16 with the compiled backend, else float32; "
        "docs/live.md#a-step-that-stays-in-cache)",
    )
    _refine_options(p)
    _subject_options(p)
    _sink_options(p)
    _source_options(p)
    p.add_argument("--duration", type=float, default=None, help="stop after S seconds")
    p.add_argument("--frames", type=int, default=None, help="stop after N frames posed")
    p.add_argument(
        "--wait", type=float, default=None, help="give up when no frame came within S seconds"
    )
    p.add_argument(
        "--hot",
        action="store_true",
        help="keep the model warm between frames (lower latency; one core stays busy)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="torch threads while posing (default 1: more only stall on a busy machine)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON summary at the end")
    p.set_defaults(func=_live)


def _subject_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--subject",
        action="append",
        default=[],
        metavar="NAME[:CALIB]",
        help="a subject whose rigid bodies are named NAME_<plate> (repeat for several), with "
        "its calibration YAML",
    )
    p.add_argument("--calib", default=None, help="calibration YAML (one unnamed subject)")
    p.add_argument("--map", default=None, help="name mapping YAML {rigid body: plate}")
    p.add_argument(
        "--calibrate",
        type=float,
        default=None,
        metavar="SECONDS",
        help="record SECONDS first (any static pose or a short movement), calibrate, go on",
    )
    p.add_argument("--calib-out", default=None, help="where --calibrate writes (YAML)")


def _sink_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vmc", default=None, metavar="[HOST:]PORT", help="send VMC over OSC")
    p.add_argument("--udp-json", default=None, metavar="[HOST:]PORT", help="send JSON datagrams")
    p.add_argument(
        "--view",
        nargs="?",
        const="8080",
        default=None,
        metavar="[HOST:]PORT",
        help="serve the live browser viewer (default 127.0.0.1:8080)",
    )
    p.add_argument("--record", default=None, help="write the motion .npz when the session ends")
    p.add_argument("--bvh", default=None, help="write a BVH when the session ends")


def _source_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--multicast", default=None, help="NatNet multicast group (default unicast)")
    p.add_argument("--local", default="127.0.0.1", help="interface to receive on (NatNet)")
    p.add_argument("--data-port", type=int, default=1511, help="NatNet data port (1511)")
    p.add_argument("--up", choices=("y", "z"), default=None, help="the source's up axis")
    p.add_argument("--fps", type=float, default=None, help="the source's rate when it states none")
    p.add_argument("--rate", type=float, default=None, help="replay rate (default: the file's)")
    p.add_argument("--loop", action="store_true", help="replay again and again")
    p.add_argument("--plates", default=None, help="plate definitions for a replayed point file")


def _refine_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--refine",
        nargs="?",
        type=float,
        const=DEFAULT_REFINE_S,
        default=None,
        metavar="SECONDS",
        help="after each frame's network pose, solver steps for up to SECONDS (default "
        f"{DEFAULT_REFINE_S:g}, which fits a 120 Hz stream; docs/live.md#live-refinement)",
    )
    p.add_argument(
        "--solver-config",
        default="default",
        metavar="NAME|PATH",
        help="with --refine: the solver configuration of its objective (weights.hinge_sigma_deg > "
        "0 holds a calibration's hinges to their axes; docs/live.md#live-refinement)",
    )


def _live(args: argparse.Namespace) -> int:
    # The library loads torch and the model code: only when the command runs, not for --help.
    from rbmcap.live.pipeline import LivePipeline, LiveSetup, SinkOptions  # (see above)
    from rbmcap.live.session import LiveOptions  # (see above)
    from rbmcap.live.sources.address import SourceOptions, open_source  # (see above)

    setup = LiveSetup(
        ckpt=args.ckpt,
        subjects=tuple(args.subject),
        calib=args.calib,
        mapping=args.map,
        sinks=SinkOptions(
            vmc=args.vmc, udp_json=args.udp_json, view=args.view, record=args.record, bvh=args.bvh
        ),
        session=LiveOptions(
            backend=args.backend,
            fps=args.fps,
            duration=args.duration,
            max_frames=args.frames,
            wait_s=args.wait,
            hot=args.hot,
            refine=args.refine,
            refine_config=args.solver_config,
        ),
        calibrate_s=args.calibrate,
        calib_out=args.calib_out,
        precision=args.precision,
        **({} if args.threads is None else {"threads": args.threads}),
    )
    source = open_source(
        args.source,
        SourceOptions(
            multicast=args.multicast,
            local=args.local,
            data_port=args.data_port,
            up=args.up,
            rate=args.rate,
            loop=args.loop,
            plates=args.plates,
        ),
    )
    run = LivePipeline.build(source, setup)
    stats, interrupted = run.run()
    summary = run.summary(stats, interrupted)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        lat = summary["latency_p99_ms"]
        print(
            f"{summary['processed']} frames posed, {summary['dropped']} dropped, "
            f"{summary['lost']} lost on the network"
            + (f", latency p99 {lat:.2f} ms" if lat is not None else "")
            + ("; stopped" if interrupted else ""),
            file=sys.stderr if args.json else sys.stdout,
        )
    return 0
