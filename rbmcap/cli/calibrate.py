"""``rbmcap calibrate``: T-pose calibration of a capture file (design §8)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="calibrate the physical plates of a capture on its T-pose",
        description=(
            "Find the T-pose (the stillest 1 s window in the first 10 s, or --frames), estimate "
            "the subject's shape (unless --betas), the alignment of the virtual T-pose and each "
            "plate's rotation and position offset; write them as a calibration YAML."
        ),
    )
    p.add_argument("capture", help="capture file (.npz, from `rbmcap import`)")
    p.add_argument("--out", required=True, help="calibration YAML to write")
    p.add_argument("--markers", default="rbm14", help="marker set name or YAML path")
    p.add_argument("--body", default="standin", help="'standin' or a model file/folder")
    p.add_argument("--frames", default=None, help="a:b, the T-pose frames [a, b) (0-based)")
    p.add_argument("--betas", default=None, help=".npz with a 'betas' array: the shape is given")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from rbmcap.calibrate.run import calibrate_file

    _, info = calibrate_file(
        args.capture, args.out, markers=args.markers, frames=args.frames, betas=args.betas,
        body=args.body,
    )  # fmt: skip
    if args.json:
        print(json.dumps(info))
        return 0
    a, b = info["frames"]
    print(f"T-pose frames [{a}, {b}); betas {'given' if info['betas_given'] else 'estimated'}")
    for name, p in info["plates"].items():
        angle, dist = p["rotation_offset_deg"], p["position_offset_norm_mm"]
        print(f"  {name:16s} {angle:7.2f} deg {dist:7.1f} mm")
    print(f"wrote {args.out}")
    return 0
