"""Entry point of the ``rbmcap`` command.

Each area registers its sub-commands from its own module (``rbmcap.cli.<area>``, a function
``register(subparsers)`` that sets ``func`` on its parsers). Library errors become one line on
stderr and exit status 2; nothing prints a traceback for a user mistake.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from rbmcap.errors import RBMCapError

AREAS = ("body", "motion", "synth", "dataset", "baseline", "eval", "bench", "demo")
"""Command modules listed first, in this order; any other module of ``rbmcap.cli`` with a
``register`` function follows, alphabetically (a new command needs only its own module)."""


def command_modules() -> list[str]:
    """Names of the modules under ``rbmcap.cli`` that register sub-commands, in help order."""
    import pkgutil

    import rbmcap.cli

    found = {m.name for m in pkgutil.iter_modules(rbmcap.cli.__path__)} - {"main", "__init__"}
    return [a for a in AREAS if a in found] + sorted(found - set(AREAS))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rbmcap", description="Rigid Body Marker motion capture to SMPL."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in command_modules():
        module = importlib.import_module(f"rbmcap.cli.{name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("WANDB_MODE", "disabled")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except RBMCapError as exc:
        print(f"rbmcap: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"rbmcap: error: {exc.filename or exc}: no such file", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        sys.stderr.close()
        return 141
    except KeyboardInterrupt:
        print("rbmcap: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
