"""Entry point of the ``rbmcap`` command.

Each area registers its sub-commands from its own module (``rbmcap.cli.<area>``, a function
``register(subparsers)`` that sets ``func`` on its parsers). Library errors become one line on
stderr and the exit status of their class (:mod:`rbmcap.errors`: 2 usage, 3 input format,
4 model, 5 data, 130 interrupted); nothing prints a traceback for a user mistake. SIGTERM (a
cluster's pre-emption, ``kill``) stops the command as Ctrl-C does, so that files being written
are removed rather than left half-written.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import signal
import sys
import threading
import warnings
from types import FrameType

import rbmcap.cli
from rbmcap.errors import EXIT_INTERRUPTED, USER_ERRORS, user_error

AREAS = ("body", "motion", "synth", "dataset", "baseline", "eval", "bench", "demo")
"""Command modules listed first, in this order; any other module of ``rbmcap.cli`` with a
``register`` function follows, alphabetically (a new command needs only its own module)."""


def command_modules() -> list[str]:
    """Names of the modules under ``rbmcap.cli`` that register sub-commands, in help order."""
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


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("WANDB_MODE", "disabled")
    parser = build_parser()
    args = parser.parse_args(argv)
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminate) if in_main else None
    formatting = warnings.formatwarning
    warnings.formatwarning = _one_line
    try:
        code = args.func(args)
    except USER_ERRORS as exc:
        message, status = user_error(exc)
        print(f"rbmcap: error: {message}", file=sys.stderr)
        return status
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading
        sys.stderr.close()
        return 141
    except KeyboardInterrupt:
        print("rbmcap: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        warnings.formatwarning = formatting
        if in_main:
            signal.signal(signal.SIGTERM, previous)
    return int(code or 0)


def _one_line(message, category, filename, lineno, line=None) -> str:
    """A warning as the command line prints it: one line, no source."""
    return f"rbmcap: warning: {message}\n"


if __name__ == "__main__":
    sys.exit(main())
