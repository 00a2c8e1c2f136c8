"""One exception family for the whole library, with the command line's exit status for each.

Every error a user can cause (a missing file, a malformed export, a bad option, unusable numbers)
is raised as a subclass of :class:`RBMCapError`; the command-line tool prints it as one line on
stderr and exits with the class's :attr:`~RBMCapError.exit_code`. Anything else escaping the
library is a bug (Python's own exit status 1, with a traceback).

=========  =====================  ==========================================================
exit code  class                  meaning
=========  =====================  ==========================================================
2          :class:`ConfigError`   usage: an unknown or out-of-range option or configuration
                                  value (argparse's own usage errors exit 2 as well)
3          :class:`FormatError`   input format: a file is missing, unreadable or malformed
4          :class:`ModelError`    model: a body model or checkpoint cannot be found or used
5          :class:`DataError`     data: the content parses but cannot be used (NaN, empty,
                                  inconsistent, not a rotation)
130        :class:`Interrupted`   interrupted: Ctrl-C or SIGTERM; nothing half-written remains
=========  =====================  ==========================================================

Messages name where the problem is: ``FILE:LINE:COLUMN: what`` for text files, and
``FILE: sequence S, frame F: what`` for arrays (:func:`location` writes both forms).
"""

from __future__ import annotations

import os

EXIT_USAGE = 2
EXIT_FORMAT = 3
EXIT_MODEL = 4
EXIT_DATA = 5
EXIT_INTERRUPTED = 130


class RBMCapError(Exception):
    """Base class of every error rbmcap raises on purpose."""

    exit_code: int = 1


class ConfigError(RBMCapError):
    """A configuration value or command-line option is unknown, missing or out of range."""

    exit_code = EXIT_USAGE


class FormatError(RBMCapError):
    """A file is missing, unreadable, or its content is not what was expected (syntax, keys,
    shapes, column counts)."""

    exit_code = EXIT_FORMAT


class ModelError(RBMCapError):
    """A body model or a checkpoint cannot be found, loaded or used as asked."""

    exit_code = EXIT_MODEL


class DataError(RBMCapError):
    """Input data parses but is unusable: NaN or infinite values, no frames, inconsistent with
    other inputs, a matrix that is not a rotation, or a training run whose loss became NaN."""

    exit_code = EXIT_DATA


class Interrupted(RBMCapError):
    """The work was stopped from outside (Ctrl-C, SIGTERM) before it finished; every file it was
    writing was removed or left as it was before."""

    exit_code = EXIT_INTERRUPTED


def location(
    path: str | os.PathLike | None = None,
    line: int | None = None,
    column: int | None = None,
    *,
    sequence: str | int | None = None,
    frame: int | None = None,
) -> str:
    """Where a problem is, for the start of a message: ``path:line:column`` (1-based, the parts
    that are known) then ``, sequence S`` and ``, frame F`` (0-based frame index).

    >>> location("walk.csv", 12, 3)
    'walk.csv:12:3'
    >>> location("take.npz", sequence="walk", frame=40)
    "take.npz: sequence 'walk', frame 40"
    """
    parts = [str(path) if path is not None else ""]
    if line is not None:
        parts[0] += f":{line}"
        if column is not None:
            parts[0] += f":{column}"
    extra = []
    if sequence is not None:
        extra.append(
            f"sequence {sequence!r}" if isinstance(sequence, str) else f"sequence {sequence}"
        )
    if frame is not None:
        extra.append(f"frame {frame}")
    if extra:
        head = parts[0] + ": " if parts[0] else ""
        return head + ", ".join(extra)
    return parts[0]


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its class name when the message is empty): what a
    one-line error quotes of a lower-level exception it wraps.

    >>> first_line(ValueError("bad shape\\nmore detail"))
    'bad shape'
    >>> first_line(KeyError())
    'KeyError'
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


USER_ERRORS = (RBMCapError, FileNotFoundError)
"""What a command reports as one line and an exit status (:func:`user_error`); catch these."""


def user_error(exc: BaseException) -> tuple[str, int] | None:
    """``(one-line message, exit status)`` for an error a command reports without a traceback:
    an :class:`RBMCapError`, or a ``FileNotFoundError`` (a named input that is not there, exit
    3 as a :class:`FormatError`); None for anything else, which is a bug."""
    if isinstance(exc, RBMCapError):
        return str(exc), exc.exit_code
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename or exc}: no such file", EXIT_FORMAT
    return None
