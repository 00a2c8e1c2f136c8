"""``rbmcap eval-capture MOTION.npz CAPTURE.npz [--reference plug-in-gait] [--body BODY]
[--no-floor] [--floor-iterations N] [--prior prior.npz] [--json]``: a motion inferred from a
capture against the joint centres the capture carries (:mod:`rbmcap.evaluation.reference`).

``rbmcap eval-capture MOTION.npz CAPTURE.c3d --angles [--convention plug-in-gait|isb]
[--png cycles.png] [--static STATIC.npz --static-motion STATIC_MOTION.npz] [--json]``: its
clinical angles and gait events against those the C3D
carries (:mod:`rbmcap.evaluation.capture_angles`)."""

from __future__ import annotations

import argparse
import json
import math

from rbmcap.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval-capture",
        help="distance of a motion's joints to a capture's reference joint centres",
        description="Measure a motion (`rbmcap infer`'s .npz) against the reference joint "
        "centres its capture carries as labelled points (Plug-in Gait's knees, ankles, elbows, "
        "wrists), with the floor (SMPL fitted to those centres directly) and segment lengths.",
    )
    p.add_argument("motion", help="motion .npz (what `rbmcap infer` writes)")
    p.add_argument("capture", help="capture .npz (`rbmcap import`), with the reference points")
    p.add_argument(
        "--reference", default="plug-in-gait", help="reference name or YAML (default: plug-in-gait)"
    )
    p.add_argument(
        "--body", default=None, help="body model (default: the stand-in of the motion's gender)"
    )
    p.add_argument("--no-floor", action="store_true", help="skip the floor fit")
    p.add_argument(
        "--floor-iterations",
        type=int,
        default=None,
        help="L-BFGS iterations of the floor fit (default 1000)",
    )
    p.add_argument(
        "--prior", default=None, help="floor fit's pose prior .npz (default: the shipped one)"
    )
    p.add_argument(
        "--angles",
        action="store_true",
        help="compare clinical joint angles and gait events with the C3D's own (CAPTURE: .c3d)",
    )
    p.add_argument(
        "--convention", default="plug-in-gait", help="with --angles: plug-in-gait (default) or isb"
    )
    p.add_argument("--png", default=None, help="with --angles: write the gait-cycle curves here")
    p.add_argument(
        "--static",
        default=None,
        help="with --angles: static capture .npz with the subject's markers (frames from them)",
    )
    p.add_argument(
        "--static-motion", default=None, help="with --static: that static inferred (.npz)"
    )
    p.add_argument(
        "--calib",
        default=None,
        help="with --angles: calibration YAML whose joint axes, measured from the plates' "
        "motion, give the limb segments' flexion axes (no static needed)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_eval_capture)


def _eval_capture(args: argparse.Namespace) -> int:
    # start-up: the library loads torch, only when the command runs (not for --help)
    from rbmcap.evaluation.reference import evaluate_against_reference  # (see above)
    from rbmcap.io.capture import Capture  # (see above)
    from rbmcap.motion.smpl_motion import read_motion  # (see above)

    if args.floor_iterations is not None and args.floor_iterations < 1:
        raise ConfigError(f"--floor-iterations must be ≥ 1, got {args.floor_iterations}")
    motion = read_motion(args.motion)
    body = args.body  # a name: the library loads it (default the stand-in of the gender)
    if args.angles or args.png:
        return _eval_angles(args, motion, body)
    capture = Capture.load(args.capture)
    report = evaluate_against_reference(
        motion,
        capture,
        args.reference,
        body=body,
        floor=not args.no_floor,
        prior=args.prior,
        floor_iterations=args.floor_iterations,
    )
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        print(_table(report))
    return 0


def _eval_angles(args: argparse.Namespace, motion, body) -> int:
    # start-up: the library loads torch, only when the command runs (not for --help)
    from rbmcap.evaluation.capture_angles import evaluate_capture_angles

    if not args.angles:
        raise ConfigError("--png draws the angles' gait cycles: add --angles")
    if not str(args.capture).lower().endswith(".c3d"):
        raise ConfigError(f"{args.capture}: --angles reads the angles a C3D carries: pass the .c3d")
    report = evaluate_capture_angles(
        motion,
        args.capture,
        body,
        args.convention,
        args.png,
        static=args.static,
        static_motion=args.static_motion,
        calib=args.calib,
    )
    out = report.to_dict()
    print(json.dumps(out) if args.json else _angles_table(out))
    return 0


def _angles_table(out: dict) -> str:
    """The angle comparison, knee peaks and events as plain text."""
    lines = [f"{'angle':<22}{'component':<26}{'RMS':>7}{'-offset':>9}{'offset':>8}{'r':>7}"]
    for row in out["angles"]:
        lines.append(
            f"{row['name']:<22}{row['component']:<26}{row['rms']:>7.1f}"
            f"{row['rms_without_offset']:>9.1f}{row['offset']:>8.1f}{row['correlation']:>7.3f}"
        )
    for side, peaks in out["knee_swing_peaks"].items():
        cells = ", ".join(f"{a:.1f} vs {b:.1f}" for a, b in peaks) or "no full cycle"
        lines.append(f"knee peak flexion per cycle, {side} (motion vs capture): {cells}")
    for e in out["events"]:
        diff = "not found" if e["difference_ms"] is None else f"{e['difference_ms']:+.0f} ms"
        lines.append(f"event {e['side']:<5} {e['kind']:<11} {diff}")
    if out.get("png"):
        lines.append(f"wrote {out['png']}")
    return "\n".join(lines)


def _mm(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f}"


def _table(report) -> str:
    """The report as plain text: joints (mm), then segments (m)."""
    head = f"{'joint':<16}{'point':<8}{'frames':>7}{'motion mm':>11}{'floor mm':>10}"
    lines = [f"{report.reference}: {report.frames} frames", head]
    for joint, row in report.joints.items():
        lines.append(
            f"{joint:<16}{row['point']:<8}{row['frames']:>7}"
            f"{_mm(row['motion_mm']):>11}{_mm(row['floor_mm']):>10}"
        )
    lines.append(f"{'mean':<31}{_mm(report.mean_mm):>11}{_mm(report.floor_mean_mm):>10}")
    lines.append(f"{'segment':<16}{'ref m':>8}{'motion m':>10}{'ratio':>8}{'floor m':>9}")
    for seg, row in report.segments.items():
        floor = "-" if row["floor_m"] is None else f"{row['floor_m']:.3f}"
        lines.append(
            f"{seg:<16}{row['reference_m']:>8.3f}{row['motion_m']:>10.3f}"
            f"{row['ratio']:>8.3f}{floor:>9}"
        )
    return "\n".join(lines)
