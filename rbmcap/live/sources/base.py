"""What a live source is: something that yields :class:`~rbmcap.live.frames.RigidBodyFrame` s.

A source is driven from the session's one thread (:mod:`rbmcap.live.session`): ``open()`` once,
then ``read(timeout)`` in a loop (``read(0.0)`` for what has already arrived), ``close()`` at the
end. When its connection
breaks (a TCP server gone, a socket error), ``read`` raises :class:`SourceLost`; the session then
closes it and opens it again with a growing back-off, counting reconnects. A UDP source whose
sender stops just returns ``None`` on timeout; a restarted sender shows as frame numbers that go
back, which the session reads as a restart.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from rbmcap.errors import DataError
from rbmcap.live.frames import RigidBodyFrame

LOOPBACK = "127.0.0.1"
"""The address every server and socket binds by default; serving other machines is explicit."""


class SourceLost(DataError):
    """A live source's connection ended or broke (the session reconnects with back-off)."""


@runtime_checkable
class Source(Protocol):
    """A live source of rigid-body frames.

    Attributes:
        name: what it is, for messages (e.g. ``natnet://127.0.0.1:1511``).
        fps: the frame rate the source states, Hz, or None where it states none (known after
            ``open``; a replay knows it from its file).
        finite: True when the source ends by itself (a replay without looping): a ``read``
            returning None after the end then raises :class:`EOFError` instead.
    """

    name: str
    fps: float | None
    finite: bool

    def open(self) -> None:
        """Connect (or bind). Raises :class:`SourceLost` when the other side cannot be reached
        (the session retries), :class:`~rbmcap.errors.ConfigError` for a bad address."""

    def read(self, timeout: float) -> RigidBodyFrame | None:
        """The next frame, or None when none arrived within ``timeout`` seconds.

        Raises :class:`SourceLost` when the connection broke; :class:`EOFError` when a finite
        source has no more frames."""

    def ready(self) -> None:
        """The session is set up and poses from the next frame on. A live source ignores it; a
        replay holds back its frames after the first until then, so none is lost to set-up."""

    def close(self) -> None:
        """Release sockets and threads; safe to call twice and after a failed ``open``."""
