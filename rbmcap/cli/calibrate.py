"""``rbmcap calibrate``: fit the physical plates of a session's captures to the virtual ones."""

from __future__ import annotations

import argparse
import json

from rbmcap.markers.markerset import DEFAULT_MARKERS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate",
        help="calibrate the physical plates of a session (a static of any pose and/or motion)",
        description=(
            "Fit the subject's shape (unless --betas), the pose of chosen frames and each "
            "plate's constant rotation and position offset over frames of one or more captures "
            "of a session (a static of any pose and length, and/or motion); check the result "
            "over the whole takes; write a calibration YAML. Nothing is written when the fit "
            "is implausible."
        ),
    )
    p.add_argument("captures", nargs="+", help="capture files (.npz, from `rbmcap import`)")
    p.add_argument("--out", required=True, help="calibration YAML to write")
    p.add_argument("--markers", default=DEFAULT_MARKERS, help="marker set name or YAML path")
    p.add_argument("--body", default="standin", help="'standin' or a model file/folder")
    p.add_argument(
        "--frames",
        action="append",
        default=None,
        metavar="SPEC",
        help="frames of one capture (repeat once per capture, in order): auto "
        "(chosen for variety), a:b (chosen within [a, b)) or i,j,k",
    )
    p.add_argument("--betas", default=None, help=".npz with a 'betas' array: the shape is given")
    p.add_argument("--prior", default=None, help="pose prior .npz (default: the shipped one)")
    p.add_argument(
        "--no-check", action="store_true", help="skip the residuals over the whole takes"
    )
    p.add_argument(
        "--tpose",
        action="store_true",
        help="quick start: one capture that begins with a still T-pose",
    )
    p.add_argument(
        "--no-joint-offsets",
        action="store_true",
        help="keep the body model's joints: no per-subject joint correction from the measured "
        "joint centres (docs/capture.md#2-calibrate)",
    )
    p.add_argument(
        "--joint-noise",
        choices=("shared", "measured"),  # functional.JOINT_NOISE, without importing torch here
        default="shared",
        help="how a take's frames count against the measured joint centres' noise: shared (one "
        "error for the whole take: safe where errors follow the pose) or measured (the "
        "residual's correlation over frames: tighter; docs/capture.md#2-calibrate)",
    )
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from rbmcap.calibrate import calibrate_files  # start-up: torch only when the command runs

    calib, info = calibrate_files(
        args.captures,
        args.out,
        markers=args.markers,
        frames=args.frames,
        betas=args.betas,
        body=args.body,
        prior=args.prior,
        check=not args.no_check,
        tpose=args.tpose,
        joint_offsets=not args.no_joint_offsets,
        joint_noise=args.joint_noise,
    )
    if args.json:
        print(json.dumps(info))
        return 0
    print(
        f"betas {'given' if info['betas_given'] else 'estimated'}: "
        + " ".join(f"{b:.2f}" for b in info["betas"])
    )
    if calib.report is not None:
        print(calib.report)
    else:
        for name, p in info["plates"].items():
            angle, dist = p["rotation_offset_deg"], p["position_offset_norm_mm"]
            print(f"  {name:16s} {angle:7.2f} deg {dist:7.1f} mm")
    print(f"wrote {args.out}")
    return 0
