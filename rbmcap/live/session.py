"""A live session: a source's frames posed subject by subject and handed to sinks.

One thread receives and poses: the one that called :meth:`LiveSession.run` (the main thread from
the command line, so Ctrl-C and SIGTERM land there). Each turn of its loop

- waits for the source's next frame (:mod:`rbmcap.live.sources.base`), then reads every frame that
  arrived meanwhile without waiting and poses the newest, after those before it that posing
  them all at the recent cost of a pose ends within a frame of when the next frame is due (a
  stall of the machine or of the sender: the consumer catches up, at most :data:`CATCH_UP`),
  and the :data:`BURST` before it whatever the time when they arrived together with it (less
  than half a frame apart: a burst on the network).
  Frames a slow turn (a slow sink, a late step, a stall too long to catch up) was overtaken by
  beyond those are counted ``dropped`` and never queue: each is stepped through its phase's
  state without a pose before that phase's next pose
  (:meth:`~rbmcap.live.subject.SubjectGroup.hold`), earlier when the consumer has time before
  the next frame is due, so every pose stays the causal answer on the frames that came; a
  consumer with no room to catch up is never more than one frame behind (two in a burst).
  Frame numbers are placed as they arrive (:class:`~rbmcap.live.frames.FrameCounter`: ``lost``,
  ``late``, ``duplicates``, ``restarts``); only frames in order are posed or stepped. When the
  source's connection breaks it is closed and opened again after 0.1 s, the wait doubling up to
  2 s (``reconnects``);
- poses every subject in one step (:class:`~rbmcap.live.subject.SubjectGroup`) and hands each
  pose to the inline sinks at once and to each threaded sink's own newest-only slots.

Nothing that arrives before the session is set up (the model's step built and warmed, a live
calibration recorded and fitted, the sinks open) enters a phase's state: those frames are read
and counted (so that a late copy of one is known as such), then the counters are set back, and
posing starts from the next frame in order.

No second thread handles frames: a handoff between threads costs the interpreter lock on every
frame, a large part of a 240 Hz frame's latency budget (docs/live.md#latency). Latency is
measured per frame from the packet's arrival (``RigidBodyFrame.received``, the kernel's receive
time where the source has it) to the return of the last inline sink. :meth:`run` returns when the
duration or frame count is reached, the source ends (a replay), ``stop()`` is called, or an
interrupt or error arrives; in every case the source is closed and every sink's ``close`` runs (a
recording is written) before it returns or re-raises.
"""

from __future__ import annotations

import collections
import gc
import logging
import math
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rbmcap.errors import DataError, first_line
from rbmcap.inference.capture import checkpoint_body
from rbmcap.inference.refine import RefineOptions
from rbmcap.live.frames import FrameCounter, LivePose, LiveStats, RigidBodyFrame
from rbmcap.live.handoff import KeyedSlots
from rbmcap.live.sinks.base import Sink, SubjectInfo
from rbmcap.live.sources.base import Source, SourceLost
from rbmcap.live.subject import Subject, SubjectGroup, SubjectStream, phase_count

log = logging.getLogger("rbmcap.live")

BACKOFF_S = (0.1, 2.0)
"""First and longest wait before reopening a source whose connection broke, seconds."""
CATCH_UP = 24
"""The most frames before the newest a turn poses too, where posing them all ends within a
frame of when the next frame is due: a stall of up to 100 ms at 240 Hz (this project's 2-core
machine stalls a stream for 20–57 ms a few times a minute; docs/live.md#latency) is posed whole
when a pose costs under a thirteenth of a frame (0.3 ms at 240 Hz). The consumer is then at
most this many frames behind, and only for a frame or two."""
BURST = 2
"""Frames that came with the newest (less than half a frame before it) posed too even when the
recent cost of a pose says there is no time for them: a burst on the network is not a consumer
that fell behind."""
POSE_TIMES = 15
"""How many of the latest frames' posing times give the recent cost of a pose (their median:
one stall or a slow first frame does not move it)."""
SPIN_S = 3e-4
"""A session stops stepping (held frames, or a hot session's spare) this long plus a step
before the next frame is due; a hot one then only polls."""


@dataclass
class LiveOptions:
    """How a session runs.

    Attributes:
        backend: the stream step's backend (:data:`rbmcap.inference.stream.BACKENDS`).
        fps: the source's frame rate, Hz, when it states none (None: what the source says).
        duration: stop after this many seconds of posing (None: until stopped).
        max_frames: stop after posing this many frames (None: no limit).
        wait_s: how long to wait for the source's first frame before giving up (None: forever).
        hot: between frames, keep the step's code and weights in the CPU's caches by running it
            on a spare session until shortly before the next frame is due, then poll the source
            without sleeping: one core stays busy, and the step does not start cold after each
            idle wait (docs/live.md#latency).
        refine: seconds of solver steps after each frame's network pose
            (:mod:`rbmcap.inference.refine`; None: the network's pose).
        refine_config: the solver configuration whose weights make refinement's objective (a
            ``conf/baseline`` name or YAML path; ``weights.hinge_sigma_deg`` > 0 holds a
            calibration's hinges to their axes).
    """

    backend: str = "compiled"
    fps: float | None = None
    duration: float | None = None
    max_frames: int | None = None
    wait_s: float | None = None
    hot: bool = False
    refine: float | None = None
    refine_config: str = "default"


