"""What flows through a live session: rigid-body frames in, SMPL poses out."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class RigidBodyFrame:
    """One frame of rigid bodies as a source received it, in rbmcap's conventions.

    Attributes:
        frame: the source's frame number.
        timestamp: the source's time of the frame, seconds.
        received: ``time.perf_counter()`` when its packet arrived (the latency's start).
        names: (N,) rigid-body names as the source gives them.
        pos: (N, 3) float32 positions, metres, world Z up.
        rot: (N, 3, 3) float32 world-from-body rotations.
        valid: (N,) bool: tracked in this frame (untracked: zeros and identities).
    """

    frame: int
    timestamp: float
    received: float
    names: tuple[str, ...]
    pos: np.ndarray
    rot: np.ndarray
    valid: np.ndarray


@dataclass(eq=False)
class LivePose:
    """One subject's SMPL pose for one frame, as sinks receive it.

    Attributes:
        subject: the subject's name ("" when the stream has one unnamed subject).
        frame: the source's frame number; timestamp: its time, seconds.
        received: ``time.perf_counter()`` when the frame's packet arrived.
        rotmats: (24, 3, 3) float32 local joint rotations (joint 0 global), SMPL order.
        trans: (3,) float32 root translation, metres, world Z up.
        betas: (B,) float32 shape: the calibration's, else the stream's running estimate.
        plates_pos: (N, 3) float32 the subject's (calibrated) plates, metres; plates_rot
            (N, 3, 3); plates_valid (N,) bool, in the marker set's order.
        index: frames this subject has been posed for so far, this one included (1-based).
        joint_offsets: None, or (24, 3) m the subject's joint correction (its calibration's;
            :meth:`rbmcap.body.BodyModel.with_joint_offsets`): the body posing it has its joints
            there.
    """

    subject: str
    frame: int
    timestamp: float
    received: float
    rotmats: np.ndarray
    trans: np.ndarray
    betas: np.ndarray
    plates_pos: np.ndarray
    plates_rot: np.ndarray
    plates_valid: np.ndarray
    index: int = 0
    joint_offsets: np.ndarray | None = None


@dataclass
class LiveStats:
    """Counters of a live session, updated as it runs (read by sinks such as the viewer).

    What each counter means under loss, reordering, duplicates, restarts and frame-number wrap is
    :class:`FrameCounter`'s (docs/live.md#under-network-conditions).

    Attributes:
        received: frames the source delivered; processed: frames posed (all subjects);
        dropped: frames in order that the consumer had no time to pose (stepped through their
            phase's state without a pose: the phase's later poses stay the offline answer);
        lost: frame numbers skipped by the stream and never received (packets lost on the
            network), less those that came late;
        late: frames that arrived after a newer one, or a lone frame number out of place (not
            posed);
        duplicates: copies of a frame already received (the same number and timestamp);
        restarts: times the source's numbering started afresh (a restarted sender);
        resets: times a phase started afresh, more of its frames dropped than it may catch up;
        reconnects: times the source was opened again after its connection broke;
        behind: the most frames the source was ahead of the frame being posed, when it was taken;
        latencies_ms: packet received → last inline sink returned, per processed frame (ms),
            the most recent ones (a bounded window).
        steps_ms: the posing of each processed frame (ms; every subject's plates, the model's
            step with any held frames of its phase, the poses made; no sink), paced as the
            source delivers: what a step costs at the capture rate, not back to back.
    """

    received: int = 0
    processed: int = 0
    dropped: int = 0
    lost: int = 0
    late: int = 0
    duplicates: int = 0
    restarts: int = 0
    resets: int = 0
    reconnects: int = 0
    behind: int = 0
    latencies_ms: collections.deque = field(
        default_factory=lambda: collections.deque(maxlen=LATENCY_WINDOW)
    )
    steps_ms: collections.deque = field(
        default_factory=lambda: collections.deque(maxlen=LATENCY_WINDOW)
    )

    def summary(self) -> dict:
        """The counters, latency p50/p99/max and step p50/p99 (ms) as a JSON-ready dict."""
        out = {k: getattr(self, k) for k in COUNTERS}
        for name, values, qs in (
            ("latency", self.latencies_ms, (50, 99)),
            ("step", self.steps_ms, (50, 99)),
        ):
            ms = np.asarray(values, dtype=np.float64)
            for q in qs:
                out[f"{name}_p{q}_ms"] = float(np.percentile(ms, q)) if len(ms) else None
            if name == "latency":
                out["latency_max_ms"] = float(ms.max()) if len(ms) else None
        return out


COUNTERS = (
    "received",
    "processed",
    "dropped",
    "lost",
    "late",
    "duplicates",
    "restarts",
    "resets",
    "reconnects",
    "behind",
)
""":class:`LiveStats`' counters, in the order of its summary."""
LATENCY_WINDOW = 1_000_000
"""Latencies kept (the most recent): over an hour at 240 Hz."""
LATE_FRAMES = 256
"""How far back from the newest frame number a frame is still placed in the stream (late, or a
duplicate); a step further back is a restart when the next frame continues it."""
DUPLICATE_S = 0.5
"""A copy of a frame arrives within this many seconds of it (the same packet twice on the
network); the same number and time later is a sender that numbers afresh the same way."""


def number_step(a: int, b: int) -> int:
    """Frame number ``b`` − ``a`` as a signed 32-bit step: NatNet's numbers are int32 and QTM's
    uint32, so the number after the largest is the smallest, one step on."""
    return (b - a + 2**31) % 2**32 - 2**31


