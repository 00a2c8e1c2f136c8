"""``rbmcap infer --ckpt CKPT CAPTURE.npz [--calib calib.yaml] --out motion.npz [--bvh out.bvh]
[--glb out.glb] [--ply-every N [--ply-dir DIR]] [--model BODY] [--json]``: SMPL from a capture."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("infer", help="infer an SMPL motion from a capture file and export it",
                       description="Run a trained checkpoint on a capture (.npz from "
                       "`rbmcap import`) and write the motion and its exports.")  # fmt: skip
    p.add_argument("capture", help="capture .npz written by `rbmcap import`")
    p.add_argument("--ckpt", required=True, help="checkpoint (.ckpt) or pretrained model name")
    p.add_argument("--calib", default=None, help="calibration YAML from `rbmcap calibrate`")
    p.add_argument("--out", required=True, help="motion .npz (AMASS style)")
    p.add_argument("--bvh", default=None, help="also write a BVH (SMPL skeleton, Y up, cm)")
    p.add_argument("--glb", default=None, help="also write an animated skinned .glb")
    p.add_argument("--ply-every", type=int, default=None, help="write a .ply every N frames")
    p.add_argument("--ply-dir", default=None, help="folder of the .ply files "
                   "(default: next to --out, named <out stem>_ply)")  # fmt: skip
    p.add_argument("--model", default=None, help="body model (default: the checkpoint's)")
    p.add_argument("--json", action="store_true", help="print one JSON summary object")
    p.set_defaults(func=_infer)


def _infer(args: argparse.Namespace) -> int:
    from rbmcap.inference import Predictor
    from rbmcap.inference.capture import checkpoint_body, model_fps
    from rbmcap.io.capture import Capture
    from rbmcap.io.export import export_motion

    capture = Capture.load(args.capture)
    predictor = Predictor.from_checkpoint(args.ckpt)
    calib = None
    if args.calib is not None:
        from rbmcap.calibrate import Calibration

        calib = Calibration.load(args.calib)
    motion = predictor.predict_capture(capture, calib, progress=sys.stderr.isatty())
    body = checkpoint_body(predictor.body_id, args.model)
    ply_dir = args.ply_dir
    if args.ply_every is not None and ply_dir is None:
        ply_dir = Path(args.out).with_name(f"{Path(args.out).stem}_ply")
    written = export_motion(motion, body, npz=args.out, bvh=args.bvh, glb=args.glb,
                            ply_dir=ply_dir, ply_every=args.ply_every)  # fmt: skip
    summary = {
        "capture": args.capture, "frames": motion.num_frames, "fps": motion.fps,
        "model_fps": model_fps(predictor), "marker_set": predictor.marker_set,
        "calibrated": calib is not None, "betas": [round(float(b), 4) for b in motion.betas],
        "outputs": {k: (len(v) if k == "ply" else str(v)) for k, v in written.items()},
    }  # fmt: skip
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"{motion.num_frames} frames at {motion.fps:g} Hz -> "
              + ", ".join(f"{k}: {v}" for k, v in summary["outputs"].items()))  # fmt: skip
    return 0
