"""``rbmcap export fbx MOTION.npz --out FILE.fbx [--blender PATH] [--body BODY] [--json]``: the
skinned body and motion as FBX through Blender (:mod:`rbmcap.io.exports.fbx`).

``rbmcap export opensim MOTION.npz --out DIR [--model gait.osim [--static STATIC.npz]
[--mass KG]] [--map gait2392] [--body BODY] [--json]``: a motion as OpenSim files, IK on a model
as it is or scaled to the subject (:mod:`rbmcap.io.opensim.export`)."""

from __future__ import annotations

import argparse

from rbmcap.cli.output import print_mapping


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a motion in another program's formats")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    o = actions.add_parser(
        "opensim",
        help="virtual markers (.trc) and coordinates (.mot) for OpenSim; IK with --model",
        description="Write DIR/markers.trc (virtual markers on the posed body under an OpenSim "
        "model's marker names, mm, Y up) and DIR/coordinates.mot (the SMPL motion's pelvis "
        "translation and joint rotations); with --model, run OpenSim's inverse kinematics on "
        "the markers into DIR/ik.mot (needs pip install 'rbmcap[opensim]'); with --static, "
        "scale the model to the subject first (OpenSim's ScaleTool on the static's virtual "
        "markers: DIR/static_markers.trc, DIR/scaled.osim) and run IK on the scaled model.",
    )
    o.add_argument("motion", help="motion .npz (what `rbmcap infer` writes)")
    o.add_argument("--out", required=True, help="output folder")
    o.add_argument("--model", default=None, help="OpenSim model (.osim) to run IK on")
    o.add_argument(
        "--static",
        default=None,
        help="the subject's static trial as a motion .npz (rbmcap infer): scale --model to it",
    )
    o.add_argument(
        "--mass", type=float, default=None, help="subject mass, kg (default: the model's)"
    )
    o.add_argument(
        "--map", default="gait2392", help="OpenSim marker map, name or YAML (default gait2392)"
    )
    o.add_argument(
        "--body", default=None, help="body model (default: the stand-in of the motion's gender)"
    )
    o.add_argument("--json", action="store_true", help="print one JSON object")
    o.set_defaults(func=_export_opensim)
    f = actions.add_parser(
        "fbx",
        help="the skinned body and its motion as FBX (through Blender)",
        description="Write the motion as an FBX file: the armature of the 24 SMPL joints, the "
        "body's mesh at the motion's shape with its skin weights, a key a frame; Y up, "
        "centimetres, the upright T pose as the bind pose. Blender writes it: --blender names "
        "a blender executable or a Python with the bpy wheel (default $RBMCAP_BLENDER, then "
        "blender on PATH).",
    )
    f.add_argument("motion", help="motion .npz (what `rbmcap infer` writes)")
    f.add_argument("--out", required=True, help="the .fbx to write")
    f.add_argument("--blender", default=None, help="blender, or a Python that imports bpy")
    f.add_argument(
        "--body", default=None, help="body model (default: the stand-in of the motion's gender)"
    )
    f.add_argument("--json", action="store_true", help="print one JSON object")
    f.set_defaults(func=_export_fbx)


def _export_opensim(args: argparse.Namespace) -> int:
    # start-up: the library loads torch, only when the command runs (not for --help)
    from rbmcap.io.opensim.export import export_opensim_file

    written = export_opensim_file(
        args.motion, args.out, args.model, args.map, args.body, args.static, args.mass
    )
    print_mapping(
        {k: v if isinstance(v, (int, float, dict)) else str(v) for k, v in written.items()},
        args.json,
    )
    return 0


def _export_fbx(args: argparse.Namespace) -> int:
    # start-up: the library loads torch, only when the command runs (not for --help)
    from rbmcap.io.exports.fbx import write_motion_fbx_file

    written = write_motion_fbx_file(args.motion, args.out, blender=args.blender, body=args.body)
    print_mapping(
        {k: v if isinstance(v, (int, float)) else str(v) for k, v in written.items()}, args.json
    )
    return 0
