"""``rbmcap import``: an export (Vicon, OptiTrack, C3D) → the capture file."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from rbmcap.io.formats import FORMATS, ROTATIONS
from rbmcap.io.importer import ImportOptions, import_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import",
        help="import a Vicon/OptiTrack/C3D export as a capture file",
        description=(
            "Read an export, optionally solve plates from marker clusters (--plates) and map "
            "names to a marker set (--map, --markers), and write the capture file (.npz)."
        ),
    )
    p.add_argument("file", help="the export (CSV or C3D)")
    p.add_argument("--format", default=None, choices=("auto", *FORMATS))
    p.add_argument(
        "--rotation",
        default=None,
        choices=ROTATIONS,
        help="Vicon RX/RY/RZ convention (default helical)",
    )
    p.add_argument("--angle-unit", default=None, choices=("deg", "rad"))
    p.add_argument(
        "--fps", type=float, default=None, help="frame rate to use instead of the file's"
    )
    p.add_argument("--plates", default=None, help="plates YAML: solve plates from marker points")
    p.add_argument("--map", default=None, help="name mapping YAML (capture name: plate name)")
    p.add_argument("--markers", default=None, help="marker set to map the plates into")
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="marker-set plates absent from the capture become invalid",
    )
    p.add_argument("--out", required=True, help="capture file to write (.npz)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    given = {
        "format": args.format,
        "rotation": args.rotation,
        "angle_unit": args.angle_unit,
        "fps": args.fps,
        "plates": args.plates,
        "mapping": args.map,
        "markers": args.markers,
    }
    options = replace(
        ImportOptions(),
        **{k: v for k, v in given.items() if v is not None},
        allow_missing=args.allow_missing,
        progress=sys.stderr.isatty(),
    )
    _, info = import_file(args.file, args.out, options)
    if args.json:
        print(json.dumps(info))
        return 0
    valid = ", ".join(f"{p['name']} {100 * p['valid_fraction']:.0f}%" for p in info["plates"])
    print(f"{args.out}: {info['format']}, {info['frames']} frames at {info['fps']:g} Hz; {valid}")
    return 0
