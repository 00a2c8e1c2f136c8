"""``rbmcap angles MOTION.npz --out angles.csv [--convention plug-in-gait|isb] [--body BODY]
[--static STATIC.npz --static-motion STATIC_MOTION.npz] [--calib CALIB.yaml] [--json]``: a
motion's clinical joint
angles (:mod:`rbmcap.biomech.angles`) as CSV, and its
gait events (:mod:`rbmcap.biomech.events`) beside them (``angles.events.csv``)."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "angles",
        help="clinical joint angles and gait events of a motion, as CSV",
        description="Clinical joint angles (hip, knee, ankle, pelvis, foot progression, thorax, "
        "shoulder, elbow; degrees per frame) of an SMPL motion, from anatomical frames on its "
        "body, in Plug-in Gait's or the ISB's convention; its foot strikes and foot offs are "
        "written beside them.",
    )
    p.add_argument("motion", help="motion .npz (rbmcap, AMASS)")
    p.add_argument("--out", required=True, help="angles CSV; events go to OUT's stem + .events.csv")
    p.add_argument("--convention", default="plug-in-gait", help="plug-in-gait (default) or isb")
    p.add_argument(
        "--body", default=None, help="body model (default: the stand-in of the motion's gender)"
    )
    p.add_argument(
        "--static",
        default=None,
        help="static capture .npz with the subject's markers: frames from its landmarks",
    )
    p.add_argument(
        "--static-motion", default=None, help="with --static: that static inferred (.npz)"
    )
    p.add_argument(
        "--calib",
        default=None,
        help="calibration YAML whose joint axes, measured from the plates' motion, give the "
        "limb segments' flexion axes (no static needed)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON summary")
    p.set_defaults(func=_angles)


def _angles(args: argparse.Namespace) -> int:
    # start-up: the library loads torch, only when the command runs (not for --help)
    from rbmcap.evaluation.capture_angles import write_angles

    summary = write_angles(
        args.motion,
        args.out,
        args.convention,
        args.body,
        args.static,
        args.static_motion,
        calib=args.calib,
    )
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['name']}: {summary['frames']} frames, {len(summary['sets'])} angle sets "
            f"({summary['convention']}) -> {summary['angles']}; {summary['foot_strikes']} foot "
            f"strikes, {summary['foot_offs']} foot offs -> {summary['events']}"
        )
    return 0
