"""``rbmcap angles MOTION.npz --out angles.csv [--convention plug-in-gait|isb] [--body BODY]
[--json]``: a motion's clinical joint angles (:mod:`rbmcap.biomech.angles`) as CSV, and its
gait events (:mod:`rbmcap.biomech.events`) beside them (``angles.events.csv``)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


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
    p.add_argument("--json", action="store_true", help="print one JSON summary")
    p.set_defaults(func=_angles)


def _angles(args: argparse.Namespace) -> int:
    # start-up: the library loads torch, only when the command runs (not for --help)
    from rbmcap.biomech.angles import clinical_angles  # (see above)
    from rbmcap.biomech.events import detect_gait_events  # (see above)
    from rbmcap.body import load_body_model  # (see above)
    from rbmcap.io.gait_events import write_events_csv  # (see above)
    from rbmcap.motion.smpl_motion import read_motion  # (see above)

    motion = read_motion(args.motion)
    body = load_body_model(args.body or "standin", gender=motion.gender)
    table = clinical_angles(motion, body, args.convention)
    events = detect_gait_events(motion, body)
    out = Path(args.out)
    events_path = out.with_name(out.stem + ".events.csv")
    table.to_csv(out)
    write_events_csv(events_path, events)
    summary = {
        "angles": str(out),
        "events": str(events_path),
        "frames": table.num_frames,
        "fps": table.fps,
        "convention": table.convention,
        "progression": [round(float(v), 4) for v in table.progression],
        "sets": list(table.angles),
        "foot_strikes": sum(e.kind == "Foot Strike" for e in events),
        "foot_offs": sum(e.kind == "Foot Off" for e in events),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{motion.name}: {table.num_frames} frames, {len(table.angles)} angle sets "
            f"({table.convention}) -> {out}; {summary['foot_strikes']} foot strikes, "
            f"{summary['foot_offs']} foot offs -> {events_path}"
        )
    return 0
