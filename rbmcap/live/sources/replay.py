"""``replay:``: a recorded capture played back as a live source, frame by frame, in real time.

The capture is any file ``rbmcap import`` reads (a capture ``.npz``, a Vicon or Motive CSV, a
C3D with plate definitions given), already in rbmcap's conventions. Frames come out on a clock
at the capture's own rate or a given one (``rate``), each stamped with the moment it was due as
its arrival (``received``): a frame read late carries the wait in its latency, as a packet
waiting in a socket does. After the first frame (from which the session learns the
names) the replay waits for the session to be ready to pose (:meth:`ReplaySource.ready`), so no
frame is lost to set-up. ``loop`` starts again from the first frame (frame numbers keep
counting up, so a loop is not read as a restart). Demos, tests and offline checks of the live
path use it; with ``rate=inf`` frames come as fast as they are read.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

from rbmcap.errors import ConfigError
from rbmcap.io.capture import Capture
from rbmcap.io.importer import ImportOptions, import_capture
from rbmcap.live.frames import RigidBodyFrame


class ReplaySource:
    """A capture file as a live source (see the module docstring).

    Args:
        capture: a :class:`~rbmcap.io.capture.Capture`, or a path ``rbmcap import`` reads.
        rate: frames per second to play at (None: the capture's own rate; ``math.inf``: no
            waiting).
        loop: start again after the last frame instead of ending.
        plates: a plate-definitions YAML for files of labelled points (as ``rbmcap import``).
    """

    finite = True

    def __init__(self, capture, rate: float | None = None, loop: bool = False, plates=None):
        if not isinstance(capture, Capture):
            capture = _load(capture, plates)
        if rate is not None and not rate > 0:
            raise ConfigError(f"replay rate {rate!r}: expected a positive number of frames/s")
        self.capture = capture
        self.fps = float(capture.fps)
        self.rate = float(rate) if rate is not None else self.fps
        self.loop = bool(loop)
        self.finite = not self.loop
        self.name = f"replay:{capture.source or 'capture'}"
        self._names = tuple(capture.names)
        self._next = 0
        self._t0: float | None = None
        self._ready = threading.Event()

    def open(self) -> None:
        """Start the clock at the next frame (a reopened replay goes on where it was)."""
        self._t0 = None

    def ready(self) -> None:
        """The session is ready to pose: play on from the second frame (until then only the
        first frame is handed out, for the session to learn the names from)."""
        self._t0 = None
        self._ready.set()

    def read(self, timeout: float) -> RigidBodyFrame | None:
        """The next frame once its time has come (None if that is more than ``timeout`` s
        away); EOFError after the last frame unless looping. With ``rate=inf`` a frame comes on
        every read that may wait (``timeout > 0``) and none has come before it is asked for, so
        a reader that only takes frames already there (``timeout=0``) overtakes none."""
        cap, i = self.capture, self._next
        t = cap.num_frames
        if i >= t and not self.loop:
            raise EOFError
        if timeout <= 0 and not math.isfinite(self.rate):
            return None
        if i == 1 and not self._ready.wait(timeout):
            return None
        now = time.perf_counter()
        if self._t0 is None:
            self._t0 = now - i / self.rate if math.isfinite(self.rate) else now
        due = self._t0 + i / self.rate if math.isfinite(self.rate) else now
        if due - now > timeout:
            time.sleep(max(timeout, 0.0))
            return None
        _wait_until(due)
        k = i % t
        self._next = i + 1
        number = int(cap.frame_numbers[k]) + (i // t) * (int(cap.frame_numbers[-1]) + 1)
        return RigidBodyFrame(
            frame=number,
            timestamp=i / self.fps,
            received=due,
            names=self._names,
            pos=cap.pos[k],
            rot=cap.rot[k],
            valid=cap.valid[k],
        )

    def close(self) -> None:
        """Nothing to release."""


def _wait_until(due: float) -> None:
    """Sleep until ``due`` (``time.perf_counter`` seconds). Never spins: a spinning thread
    holds the interpreter lock that the consumer needs, for up to its switch interval."""
    left = due - time.perf_counter()
    if left > 0:
        time.sleep(left)


def _load(path, plates):
    path = Path(path)
    if path.suffix.lower() == ".npz":
        return Capture.load(path)
    return import_capture(path, ImportOptions(plates=plates))