class LiveSession:
    """Pose a live source's frames for ``subjects`` with ``predictor``'s causal model and hand
    the poses to ``sinks`` (see the module docstring)."""

    def __init__(
        self,
        source: Source,
        predictor,
        sinks: Sequence[Sink] = (),
        subjects: Sequence[Subject] = (Subject(),),
        options: LiveOptions | None = None,
        before_posing: Callable[[LiveSession, RigidBodyFrame], None] | None = None,
    ) -> None:
        """``before_posing(session, first_frame)`` runs once, on the consumer thread, before
        the first frame is posed (live calibration records and fits there)."""
        self.source, self.predictor = source, predictor
        self.sinks = list(sinks)
        self.subjects = list(subjects)
        self.options = options or LiveOptions()
        self.before_posing = before_posing
        self.stats = LiveStats()
        self.streams: list[SubjectStream] = []
        self.group: SubjectGroup | None = None  # every subject's stream, posed together
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._open, self._ended, self._backoff = False, False, BACKOFF_S[0]
        self.counter = FrameCounter(self.stats)
        self._in_order: collections.deque[tuple[RigidBodyFrame, int]] = collections.deque()
        self._threads: list[_SinkThread] = []
        self._opened: list[Sink] = []
        self.phases, self._period = 1, 0.0
        self._arrival = 0.0  # when the newest frame in order arrived (perf_counter s)
        self._spare: tuple | None = None  # hot: a spare session and the plates it steps on
        self._step_s = 0.0  # how long a step without a pose takes (running estimate)
        self._pose_times: collections.deque[float] = collections.deque(maxlen=POSE_TIMES)

    # ----------------------------------------------------------------------- receiving
    def _read(self, timeout: float) -> tuple[RigidBodyFrame, int] | None:
        """The source's next frame in order and its number unwrapped (:class:`FrameCounter`),
        waiting up to ``timeout`` s for the first packet (later ones only if already there);
        None when none came, while the source is being reopened, or once it ended
        (``_ended``)."""
        source = self.source
        while True:
            if self._in_order:
                return self._in_order.popleft()
            if self._ended:
                return None
            try:
                if not self._open:
                    source.open()
                    self._open, self._backoff = True, BACKOFF_S[0]
                frame = source.read(timeout)
            except SourceLost as exc:
                why = first_line(exc)
                why = why if why.startswith(source.name) else f"{source.name}: {why}"
                log.warning("%s; reconnecting in %.1f s", why, self._backoff)
                source.close()
                self.stats.reconnects += self._open
                self._open = False
                self.counter.reset()  # a reopened source numbers afresh
                self._stop.wait(self._backoff)
                self._backoff = min(2 * self._backoff, BACKOFF_S[1])
                return None
            except EOFError:
                self._ended = True
                return None
            if frame is None:
                return None
            self._in_order.extend(self.counter.count(frame))
            if self._in_order:
                self._arrival = self._in_order[-1][0].received
            timeout = 0.0  # not in order: whatever is already there next

    def _arrived(
        self, timeout: float
    ) -> tuple[list[tuple[RigidBodyFrame, int]], list[tuple[RigidBodyFrame, int]]]:
        """What to pose this turn, and the frames it was overtaken by. The newest frame in
        order to arrive within ``timeout`` s (see :meth:`_read`) and everything already there
        after it; posed: the newest, after the ones before it that :meth:`_to_catch_up`
        allows."""
        got = []
        item = self._wait(timeout)
        while item is not None:
            got.append(item)
            item = self._read(0.0)
        if not got:
            return [], []
        posed = 1 + self._to_catch_up([frame for frame, _ in got])
        return got[-posed:], got[:-posed]

    def _to_catch_up(self, frames: list[RigidBodyFrame]) -> int:
        """How many of the frames before the newest to pose too, at most
        :data:`CATCH_UP`, the nearest first: while posing them all with the newest at the
        recent cost of a pose (the median of the last :data:`POSE_TIMES`) ends within a frame
        of when the frame after the newest is due (a stall, with room to catch up: that frame
        is then posed at most a frame late, and the turn after it catches up on it), and the
        :data:`BURST` nearest whatever the time when they arrived less than half a frame
        before the newest (packets that came together on the network). A consumer slower than
        the source has no such room and takes the newest alone."""
        newest, period = frames[-1].received, self._period
        cost = statistics.median(self._pose_times) if self._pose_times else math.inf
        now = time.perf_counter()
        count = 0
        while count < min(CATCH_UP, len(frames) - 1):
            burst = count < BURST and newest - frames[-count - 2].received < 0.5 * period
            if not burst and now + (count + 2) * cost >= newest + 2 * period:
                break
            count += 1
        return count

    def _has_time(self, now: float) -> bool:
        """Whether a step (a held frame, or the spare) ends :data:`SPIN_S` before the next
        frame is due."""
        return now + self._step_s + SPIN_S < self._arrival + self._period

    def _step_between(self, now: float) -> None:
        """One step without a pose while no frame is there: a held frame
        (:meth:`SubjectGroup.catch_up`), else (hot) the spare session; its time goes into the
        running estimate of a step."""
        if not self.group.catch_up(self.counter.newest or 0):
            session, plates = self._spare
            session.advance(*plates)
        took = time.perf_counter() - now
        self._step_s = took if not self._step_s else 0.9 * self._step_s + 0.1 * took

    def _wait(self, timeout: float) -> tuple[RigidBodyFrame, int] | None:
        """:meth:`_read`, stepping held frames (and, hot, the spare session) while no frame is
        there: poll the source, and between polls step while the next frame is not due within a
        step and ``SPIN_S``, or is overdue by half a frame (the source paused). Idle, with
        nothing held, or with the next frame due before a step would end, wait for it asleep."""
        hot, held = self._spare is not None, self.group.pending
        end = time.perf_counter() + timeout
        while True:
            if not hot and not any(held):
                return self._read(max(end - time.perf_counter(), 0.0))
            item = self._read(0.0)
            if item is not None or self._ended or self._stop.is_set():
                return item
            now = time.perf_counter()
            if now >= end:
                return None
            overdue = self._arrival + 1.5 * self._period
            if self._has_time(now) or now > overdue:
                self._step_between(now)
            elif not hot:
                item = self._read(min(end, overdue) - now)
                if item is not None:
                    return item

    # ----------------------------------------------------------------------- consuming
    def run(self) -> LiveStats:
        """Run until done (see the module docstring); returns the session's counters."""
        try:
            first = self._first_frame()
            if first is not None:
                self._start(first)
                self._consume()
        finally:
            gc.unfreeze()
            self._stop.set()
            self.source.close()
            self._close_sinks()
        if self._error is not None:
            raise self._error
        return self.stats

    def stop(self) -> None:
        """Ask :meth:`run` to finish (from any thread)."""
        self._stop.set()

    def _first_frame(self) -> RigidBodyFrame | None:
        wait = self.options.wait_s
        deadline = None if wait is None else time.perf_counter() + wait
        while not self._stop.is_set():
            item = self._read(0.1)
            if item is not None and (self.options.fps or self.source.fps):
                return item[0]
            if self._ended:
                return None
            if deadline is not None and time.perf_counter() > deadline:
                raise DataError(f"{self.source.name}: no frames within {wait:g} s")
        return None

    def collect(self, seconds: float) -> list[RigidBodyFrame]:
        """Every frame the source delivers in the next ``seconds`` (of source time, or sooner
        when it ends or the session stops), taken on the consumer thread without posing."""
        frames: list[RigidBodyFrame] = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end and not self._stop.is_set() and not self._ended:
            item = self._read(min(0.1, max(end - time.perf_counter(), 0.0)))
            if item is not None:
                frames.append(item[0])
        return frames

    def _start(self, first: RigidBodyFrame) -> None:
        self.counter.pause()
        fps = self.options.fps or self.source.fps
        phases = phase_count(fps, self.predictor.fps)
        count = len(self.subjects)
        refine = self.options.refine
        if refine is not None:
            refine = RefineOptions(refine, config=self.options.refine_config)
        template = self.predictor.stream(
            backend=self.options.backend, subjects=count, refine=refine
        )
        self.streams = [SubjectStream(s, self.predictor) for s in self.subjects]
        self.group = SubjectGroup(self.streams, template, phases)
        for stream in self.streams:
            stream.columns(first.names, strict=True)  # one error before anything opens
        # the first turn may catch up already: the warm-up's pose of the first frame's plates
        # (through the group's gather and calibration) stands in for a pose's cost
        self._pose_times.append(_warm_up(template, self.group.plates(first)))
        if self.before_posing is not None:
            self.before_posing(self, first)
        infos = [self._info(s, fps) for s in self.streams]
        for sink in self.sinks:
            sink.open(infos, self.stats)
            self._opened.append(sink)
            if not sink.inline:
                self._threads.append(_SinkThread(sink))
        self.phases, self._period = phases, 1.0 / float(fps)
        self.counter.fps = float(fps)
        if self.options.hot:
            self._spare = (self.group.sessions[0].fork(), self.group.plates(first))
        gc.collect()
        gc.freeze()  # what set-up made is never collected again: no long pause while posing
        # Posing starts from the next frame in order: the frames that waited through set-up are
        # read and placed (a late copy of one is then known as such, and enters no phase) but
        # not counted (neither received nor dropped), and what a socket or queue could not hold
        # while set-up (or a live calibration's fit) ran is not a loss in the stream.
        stats = self.stats
        counted = stats.received, stats.lost, stats.late, stats.duplicates
        while self._read(0.0) is not None:
            pass
        stats.received, stats.lost, stats.late, stats.duplicates = counted
        self.counter.resume()
        self.source.ready()

    def _info(self, stream: SubjectStream, fps: float) -> SubjectInfo:
        p = self.predictor
        if not hasattr(self, "_body"):
            self._body = checkpoint_body(p.body_id)
        calibration = stream.subject.calibration
        betas = getattr(calibration, "betas", None)
        has = hasattr(calibration, "joint_offset_array")
        corrected = calibration.joint_offset_array() if has else None
        return SubjectInfo(
            name=stream.subject.name,
            body=self._body.with_joint_offsets(corrected),
            gender=self._body.gender,
            betas=None if betas is None else np.asarray(betas, dtype=np.float32),
            marker_names=stream.marker_names,
            fps=float(fps),
        )

    def _consume(self) -> None:
        opts, stats = self.options, self.stats
        inline = [s for s in self.sinks if s.inline]
        end = None if opts.duration is None else time.perf_counter() + opts.duration
        group = self.group
        while not self._ended:
            frames, overtaken = self._arrived(0.1)
            stats.dropped += len(overtaken)
            for frame, number in overtaken:
                stats.resets += group.hold(frame, number)
            for frame, number in frames:
                newest = self.counter.newest
                stats.behind = max(stats.behind, 0 if newest is None else newest - number)
                self._pose(frame, number, inline)
                if opts.max_frames is not None and stats.processed >= opts.max_frames:
                    return
            if self._stop.is_set() or (end is not None and time.perf_counter() > end):
                return

    def _pose(self, frame: RigidBodyFrame, number: int, inline: list[Sink]) -> None:
        start = time.perf_counter()
        poses: list[LivePose] = self.group.pose(frame, number)
        self.stats.steps_ms.append(1e3 * (time.perf_counter() - start))
        for sink in inline:
            for pose in poses:
                sink.send(pose)
        done = time.perf_counter()
        for thread in self._threads:
            for pose in poses:
                thread.slots.put(pose.subject, pose)
        self.stats.latencies_ms.append(1e3 * (done - frame.received))
        self.stats.processed += 1
        self._pose_times.append(done - start)

    def _close_sinks(self) -> None:
        for thread in self._threads:
            thread.stop()
        failures = []
        for sink in self._opened:
            try:
                sink.close()
            except Exception as exc:  # every sink closes; the first failure is raised after
                failures.append(exc)
        if failures and self._error is None:
            self._error = failures[0]


