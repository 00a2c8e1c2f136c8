"""``rbmcap body ...``: build, convert, inspect and render body models."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from rbmcap.body import convert_model, load_body_model
from rbmcap.body.poses import stride_pose
from rbmcap.body.standin.build import write_standin
from rbmcap.cli.output import print_mapping
from rbmcap.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("body", help="body models: build the stand-in, convert, inspect, render")
    bsub = p.add_subparsers(dest="body_command", metavar="ACTION", required=True)

    b = bsub.add_parser("build-standin", help="write the open stand-in body (SMPL format)")
    b.add_argument("--out", required=True, type=Path, help="output folder")
    b.add_argument("--gender", choices=["neutral", "male", "female", "all"], default="all")
    b.set_defaults(func=_build)

    c = bsub.add_parser("convert", help="convert an official .pkl (chumpy) to a plain .npz")
    c.add_argument("model", type=Path)
    c.add_argument("--out", required=True, type=Path)
    c.set_defaults(func=_convert)

    i = bsub.add_parser("info", help="describe a body model")
    i.add_argument("model", help="'standin' or a model file/folder")
    i.add_argument("--gender", default="neutral")
    i.add_argument("--json", action="store_true", help="print one JSON object")
    i.set_defaults(func=_info)

    r = bsub.add_parser("render", help="render the body at rest and in a sample pose (PNG)")
    r.add_argument("--model", default="standin", help="'standin' or a model file/folder")
    r.add_argument("--gender", default="neutral")
    r.add_argument("--out", required=True, type=Path, help="output .png")
    r.set_defaults(func=_render)


def _build(args) -> int:
    genders = ("neutral", "male", "female") if args.gender == "all" else (args.gender,)
    for path in write_standin(args.out, genders):
        print(path)
    return 0


def _convert(args) -> int:
    print(convert_model(args.model, args.out))
    return 0


def _info(args) -> int:
    body = load_body_model(args.model, gender=args.gender)
    info = {
        "kind": body.kind,
        "num_vertices": body.num_vertices,
        "num_faces": int(body.faces.shape[0]),
        "num_joints": body.num_model_joints,
        "num_betas": body.num_betas,
        "gender": body.gender,
        "source": body.source,
    }
    print_mapping(info, args.json)
    return 0


def _render(args) -> int:
    # start-up: matplotlib adds about 0.25 s to every command (docs/benchmarks.md)
    from rbmcap.body.mesh_pictures import render_meshes

    if args.out.suffix.lower() != ".png":
        raise ConfigError(f"{args.out}: output must be a .png file")
    body = load_body_model(args.model, gender=args.gender)
    faces = body.faces.numpy()
    with torch.no_grad():
        rest = body(torch.zeros(24, 3)).vertices.numpy()
        posed = body(torch.as_tensor(stride_pose(), dtype=torch.float32)).vertices.numpy()
    render_meshes(
        [(rest, faces), (posed, faces), (posed, faces)],
        args.out,
        titles=["rest (front)", "stride (front)", "stride (three-quarter)"],
        views=["front", "front", "three_quarter"],
    )
    print(f"wrote {args.out} ({body.identity}: {body.num_vertices} vertices)")
    return 0
