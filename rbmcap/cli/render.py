"""``rbmcap render``: truth, network, baseline (and hybrid) side by side, with the plates.

Every option is a field of :class:`rbmcap.render.RenderOptions` and defaults to it::

    rbmcap render outputs/eval --out worst.gif            # the network's worst sequence
    rbmcap render outputs/eval --sequence 'walk*' --out clip.mp4
    rbmcap render outputs/eval --frame 40 --out still.png
    rbmcap render a.npz b.npz --out cmp.gif               # motions side by side, no plates
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rbmcap.render.render_options import RenderOptions, defaults


def register(sub: argparse._SubParsersAction) -> None:
    d = defaults()
    p = sub.add_parser(
        "render",
        help="draw methods side by side with the plates (GIF, MP4 or a PNG still)",
        description="Draw the truth, the network, the baseline (and the hybrid) side by side, "
        "with the plates they saw: a GIF or MP4 animation, or a PNG still of one frame.",
    )
    p.set_defaults(**d)
    p.add_argument("inputs", nargs="+", help="an `rbmcap eval` output folder, or motion .npz files")
    p.add_argument("--out", required=True, type=Path, help=".gif or .mp4 animation, or .png still")
    p.add_argument("--sequence", help="the eval's sequence, name or glob (default: the worst)")
    p.add_argument("--methods", help="method keys after the truth, comma-separated (default all)")
    p.add_argument("--frame", type=int, help="the frame of a .png still (default 0)")
    p.add_argument(
        "--fps", type=float, help=f"pictures per second of motion (default {d['fps']:g})"
    )
    p.add_argument("--max-frames", type=int, help=f"pictures at most (default {d['max_frames']})")
    p.add_argument("--no-mesh", dest="mesh", action="store_false", help="skeletons only (faster)")
    p.add_argument("--body", help="body model path or 'standin' (default: the evaluation's)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    # start-up: matplotlib adds about 0.25 s to every command (docs/benchmarks.md)
    from rbmcap.render.clip import render

    fields = [f.name for f in dataclasses.fields(RenderOptions)]
    path = render(RenderOptions(**{name: getattr(args, name) for name in fields}))
    print(f"wrote {path}")
    return 0
