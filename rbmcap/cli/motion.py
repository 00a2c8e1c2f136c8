"""``rbmcap motion ...``: convert, generate, inspect and draw SMPL motions.

* ``from-bvh FILE --out OUT.npz [--joint-map YAML] [--fps 60]``
* ``from-bvh DIR --out MOTIONS_DIR [--joint-map NAME] [--split SUBJECT=SPLIT ...]
  [--workers W]`` (a motions folder split by subject, added to any other sub-datasets already
  in MOTIONS_DIR)
* ``procedural --out DIR --num N --seed S [--kinds ...] [--fps 60] [--subjects K]
  [--shape-std 0.8] [--shape-clip 2] [--workers W]``
* ``info FILE [--json] [--model PATH]``
* ``render FILE --out anim.gif [--fps 15] [--max-frames 150]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rbmcap.body import load_body_model
from rbmcap.errors import ConfigError, DataError
from rbmcap.motion.folder import build_motion_folder
from rbmcap.motion.procedural import generate_library
from rbmcap.motion.quality import motion_info
from rbmcap.motion.retarget import bvh_to_motion
from rbmcap.motion.rigs import UnknownRigError, write_template
from rbmcap.motion.smpl_motion import read_motion


def register(sub: argparse._SubParsersAction) -> None:
    motion = sub.add_parser(
        "motion",
        help="SMPL motions: BVH import, procedural library, info, render",
        description="Work with SMPL motions (AMASS-style .npz files).",
    )
    cmds = motion.add_subparsers(dest="motion_command", metavar="SUBCOMMAND", required=True)

    _add_from_bvh(cmds)

    p = cmds.add_parser("procedural", help="write a seeded library of procedural motions")
    p.add_argument("--out", required=True, help="output folder (AMASS-like layout)")
    p.add_argument("--num", type=int, required=True, help="number of motions")
    p.add_argument("--seed", type=int, required=True, help="random seed")
    p.add_argument("--kinds", nargs="+", default=None, help="motion kinds (default: all)")
    p.add_argument(
        "--subjects",
        type=int,
        default=None,
        help="body shapes to spread the motions over (default num/4, at most 50)",
    )
    p.add_argument("--shape-std", type=float, default=0.8, help="betas ~ N(0, std²) (default 0.8)")
    p.add_argument(
        "--shape-clip", type=float, default=2.0, help="betas clipped to ±clip (default 2)"
    )
    p.add_argument("--fps", type=float, default=60.0, help="frame rate (default 60)")
    p.add_argument(
        "--workers", type=int, default=1, help="processes (the files are the same for any count)"
    )
    p.add_argument("--quiet", action="store_true", help="print only the summary line")
    p.set_defaults(func=_procedural)

    p = cmds.add_parser("info", help="summarise a motion file")
    p.add_argument("file", help="motion .npz (AMASS SMPL+H / SMPL-X or rbmcap)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--model", default=None, help="body model for the quality figures (default: the stand-in)"
    )
    p.set_defaults(func=_info)

    p = cmds.add_parser("render", help="draw a motion's skeleton as an animated GIF")
    p.add_argument("file", help="motion .npz")
    p.add_argument("--out", required=True, help="output .gif")
    p.add_argument("--fps", type=float, default=15.0, help="GIF frame rate (default 15)")
    p.add_argument("--max-frames", type=int, default=150, help="frame cap (default 150)")
    p.set_defaults(func=_render)


def _add_from_bvh(cmds: argparse._SubParsersAction) -> None:
    p = cmds.add_parser("from-bvh", help="retarget a BVH file (or a folder of them) to SMPL motion")
    p.add_argument("file", help="the .bvh file, or a folder of .bvh clips")
    p.add_argument(
        "--out",
        required=True,
        help="output .npz (AMASS style); for a folder, the motions folder to write or add to",
    )
    p.add_argument(
        "--joint-map",
        default="auto",
        help="joint map YAML, a name under conf/joint_maps, or auto (default): recognise the "
        "rig by its joint names; for an unknown rig a drafted map is written to fill in",
    )
    p.add_argument("--fps", type=float, default=60.0, help="output frame rate (default 60)")
    p.add_argument(
        "--floor",
        choices=("contacts", "constant", "bvh"),
        default="contacts",
        help="planted feet on the floor in every frame (contacts, default), on "
        "average (constant), or keep the file's ground plane (bvh)",
    )
    p.add_argument("--model", default=None, help="body model (default: the stand-in)")
    p.add_argument(
        "--split",
        action="append",
        default=[],
        metavar="SUBJECT=SPLIT",
        help="folder input: send a subject's clips to val or test (others train); repeatable, "
        "e.g. --split 2=test --split 3=val for shared/data/cmu-iclone",
    )
    p.add_argument(
        "--dataset", default=None, help="folder input: sub-dataset name (default: the folder's)"
    )
    p.add_argument(
        "--subject-pattern",
        default=None,
        metavar="REGEX",
        help="folder input: a regular expression whose (?P<subject>...) group names each "
        "clip's subject (the unit --split holds out), for clips that name no actor",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="folder input: processes (the files are the same for any count)",
    )
    p.set_defaults(func=_from_bvh)


def _body(spec: str | None, gender: str = "neutral"):
    if spec is None:
        return None

    return load_body_model(spec, gender=gender)


def _from_bvh(args: argparse.Namespace) -> int:
    try:
        if Path(args.file).is_dir():
            return _from_bvh_folder(args)
        motion = bvh_to_motion(
            args.file, args.joint_map, fps=args.fps, floor=args.floor, body=_body(args.model)
        )
    except UnknownRigError as exc:
        out = Path(args.out)
        folder = out if Path(args.file).is_dir() else out.parent
        path = write_template(exc, folder / f"{Path(exc.path).stem}.joint_map.yaml")
        raise DataError(
            f"{exc}; wrote a drafted joint map to check and fill in: {path} "
            f"(then pass --joint-map {path})"
        ) from None
    path = motion.save(args.out)
    print(f"{path}: {motion.num_frames} frames at {motion.fps:g} fps ({motion.duration_s:.1f} s)")
    return 0


def _from_bvh_folder(args: argparse.Namespace) -> int:
    splits = {}
    for item in args.split:
        subject, sep, split = item.partition("=")
        if not sep or not subject.strip():
            raise ConfigError(f"--split takes SUBJECT=SPLIT, got {item!r}")
        splits[subject.strip()] = split.strip()

    def progress(i: int, n: int, path) -> None:
        print(f"[{i + 1}/{n}] {path}", file=sys.stderr)

    lists = build_motion_folder(
        args.file,
        args.out,
        args.joint_map,
        splits=splits,
        dataset=args.dataset,
        fps=args.fps,
        floor=args.floor,
        body=_body(args.model),
        progress=progress,
        subject_pattern=args.subject_pattern,
        workers=args.workers,
    )
    counts = ", ".join(f"{len(v)} {k}" for k, v in lists.items())
    print(f"{args.out}: wrote {sum(map(len, lists.values()))} motions ({counts}) and splits/")
    return 0


def _procedural(args: argparse.Namespace) -> int:
    def progress(i: int, n: int, path) -> None:
        if not args.quiet:
            print(f"[{i + 1}/{n}] {path}", file=sys.stderr)

    paths = generate_library(
        args.out,
        args.num,
        args.seed,
        kinds=args.kinds,
        fps=args.fps,
        num_subjects=args.subjects,
        shape_std=args.shape_std,
        shape_clip=args.shape_clip,
        progress=progress,
        workers=args.workers,
    )
    print(f"{args.out}: wrote {len(paths)} motions and splits/{{train,val,test}}.txt")
    return 0


def _info(args: argparse.Namespace) -> int:
    motion = read_motion(args.file)
    info = motion_info(motion, body=_body(args.model, motion.gender))
    if args.json:
        print(json.dumps(info))
        return 0
    for key, value in info.items():
        if isinstance(value, float):
            value = f"{value:.3f}"
        elif key == "betas":
            value = " ".join(f"{b:.2f}" for b in value)
        print(f"{key}: {value}")
    return 0


def _render(args: argparse.Namespace) -> int:
    # start-up: matplotlib adds about 0.25 s to every command (docs/benchmarks.md)
    from rbmcap.motion.skeleton_animation import render_motion

    motion = read_motion(args.file)
    path = render_motion(motion, args.out, out_fps=args.fps, max_frames=args.max_frames)
    print(f"{path}: {motion.name}, {motion.duration_s:.1f} s")
    return 0
