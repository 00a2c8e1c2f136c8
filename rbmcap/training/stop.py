"""A training run stopped by SIGTERM (a cluster's time limit or pre-emption, ``timeout``, ``kill``).

:func:`watch_sigterm` records the signal. While Lightning trains it adds its own handler beside
this one and stops after the current batch; before and after that (making the data, say) the
signal stops the run at once. Data-loading workers in the same process group get the signal too
and die, which torch reports as an error of its own, raised from its SIGCHLD handler wherever the
main process happens to be. So the handler here replaces torch's SIGCHLD handler with one that
does nothing (the workers' deaths are expected from then on), :func:`stopped_by_sigterm` does so
again once Lightning's teardown has put torch's handler back, and tells the command line that
whatever ended the run came from the signal (waiting a moment for it when a worker's death was
reported first), so it prints one line instead of a traceback. The replacement is a Python
callable, not ``SIG_DFL``: a SIGCHLD that arrived while torch's handler was installed but runs
only after the swap would otherwise be reported by Python as "Signal 17 ignored due to race
condition", with a traceback.
"""

from __future__ import annotations

import signal
import sys
import time
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
        signal.signal(signal.SIGCHLD, _child_exited)  # torch's raises on a worker's death
        if callable(previous):
            previous(signum, frame)
        lightning_idle = signal.getsignal(signal.SIGTERM) is handler
        if lightning_idle and sys.exc_info()[1] is None:  # not while an error is being handled
            raise Terminated

    signal.signal(signal.SIGTERM, handler)


def _child_exited(signum: int, frame: FrameType | None) -> None:
    """SIGCHLD once the run is stopping: a data-loading worker's death is expected."""


def terminated() -> bool:
    """Whether SIGTERM arrived since :func:`watch_sigterm`."""
    return _STATE["signal"] is not None


def stopped_by_sigterm(wait_s: float = 0.5) -> bool:
    """Whether SIGTERM stopped the run: it arrived, or arrives within ``wait_s`` seconds (the
    group's signal can kill a data-loading worker, and torch report it, before the main
    process's own handler has run). Called on the way out of a run: it gives SIGCHLD the quiet
    handler first, since Lightning's teardown puts torch's handler back, which raises
    again when any worker exits while one killed by the signal is still on its list."""
    signal.signal(signal.SIGCHLD, _child_exited)
    deadline = time.monotonic() + wait_s
    while not terminated() and time.monotonic() < deadline:
        time.sleep(0.01)
    return terminated()
