"""``rbmcap infer CAPTURE.npz --out motion.npz [--method refine|network|hybrid|solver] [--ckpt CKPT]
[--calib calib.yaml] [--prior prior.npz] [--solver-config NAME] [--iterations N]
[--markers NAME] [--bvh out.bvh] [--glb out.glb] [--ply-every N [--ply-dir DIR]] [--model BODY]
[--json]``: SMPL from a capture."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

METHODS = ("refine", "network", "hybrid", "solver")
""":data:`rbmcap.inference.solve_capture.METHODS`, written out so that the command line reads it
without importing torch (a test keeps the two equal); the first is the default."""

DEFAULT_METHOD = METHODS[0]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "infer",
        help="infer an SMPL motion from a capture file and export it",
        description="Run a trained checkpoint, then optionally the optimisation solver from its "
        "answer, on a capture (.npz from `rbmcap import`) and write the motion and its exports.",
    )
    p.add_argument("capture", help="capture .npz written by `rbmcap import`")
    p.add_argument(
        "--method",
        default=DEFAULT_METHOD,
        choices=METHODS,
        help="refine (default: the network's answer, then a fixed number of solver sweeps; "
        "the most accurate for its time), network (alone), hybrid (the network's answer, "
        "then the solver until converged) or solver (the solver alone, until converged)",
    )
    p.add_argument(
        "--ckpt",
        default=None,
        help="checkpoint (.ckpt) or pretrained model name (required for every method but solver)",
    )
    p.add_argument("--calib", default=None, help="calibration YAML from `rbmcap calibrate`")
    p.add_argument("--out", required=True, help="motion .npz (AMASS style)")
    p.add_argument(
        "--prior", default=None, help="solver's pose prior .npz (default: the shipped one)"
    )
    p.add_argument(
        "--solver-config",
        default=None,
        help="solver configuration name or YAML (default: refine for refine, default for "
        "hybrid and solver)",
    )
    p.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="solver sweeps, ≥ 1 (default: the solver configuration's: the count for refine, "
        "at most 200 for hybrid and solver, which stop when converged)",
    )
    p.add_argument(
        "--markers",
        default=None,
        help="solver's marker set (default: the checkpoint's, else rbm14)",
    )
    p.add_argument("--bvh", default=None, help="also write a BVH (SMPL skeleton, Y up, cm)")
    p.add_argument("--glb", default=None, help="also write an animated skinned .glb")
    p.add_argument("--ply-every", type=int, default=None, help="write a .ply every N frames")
    p.add_argument(
        "--ply-dir",
        default=None,
        help="folder of the .ply files (default: next to --out, named <out stem>_ply)",
    )
    p.add_argument(
        "--model", default=None, help="body model (default: the checkpoint's, else the stand-in)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON summary object")
    p.set_defaults(func=_infer)


def _infer(args: argparse.Namespace) -> int:
    # start-up: the library loads torch, only when the command runs (not for --help)
    from rbmcap.calibrate import Calibration  # (see above)
    from rbmcap.inference import Predictor  # (see above)
    from rbmcap.inference.capture import checkpoint_body  # (see above)
    from rbmcap.inference.solve_capture import infer_capture  # (see above)
    from rbmcap.io.capture import Capture  # (see above)
    from rbmcap.io.exports.motion import export_motion  # (see above)

    capture = Capture.load(args.capture)
    predictor = None if args.ckpt is None else Predictor.from_checkpoint(args.ckpt)
    calib = None if args.calib is None else Calibration.load(args.calib)
    body_id = predictor.body_id if predictor is not None else "standin"
    body = checkpoint_body(body_id, args.model)
    answer = infer_capture(
        capture,
        calib,
        method=args.method,
        predictor=predictor,
        body=body,
        markers=args.markers,
        prior=args.prior,
        solver_config=args.solver_config,
        iterations=args.iterations,
        progress=sys.stderr.isatty(),
    )
    motion = answer.motion
    written = _export(args, motion, body, export_motion)
    summary = _summary(args, answer, predictor, calib, written)
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{motion.num_frames} frames at {motion.fps:g} Hz by {answer.method} "
            f"({1e3 * answer.seconds_per_frame:.1f} ms/frame) -> "
            + ", ".join(f"{k}: {v}" for k, v in summary["outputs"].items())
        )
    return 0


def _export(args: argparse.Namespace, motion, body, export_motion) -> dict:
    """Write the motion to ``--out`` and the exports asked for (``export_motion``:
    :func:`rbmcap.io.exports.motion.export_motion`); returns what was written."""
    ply_dir = args.ply_dir
    if args.ply_every is not None and ply_dir is None:
        ply_dir = Path(args.out).with_name(f"{Path(args.out).stem}_ply")
    return export_motion(
        motion,
        body,
        npz=args.out,
        bvh=args.bvh,
        glb=args.glb,
        ply_dir=ply_dir,
        ply_every=args.ply_every,
    )


def _summary(args: argparse.Namespace, answer, predictor, calib, written: dict) -> dict:
    """The run's summary: the capture, the method, the motion's frames and rate, the timing,
    the solver's settings, the model's rate, the marker set, the shape and the outputs."""
    motion = answer.motion
    return {
        "capture": args.capture,
        "method": answer.method,
        "frames": motion.num_frames,
        "fps": motion.fps,
        "seconds_per_frame": answer.seconds_per_frame,
        "iterations": answer.iterations,
        "solver_config": answer.solver_config,
        "converged": answer.converged,
        "unseen_frames": answer.unseen,
        "model_fps": None if predictor is None else predictor.fps,
        "marker_set": motion.source.get("marker_set"),
        "calibrated": calib is not None,
        "betas": [round(float(b), 4) for b in motion.betas],
        "outputs": {k: (len(v) if k == "ply" else str(v)) for k, v in written.items()},
    }
