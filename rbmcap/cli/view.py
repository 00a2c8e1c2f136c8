"""``rbmcap view INPUT... [--sequence GLOB] [--truth MOTION] [--save scene.viser [--no-serve]]
[--host H] [--port P] [--no-browser]``: the browser viewer (:mod:`rbmcap.view`; needs the
``view`` extra, viser)."""

from __future__ import annotations

import argparse
import time

from rbmcap.errors import ConfigError
from rbmcap.view.layers import load_view
from rbmcap.view.recording import recording_paths, save_recording
from rbmcap.view.server import import_viser, open_in_browser, start_viewer


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "view",
        help="interactive 3D viewer in the browser (needs pip install 'rbmcap[view]')",
        description="Show motions, captures and evaluations in the browser: bodies, skeletons, "
        "plates, a timeline and the per-frame error against the truth.",
    )
    p.add_argument("inputs", nargs="+", help="motion / capture .npz files, eval output folders")
    p.add_argument(
        "--sequence",
        metavar="NAME_OR_GLOB",
        help="the eval sequence to show (default: the network's worst)",
    )
    p.add_argument("--truth", metavar="MOTION", help="a motion to compare the others against")
    p.add_argument("--model", help="body model path (default: the body each input names)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address (default 127.0.0.1; 0.0.0.0 serves other machines)",
    )
    p.add_argument("--port", type=int, default=8080, help="port (default 8080; 0: any free one)")
    p.add_argument(
        "--spread",
        type=float,
        default=0.0,
        metavar="METRES",
        help="bodies side by side, METRES apart (default 0: overlaid)",
    )
    p.add_argument("--no-browser", action="store_true", help="print the URL, open no browser")
    p.add_argument(
        "--save",
        metavar="SCENE.viser",
        help="also write the timeline as a recording (SCENE.viser + SCENE.html, "
        "which opens in a browser without Python)",
    )
    p.add_argument("--no-serve", action="store_true", help="with --save: write it and exit")
    p.set_defaults(func=_view)


def _view(args: argparse.Namespace) -> int:
    if args.no_serve and not args.save:
        raise ConfigError("--no-serve only makes sense with --save")
    if args.save:
        recording_paths(args.save)  # a bad name fails before any work
    import_viser()
    content = load_view(args.inputs, sequence=args.sequence, truth=args.truth)
    port = 0 if args.no_serve else args.port
    host = "127.0.0.1" if args.no_serve else args.host
    viewer = start_viewer(content, host=host, port=port, model=args.model, spread=args.spread)
    try:
        if args.save:
            for path in save_recording(viewer.scene, args.save):
                print(f"wrote {path}")
        if args.no_serve:
            return 0
        print(f"rbmcap view: {content.title} at {viewer.url} (Ctrl-C to stop)", flush=True)
        if not args.no_browser:
            open_in_browser(viewer.url)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    finally:
        viewer.close()
