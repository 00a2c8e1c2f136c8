"""A training run stopped by SIGTERM (a cluster's time limit or pre-emption, ``timeout``, ``kill``).

:func:`watch_sigterm` records the signal. While Lightning trains it adds its own handler beside
this one and stops after the current batch; before and after that (making the data, say) the
signal stops the run at once. Data-loading workers in the same process group get the signal too
and die, which torch reports as an error of its own: :func:`terminated` tells the command line
that whatever ended the run came from the signal, so it prints one line instead of a traceback.
"""

from __future__ import annotations

import signal
from types import FrameType

_STATE: dict[str, int | None] = {"signal": None}


class Terminated(BaseException):
    """Raised where SIGTERM arrives while Lightning is not training."""


def watch_sigterm() -> None:
    """Install the handler (in the main thread, once per run); it keeps any handler before it."""
    previous = signal.getsignal(signal.SIGTERM)
    _STATE["signal"] = None

    def handler(signum: int, frame: FrameType | None) -> None:
        _STATE["signal"] = signum
        if callable(previous):
            previous(signum, frame)
        if signal.getsignal(signal.SIGTERM) is handler:  # Lightning is not training now
            raise Terminated

    signal.signal(signal.SIGTERM, handler)


def terminated() -> bool:
    """Whether SIGTERM arrived since :func:`watch_sigterm`."""
    return _STATE["signal"] is not None