def _warm_up(template, plates=None, frames: int = 3) -> float:
    """Run a few frames (``plates``: a frame's (pos, rot, valid) as the group gathers them;
    default rest frames) through a fork of ``template``: its shared step is built and (a trace)
    optimised before the first real frame, whose latency it would otherwise carry. Returns the
    last frame's time, s: the cost of a pose until posed frames say otherwise."""
    warm = template.fork()
    if plates is None:
        plates = (x.cpu().numpy() for x in warm._first_frame())
    pos, rot, valid = plates
    for _ in range(frames):
        start = time.perf_counter()
        warm.push(pos, rot, valid)
    return time.perf_counter() - start


class _SinkThread:
    """A sink that is not inline, fed the newest pose of each subject on its own thread, at most
    ``sink.max_rate`` times a second when the sink sets it."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.slots: KeyedSlots[LivePose] = KeyedSlots()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"rbmcap-sink-{sink.name}")
        self.thread.daemon = True
        self.thread.start()

    def _run(self) -> None:
        period = 1.0 / rate if (rate := getattr(self.sink, "max_rate", None)) else 0.0
        last = 0.0
        while not self.slots.closed:
            wait = last + period - time.perf_counter()
            if wait > 0:  # a display needs no more: the consumer keeps the interpreter lock
                time.sleep(wait)
            last = time.perf_counter()
            for pose in self.slots.take(0.1):
                try:
                    self.sink.send(pose)
                except Exception as exc:  # a failing display must not stop the stream
                    if self.error is None:
                        log.warning("%s: %s; not sending to it any more", self.sink.name, exc)
                    self.error = exc
                    return

    def stop(self) -> None:
        self.slots.close()
        self.thread.join(timeout=5.0)