class FrameCounter:
    """Places each frame a source delivers in its stream by frame number, and counts it in a
    :class:`LiveStats` (``received``, ``lost``, ``late``, ``duplicates``, ``restarts``).

    With ``newest`` the newest frame number in order (numbers unwrapped: :func:`number_step`)
    and W = ``window``, a frame numbered

    - after ``newest`` is in order; the numbers it skips are ``lost``, unless the step is more
      than W + 2 × fps × the seconds since the newest frame arrived (more frames than the
      source could have sent): then the numbering has changed, as below;
    - ``newest`` or less, at most W back: a copy of a frame received (its number and
      timestamp, arriving within :data:`DUPLICATE_S` of it) is a duplicate; a number skipped
      is ``late`` and no longer lost; a number never counted (before the stream's first frame,
      or skipped while paused: :meth:`pause`) is late too;
    - anything else (more than W back; a number below W that the stream started after; a
      number received before, with another timestamp or long before; a step forward too
      large) is held: when the next frame continues it (at most W after it) and does not
      continue the stream, the sender numbers afresh from the held frame (a ``restart``: both
      frames are in order); otherwise the held frame was a lone number out of place (late).

    A frame in order comes back with its unwrapped number; the others are not posed.
    """

    def __init__(self, stats: LiveStats, window: int = LATE_FRAMES) -> None:
        self.stats, self.window = stats, int(window)
        self.fps: float | None = None  # the source's rate, when known (bounds a step's gap)
        self._paused = False
        self.reset()

    def reset(self) -> None:
        """Forget the numbering: the next frame starts it afresh (a reopened source)."""
        self.newest: int | None = None  # unwrapped
        self._raw = 0  # the newest frame's number as the source gave it
        self._first = 0  # the numbering's first frame (unwrapped)
        self._seen: list[tuple | None] = [
            None
        ] * self.window  # (number, ts, arrival) by number mod W
        self._gaps: set[int] = set()
        self._held: tuple | None = None  # (frame, its number, timestamp)
        self._arrival = 0.0
        self._quiet = self._paused  # paused, or the first step after: any step fits, none lost

    def pause(self) -> None:
        """Nothing is posed for a while (set-up), and the source may not hold what comes
        meanwhile: steps forward lose nothing and fit whatever their size, until the first
        one after :meth:`resume`."""
        self._paused = self._quiet = True

    def resume(self) -> None:
        """Posing starts: the gaps so far are forgotten (a frame of them that comes is late,
        and lost stays as it is), and so is a held frame."""
        self._gaps.clear()
        self._held, self._paused = None, False

    def count(self, frame) -> list[tuple[object, int]]:
        """Count ``frame`` (anything with ``frame``, ``timestamp`` and ``received``): the
        frames it puts in order, each with its unwrapped number (none, itself, or a held frame
        and itself)."""
        stats = self.stats
        stats.received += 1
        raw, ts = frame.frame, frame.timestamp
        if self.newest is None:
            self._begin(raw)
            return [self._accept(frame, raw, raw, ts)]
        step = number_step(self._raw, raw)
        if self._held is not None:
            held, held_raw, held_ts = self._held
            after = number_step(held_raw, raw)
            if after == 0 and ts == held_ts:
                stats.duplicates += 1
                return []
            self._held = None
            if 0 < after <= self.window and not (step > 0 and self._fits(step, frame)):
                stats.restarts += 1
                self._begin(held_raw)
                first = self._accept(held, held_raw, held_raw, held_ts)
                return [first, self._forward(frame, after)]
            stats.late += 1
        if step > 0:
            if self._fits(step, frame):
                return [self._forward(frame, step)]
        elif -step < self.window:
            number = self.newest + step
            slot = self._seen[number % self.window]
            if slot is not None and slot[0] == number:
                if slot[1] == ts and frame.received - slot[2] <= DUPLICATE_S:
                    stats.duplicates += 1
                    return []
            elif number >= self._first or not 0 <= raw < self.window:
                if number in self._gaps:
                    self._gaps.discard(number)
                    stats.lost -= 1
                stats.late += 1
                self._seen[number % self.window] = (number, ts, frame.received)
                return []
        self._held = (frame, raw, ts)
        return []

    def _fits(self, step: int, frame) -> bool:
        """Whether a step forward by ``step`` numbers fits the time since the newest frame."""
        if self._quiet or not self.fps:
            return True
        since = max(frame.received - self._arrival, 0.0)
        return step - 1 <= self.window + 2.0 * self.fps * since

    def _begin(self, raw: int) -> None:
        self._seen = [None] * self.window
        self._gaps.clear()
        self.newest, self._raw, self._first = raw, raw, raw

    def _forward(self, frame, step: int) -> tuple[object, int]:
        number = self.newest + step
        if step > 1 and not self._quiet:
            self.stats.lost += step - 1
            self._gaps.update(range(max(self.newest + 1, number - self.window + 1), number))
            if len(self._gaps) > 2 * self.window:
                self._gaps = {g for g in self._gaps if g > number - self.window}
        self._quiet = self._paused
        return self._accept(frame, number, frame.frame, frame.timestamp)

    def _accept(self, frame, number: int, raw: int, ts: float) -> tuple[object, int]:
        self.newest, self._raw, self._arrival = number, raw, frame.received
        self._seen[number % self.window] = (number, ts, frame.received)
        return frame, number
