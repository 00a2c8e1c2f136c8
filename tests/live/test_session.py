"""A live session: every frame posed as the causal model poses it offline, subjects apart, slow
consumers dropping instead of queueing, sources that break and come back."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import roma
import torch
from helpers.live import (
    KeepingSink,
    max_difference,
    offline_answer,
    prefixed,
    synthetic_take,
)

from rbmcap.calibrate.calibration import Calibration, PlateOffset
from rbmcap.errors import ConfigError
from rbmcap.inference import Predictor
from rbmcap.live import subject as subject_module
from rbmcap.live.frames import RigidBodyFrame
from rbmcap.live.handoff import FrameQueue, NewestSlot
from rbmcap.live.session import CATCH_UP, LiveOptions, LiveSession
from rbmcap.live.sinks.recording import RecordingSink
from rbmcap.live.sources.base import SourceLost
from rbmcap.live.sources.replay import ReplaySource
from rbmcap.live.subject import (
    Subject,
    SubjectGroup,
    SubjectStream,
    phase_count,
    strip_prefix,
)
from rbmcap.motion.smpl_motion import SMPLMotion

# Sessions replay at a rate and count what was posed, dropped or stopped in time. Most replay
# slower than real time (SLOW) or at rates and stalls whose outcome does not depend on how fast a
# pose is, and run beside other tests under pytest-xdist; those whose outcome does (a spinning
# thread, a catch-up that must fit a frame's time, a consumer's exact lag) are marked
# ``exclusive`` and run alone (tests/conftest.py).

TRACE = LiveOptions(backend="trace")
SLOW = 80.0
"""Replay rate (frames/s) of the 240 Hz take here: slower than real time, so that a busy test
machine does not make the consumer drop frames where a test needs each one."""


@pytest.fixture(scope="module")
def predictor():
    return Predictor.from_checkpoint("standin-rbm14-stream")


@pytest.fixture(scope="module")
def take():
    return synthetic_take(240, fps=240.0)


def _posed_frames(poses) -> np.ndarray:
    return np.array([p.frame for p in poses])


def _every_frame_answer(predictor, take, phases: int = 4) -> dict:
    """The causal model offline on every frame of each phase after set-up (frame 0): what the
    session's poses equal whether or not a busy machine made it drop some (a dropped frame is
    stepped through its phase's state without a pose), so not only on the frames posed."""
    every = np.arange(1, take.num_frames)
    return offline_answer(predictor, take.pos, take.rot, take.valid, every, phases)


def test_every_streamed_pose_is_the_offline_causal_answer_of_its_phase(predictor, take):
    sink = KeepingSink()
    session = LiveSession(ReplaySource(take, rate=SLOW), predictor, [sink], options=TRACE)
    stats = session.run()
    assert session.phases == 4  # 240 Hz against a model trained at 60 Hz
    assert stats.processed == len(sink.poses) > 200
    answer = _every_frame_answer(predictor, take)
    assert max_difference(sink.poses, answer) < 1e-5
    assert sink.opened == sink.closed == 1


class _Clocked(KeepingSink):
    """Keeps each pose with the session thread's CPU time and the wall time when it came."""

    def __init__(self) -> None:
        super().__init__()
        self.clocks: list[tuple[float, float]] = []

    def send(self, pose) -> None:
        super().send(pose)
        self.clocks.append((time.thread_time(), time.perf_counter()))

    def busy(self) -> float:
        """The thread's CPU time over the wall time, from the first pose to the last."""
        (cpu0, wall0), (cpu1, wall1) = self.clocks[0], self.clocks[-1]
        return (cpu1 - cpu0) / (wall1 - wall0)


@pytest.mark.exclusive  # measures the spinning thread's share of the wall time
def test_a_hot_session_keeps_its_thread_busy_between_frames_and_poses_the_same(predictor, take):
    def run(hot: bool) -> _Clocked:
        sink = _Clocked()
        options = LiveOptions(backend="trace", hot=hot)
        LiveSession(ReplaySource(take, rate=SLOW), predictor, [sink], options=options).run()
        return sink

    hot, idle = run(hot=True), run(hot=False)
    print(f"busy: hot {hot.busy():.2f}, idle {idle.busy():.2f} of the wall time")
    # posing 80 frames/s takes a small part of the thread's time; hot, spare steps fill the rest
    # (as much of it as a loaded machine gives the thread)
    assert hot.busy() > idle.busy() + 0.2
    assert len(hot.poses) > 200
    assert max_difference(hot.poses, _every_frame_answer(predictor, take)) < 1e-5


def test_a_source_at_the_models_rate_is_one_phase_and_every_frame_is_posed(predictor, take):
    slow = synthetic_take(90, fps=60.0)
    sink = KeepingSink()
    session = LiveSession(ReplaySource(slow, rate=30.0), predictor, [sink], options=TRACE)
    stats = session.run()
    assert session.phases == 1 and stats.dropped == 0
    frames = _posed_frames(sink.poses)
    assert np.array_equal(frames, np.arange(1, 90))  # every frame after the first
    answer = offline_answer(predictor, slow.pos, slow.rot, slow.valid, frames, 1)
    assert max_difference(sink.poses, answer) < 1e-5


def test_phases_follow_the_rate_ratio():
    assert [phase_count(f, 60.0) for f in (None, 30.0, 60.0, 100.0, 120.0, 240.0, 360.0)] == [
        1,
        1,
        1,
        2,
        2,
        4,
        6,
    ]


def test_subject_prefixes_take_any_separator_and_nothing_else():
    assert strip_prefix("alice_left_forearm", "alice") == "left_forearm"
    assert strip_prefix("alice:head", "alice") == "head"
    assert strip_prefix("alicex_head", "alice") is None
    assert strip_prefix("bob_head", "alice") is None
    assert strip_prefix("anything", "") == "anything"


def _calibration(names, seed: int) -> Calibration:
    rng = np.random.default_rng(seed)
    plates = {
        n: PlateOffset(
            rotation=rng.normal(0, 0.1, 3), position=rng.normal(0, 0.02, 3), residual_mm=0.0
        )
        for n in names
    }
    zero = np.zeros(3)
    return Calibration(
        betas=np.zeros(10), frames=[[0]], rotation=zero, translation=zero, plates=plates
    )


def test_subjects_are_posed_apart_each_with_its_own_calibration(predictor, take):
    calibs = {s: _calibration(take.names, seed) for seed, s in enumerate(("alice", "bob"))}
    both = prefixed(take, ["alice", "bob"])
    sink = KeepingSink()
    subjects = [Subject(name, calibs[name]) for name in ("alice", "bob")]
    where = {}
    LiveSession(ReplaySource(both, rate=SLOW), predictor, [sink], subjects, TRACE).run()
    for name in ("alice", "bob"):
        own = [p for p in sink.poses if p.subject == name]
        mine = both.select([f"{name}_{n}" for n in take.names], rename=list(take.names))
        cal = calibs[name].apply(mine)
        assert max_difference(own, _every_frame_answer(predictor, cal)) < 1e-5
        where[name] = np.mean([p.trans[0] for p in own])
    assert where["bob"] - where["alice"] == pytest.approx(2.0, abs=0.2)  # each where its plates are
    assert len({p.frame for p in sink.poses if p.subject == "alice"}) == len(sink.poses) // 2


def test_a_group_gathers_and_calibrates_every_subjects_plates_as_each_alone(predictor, take):
    """Eight subjects, some calibrated, one plate of one subject gone from the stream: the
    group's one gather and one calibration give each subject's own plates exactly."""
    names = [f"s{k}" for k in range(8)]
    both = prefixed(take, names)
    keep = [i for i, n in enumerate(both.names) if n != "s3_left_forearm"]
    subjects = [
        Subject(n, _calibration(take.names, k) if k % 3 else None) for k, n in enumerate(names)
    ]
    streams = [SubjectStream(s, predictor) for s in subjects]
    group = SubjectGroup(streams, predictor.stream(backend="eager", subjects=8), 1)
    for i in (0, 50):
        frame = RigidBodyFrame(
            i,
            i / 240,
            0.0,
            tuple(both.names[k] for k in keep),
            both.pos[i, keep],
            both.rot[i, keep],
            both.valid[i, keep],
        )
        alone = [np.stack(x) for x in zip(*(s.plates(frame) for s in streams))]
        for got, want in zip(group.plates(frame), alone, strict=True):
            np.testing.assert_array_equal(got, want)
        assert not group.plates(frame)[2][3, take.names.index("left_forearm")]


def test_names_that_do_not_fit_the_marker_set_are_one_error_before_any_sink_opens(predictor, take):
    sink = KeepingSink()
    wrong = prefixed(take, ["alice"])
    with pytest.raises(ConfigError, match="subject 'carol'") as err:
        LiveSession(ReplaySource(wrong), predictor, [sink], [Subject("carol")], TRACE).run()
    assert "\n" not in str(err.value)
    assert sink.opened == 0


@pytest.mark.slow  # CI's serial stage: beside make test's other worker it fell 2 frames behind
@pytest.mark.exclusive  # counts how far behind the source the session falls
def test_a_slow_consumer_drops_frames_counts_them_and_never_queues(predictor, take):
    sink = KeepingSink(delay_s=0.02)  # 50 poses/s against 240 frames/s
    stats = LiveSession(ReplaySource(take), predictor, [sink], options=TRACE).run()
    assert stats.dropped > 100
    assert stats.processed + stats.dropped <= stats.received
    # the newest frame was always the one posed: never more than one frame behind the source
    assert stats.behind <= 1
    # the step is timed without the sink (20 ms a pose): its own and the held frames' steps
    summary = stats.summary()
    assert len(stats.steps_ms) == stats.processed
    assert summary["step_p50_ms"] < 20.0 <= summary["latency_p50_ms"]


class _Stalling(KeepingSink):
    """An inline sink that stalls once for ``stall_s`` on each pose numbered in ``at``."""

    def __init__(self, at, stall_s: float) -> None:
        super().__init__()
        self.at, self.stall_s = set(at), stall_s

    def send(self, pose) -> None:
        super().send(pose)
        if len(self.poses) in self.at:
            time.sleep(self.stall_s)


@pytest.mark.exclusive  # how many frames wait depends on how long a pose takes
def test_a_consumer_stalled_once_catches_up_instead_of_dropping(predictor):
    """A one-off stall of over two frames (a hiccup of the machine) with room to catch up: the
    frame before the newest is posed too, nothing dropped, never more than a frame behind."""
    slow = synthetic_take(60, fps=30.0)
    sink = _Stalling(at=(10, 25, 40), stall_s=2.25 / 30.0)
    stats = LiveSession(ReplaySource(slow), predictor, [sink], options=TRACE).run()
    assert _posed_frames(sink.poses).tolist() == list(range(1, 60))
    assert stats.dropped == 0 and stats.behind == 1


@pytest.mark.exclusive  # how many frames wait depends on how long a pose takes
def test_a_consumer_stalled_for_three_frames_catches_up_on_all_of_them(predictor):
    """A stall of over three frames with room to catch up: the two frames before the newest
    are posed too, nothing dropped, two frames behind at most."""
    slow = synthetic_take(60, fps=30.0)
    sink = _Stalling(at=(10, 25, 40), stall_s=3.25 / 30.0)
    stats = LiveSession(ReplaySource(slow), predictor, [sink], options=TRACE).run()
    assert _posed_frames(sink.poses).tolist() == list(range(1, 60))
    assert stats.dropped == 0 and stats.behind == 2


@pytest.mark.exclusive  # the catch-up must fit two frames' time
def test_a_stall_that_takes_over_a_frame_to_pose_is_caught_up_within_two(predictor):
    """Fifteen frames that waited through a stall, posed at 20 ms each by a 5 Hz consumer: a
    frame and a half of posing, which ends within a frame of when the next frame is due, so
    all are posed, in order, and the next frame after them."""
    take = synthetic_take(40, fps=5.0)
    sink = KeepingSink(delay_s=0.02)
    stalls = [(1,), range(2, 17), (17,), (18,)]
    source = _Bursts(take, stalls, 0.6, fps=5.0, stalled=True)
    stats = LiveSession(source, predictor, [sink], options=TRACE).run()
    assert _posed_frames(sink.poses).tolist() == list(range(1, 19))
    assert stats.dropped == 0


def test_a_rigid_body_gone_for_a_while_does_not_stop_the_stream(predictor, take):
    gone = synthetic_take(240, fps=240.0)
    gone.valid[60:180, 3] = False
    gone.pos[60:180, 3] = 0.0
    sink = KeepingSink()
    LiveSession(ReplaySource(gone, rate=SLOW), predictor, [sink], options=TRACE).run()
    frames = _posed_frames(sink.poses)
    assert frames.max() == 239 and {60, 120, 179} <= set(frames.tolist())
    assert max_difference(sink.poses, _every_frame_answer(predictor, gone)) < 1e-5


class _Flaky:
    """A source whose connection breaks after ``every`` frames, ``breaks`` times."""

    fps, finite, name = 240.0, True, "flaky"

    def __init__(self, take, every: int = 50, breaks: int = 2) -> None:
        self.inner, self.every, self.left = ReplaySource(take, rate=SLOW), every, breaks
        self.opens = self.served = 0

    def open(self) -> None:
        self.opens += 1

    def ready(self) -> None:
        self.inner.ready()

    def read(self, timeout):
        if self.left and self.served and self.served % self.every == 0:
            self.left -= 1
            self.served += 1  # one frame lost with the connection
            raise SourceLost("connection reset")
        frame = self.inner.read(timeout)
        self.served += frame is not None
        return frame

    def close(self) -> None:
        pass


def test_a_broken_connection_is_reopened_with_back_off_and_the_stream_goes_on(predictor, take):
    source = _Flaky(take)
    sink = KeepingSink()
    stats = LiveSession(source, predictor, [sink], options=TRACE).run()
    assert stats.reconnects == 2 and source.opens == 3
    assert _posed_frames(sink.poses).max() == 239


def test_frame_numbers_going_back_count_as_a_restart_and_gaps_as_lost(predictor):
    numbers = [10, 11, 12, 15, 16, 0, 1, 2]
    take = synthetic_take(len(numbers), fps=60.0)
    take.frame_numbers = np.array(numbers)
    stats = LiveSession(ReplaySource(take, rate=60.0), predictor, [], options=TRACE).run()
    assert stats.received == 8 and stats.lost == 2 and stats.restarts == 1 and stats.late == 0


def test_a_packet_overtaken_by_a_newer_one_is_late_not_lost_and_not_posed(predictor):
    numbers = [0, 1, 2, 4, 3, 5, 6, 7]
    take = synthetic_take(len(numbers), fps=60.0)
    take.frame_numbers = np.array(numbers)
    sink = KeepingSink()
    stats = LiveSession(ReplaySource(take, rate=60.0), predictor, [sink], options=TRACE).run()
    assert stats.late == 1 and stats.lost == 0 and stats.restarts == 0
    assert 3 not in _posed_frames(sink.poses) and np.all(np.diff(_posed_frames(sink.poses)) > 0)


def test_frames_are_received_and_posed_on_the_thread_that_runs_the_session(predictor, take):
    """No thread between the socket and the step: a handoff costs the interpreter lock."""

    class Watching(ReplaySource):
        def read(self, timeout):
            readers.add(threading.get_ident())
            return super().read(timeout)

    class Counting(KeepingSink):
        def send(self, pose) -> None:
            super().send(pose)
            senders.add(threading.get_ident())
            alive.add(threading.active_count())

    readers: set[int] = set()
    senders: set[int] = set()
    alive: set[int] = set()
    before = threading.active_count()
    sink = Counting()
    LiveSession(Watching(take, rate=SLOW), predictor, [sink], options=TRACE).run()
    assert len(sink.poses) > 0
    assert readers == senders == {threading.get_ident()} and alive == {before}


class _HeldThroughSetUp:
    """A source whose socket holds ``held`` (frame numbers) by the time set-up ends (the rest
    of what came meanwhile was lost), then ``later``, one each time a read waits. A number
    delivered again is a copy of the packet: it carries the first one's arrival time."""

    fps, finite, name = 60.0, True, "held"

    def __init__(self, take, held, later) -> None:
        self.take, self.queue, self.later, self.is_ready = take, list(held), list(later), False
        self.arrived: dict[int, float] = {}

    def open(self) -> None:
        pass

    def ready(self) -> None:
        self.is_ready = True

    def close(self) -> None:
        pass

    def read(self, timeout):
        if not self.queue and self.is_ready:
            if not self.later:
                raise EOFError
            if timeout > 0:
                self.queue.append(self.later.pop(0))
        if not self.queue:
            return None
        number, t = self.queue.pop(0), self.take
        return RigidBodyFrame(
            frame=number,
            timestamp=number / self.fps,
            received=self.arrived.setdefault(number, time.perf_counter()),
            names=tuple(t.names),
            pos=t.pos[number % t.num_frames],
            rot=t.rot[number % t.num_frames],
            valid=t.valid[number % t.num_frames],
        )


def test_frames_the_source_could_not_hold_during_set_up_are_not_counted_lost(predictor):
    """Set-up (a compile, a live calibration's fit) reads nothing for a while: the frames a
    socket or queue could not hold meanwhile, before and after those it kept, are not a loss
    of the stream."""
    take = synthetic_take(60, fps=60.0)
    held, later = [0, *range(400, 410)], list(range(800, 820))
    sink = KeepingSink()
    source = _HeldThroughSetUp(take, held, later)
    stats = LiveSession(source, predictor, [sink], options=TRACE).run()
    # the first frame (names) and the later ones are received; those held through set-up not
    assert stats.lost == 0 and stats.restarts == 0 and stats.received == 1 + len(later)
    assert _posed_frames(sink.poses).tolist() == later and stats.dropped == 0


class _Bursts:
    """A source (60 Hz unless told) whose packets arrive in ``groups``: each group at once (one
    arrival time), a group every ``gap`` seconds; the first frame (the names) before them. With
    ``stalled``, a group's frames are stamped a frame apart up to its arrival time, as frames
    that waited in the socket while the consumer stalled."""

    finite, name = True, "bursts"

    def __init__(self, take, groups, gap: float, fps: float = 60.0, stalled: bool = False):
        self.take, self.groups, self.gap, self.fps = take, [list(g) for g in groups], gap, fps
        self.stalled = stalled
        self.queue: list = [(0, time.perf_counter())]
        self.due: float | None = None  # when the next group arrives

    def open(self) -> None:
        pass

    def ready(self) -> None:
        pass

    def close(self) -> None:
        pass

    def read(self, timeout):
        if not self.queue and (timeout > 0 or self.due is not None):
            if not self.groups:
                raise EOFError
            now = time.perf_counter()
            self.due = now + self.gap if self.due is None else self.due
            if self.due > now + timeout:
                time.sleep(timeout)
                return None
            time.sleep(max(self.due - now, 0.0))
            group = self.groups.pop(0)
            apart = 1.0 / self.fps if self.stalled else 0.0
            self.queue = [(n, self.due - (len(group) - 1 - k) * apart) for k, n in enumerate(group)]
            self.due += self.gap
        if not self.queue:
            return None
        (number, received), t = self.queue.pop(0), self.take
        return RigidBodyFrame(
            frame=number,
            timestamp=number / self.fps,
            received=received,
            names=tuple(t.names),
            pos=t.pos[number],
            rot=t.rot[number],
            valid=t.valid[number],
        )


def test_two_frames_that_arrive_together_are_both_posed_in_order(predictor):
    """A burst on the network (two packets at once) is not a consumer that fell behind: both
    are posed, the older first, even by a consumer whose poses leave no time for them; a
    fourth at once is one more than such a consumer poses (``BURST``: the newest and two
    before it)."""
    take = synthetic_take(40, fps=60.0)
    sink = KeepingSink(delay_s=0.02)  # a pose takes longer than the 16.7 ms between frames
    pairs = [(n, n + 1) for n in range(1, 31, 2)]
    stats = LiveSession(_Bursts(take, pairs, 0.1), predictor, [sink], options=TRACE).run()
    assert _posed_frames(sink.poses).tolist() == list(range(1, 31))
    assert stats.dropped == 0 and stats.behind == 1

    sink = KeepingSink(delay_s=0.02)
    fours = [(1,), (2, 3, 4, 5), (6, 7, 8, 9)]  # the first pose times the sink
    stats = LiveSession(_Bursts(take, fours, 0.2), predictor, [sink], options=TRACE).run()
    assert _posed_frames(sink.poses).tolist() == [1, 3, 4, 5, 7, 8, 9] and stats.dropped == 2


@pytest.mark.exclusive  # the catch-up must fit two frames' time
def test_a_stall_is_caught_up_whole_when_there_is_time_up_to_catch_up_frames(predictor):
    """Frames that waited through a stall are all posed, in order, when posing them ends before
    the next frame is due: 24 before the newest (100 ms at 240 Hz, ``CATCH_UP``), also on
    the first turn after set-up (the warm-up's step is the cost of a pose until poses are
    timed); of 26, the two oldest are dropped."""
    take = synthetic_take(80, fps=10.0)
    sink = KeepingSink()
    stalls = [(1, 2), range(3, 28), range(40, 67)]
    source = _Bursts(take, stalls, 0.3, fps=10.0, stalled=True)
    stats = LiveSession(source, predictor, [sink], options=TRACE).run()
    assert _posed_frames(sink.poses).tolist() == [*range(1, 28), *range(42, 67)]
    assert stats.dropped == 2 and stats.behind == CATCH_UP == 24


def _recording_error(predictor, path, take, phases: int) -> float:
    """Largest difference between a recording's rotations and the causal model's offline answer
    on every frame of each phase that the session got (a replay's frames 1 to the last)."""
    motion = SMPLMotion.load(path)
    frames = np.load(path)["frame_numbers"]
    rotvec = torch.from_numpy(motion.poses.reshape(len(frames), 24, 3).astype(np.float64))
    rotmats = roma.rotvec_to_rotmat(rotvec).numpy()
    every = np.arange(1, take.num_frames)
    answer = offline_answer(predictor, take.pos, take.rot, take.valid, every, phases)
    return max(
        float(np.abs(r - answer[int(f)][0]).max()) for f, r in zip(frames, rotmats, strict=True)
    )


@pytest.mark.parametrize(
    "hot",
    [False, pytest.param(True, marks=pytest.mark.exclusive)],  # a hot session spins
    ids=["idle", "hot"],
)
@pytest.mark.parametrize("stall", [False, True], ids=["steady", "stalling"])
def test_every_phase_of_a_recording_is_the_offline_causal_answer_on_all_its_frames(
    predictor, take, tmp_path, stall, hot
):
    """Every frame after set-up enters its phase: posed, or (dropped by a stalled consumer)
    stepped through the phase's state without a pose, so every recorded pose of a phase equals
    the causal model offline on all of that phase's frames, from the first recorded one."""
    record = RecordingSink(npz=tmp_path / "take.npz")
    sinks = [record, _Stalling(at=range(20, 200, 25), stall_s=4.5 / SLOW)] if stall else [record]
    options = LiveOptions(backend="trace", hot=hot)
    stats = LiveSession(ReplaySource(take, rate=SLOW), predictor, sinks, options=options).run()
    print(f"dropped {stats.dropped} of {stats.received}, resets {stats.resets}")
    assert stats.resets == 0
    if stall:
        assert stats.dropped >= 5  # each stall overtakes the consumer by four frames or more
    assert _recording_error(predictor, tmp_path / "take.npz", take, 4) < 1e-5


def test_frames_dropped_in_a_burst_are_stepped_before_their_phase_poses_again(predictor):
    """Bursts of eight frames at once at 240 Hz to a consumer with no time to spare: the last
    three are posed (the newest and ``BURST`` before it), the other five are stepped through
    their phases (at most two a phase) before those phases pose again."""
    take = synthetic_take(100, fps=240.0)
    groups = [[1]] + [list(range(k, k + 8)) for k in range(2, 98, 8)]  # [1]: times the sink
    sink = KeepingSink(delay_s=0.005)  # a pose takes longer than the 4.2 ms between frames
    source = _Bursts(take, groups, 0.06, fps=240.0)
    stats = LiveSession(source, predictor, [sink], options=TRACE).run()
    assert _posed_frames(sink.poses).tolist() == [1] + [k for g in groups[1:] for k in g[5:]]
    assert stats.dropped == 60 and stats.resets == 0
    answer = offline_answer(predictor, take.pos, take.rot, take.valid, np.arange(1, 98), 4)
    assert max_difference(sink.poses, answer) < 1e-5


def test_a_phase_with_more_dropped_frames_than_it_may_catch_up_starts_afresh(predictor):
    """Twelve frames at once into one phase of a consumer with no time to spare: nine are
    dropped (the last three posed), more than
    the phase keeps, so it starts afresh from the last of them it keeps (counted), and poses as
    the causal model does offline from there."""
    take = synthetic_take(40, fps=60.0)
    keep = subject_module.CATCH_UP_FRAMES
    groups = [range(1, 2), range(2, 14), range(14, 17), range(17, 20)]  # 1: times the sink
    sink = KeepingSink(delay_s=0.02)  # a pose takes longer than the 16.7 ms between frames
    stats = LiveSession(_Bursts(take, groups, 0.1), predictor, [sink], options=TRACE).run()
    assert _posed_frames(sink.poses).tolist() == [1, *range(11, 20)]
    assert stats.dropped == 9 and stats.resets == 1
    answer = offline_answer(predictor, take.pos, take.rot, take.valid, np.arange(11 - keep, 20), 1)
    assert max_difference(sink.poses[1:], answer) < 1e-5


def test_no_frame_from_before_the_session_is_ready_enters_a_phase(predictor):
    """Frames read while the session is set up (here by a hook that records, as a live
    calibration does) are placed but never posed or stepped: a copy of one that comes after
    set-up is a duplicate, one skipped meanwhile or from far back is late, and the poses are
    the causal model's offline answer on the frames after set-up alone."""
    take = synthetic_take(60, fps=60.0)
    held = [0, *range(400, 410)]
    later = [409, 800, 801, 790, 802, 300, *range(803, 820)]
    recorded: list = []
    sink = KeepingSink()
    stats = LiveSession(
        _HeldThroughSetUp(take, held, later),
        predictor,
        [sink],
        options=TRACE,
        before_posing=lambda session, first: recorded.extend(session.collect(0.05)),
    ).run()
    assert [f.frame for f in recorded] == held[1:]
    posed = _posed_frames(sink.poses)
    assert posed.tolist() == list(range(800, 820))
    assert stats.duplicates == 1 and stats.late == 2 and stats.restarts == stats.lost == 0
    rows = posed % take.num_frames
    alone = offline_answer(
        predictor, take.pos[rows], take.rot[rows], take.valid[rows], np.arange(len(rows)), 1
    )
    answer = {int(f): alone[k] for k, f in enumerate(posed)}
    assert max_difference(sink.poses, answer) < 1e-5


def test_a_stream_reaching_the_session_twice_poses_each_frame_once(predictor):
    """Each frame arrives twice, the copy a frame or two late (a stream sent to two of the
    client's sockets): copies are duplicates, never posed, and count nothing else."""
    take = synthetic_take(60, fps=60.0)
    numbers = list(range(1, 40))
    copies = [(k, n) for k, n in enumerate(numbers)] + [
        (k + 1 + k % 2, n) for k, n in enumerate(numbers)
    ]
    arrivals = [n for _, n in sorted(copies, key=lambda a: a[0])]
    sink = KeepingSink()
    stats = LiveSession(
        _HeldThroughSetUp(take, [0], arrivals), predictor, [sink], options=TRACE
    ).run()
    assert _posed_frames(sink.poses).tolist() == numbers
    assert stats.duplicates == len(numbers)
    assert stats.late == stats.lost == stats.restarts == stats.dropped == 0
    answer = offline_answer(predictor, take.pos, take.rot, take.valid, np.array(numbers), 1)
    assert max_difference(sink.poses, answer) < 1e-5


def test_stop_from_another_thread_ends_the_run_and_closes_the_sinks(predictor, take):
    """Another thread stops the session once poses flow (not on a timer: start-up on a busy
    machine can take longer than any fixed delay)."""

    class Signalling(KeepingSink):
        def __init__(self) -> None:
            super().__init__()
            self.posing = threading.Event()

        def send(self, pose) -> None:
            super().send(pose)
            self.posing.set()

    sink = Signalling()
    session = LiveSession(ReplaySource(take, loop=True), predictor, [sink], options=TRACE)

    def stop_when_posing() -> None:
        sink.posing.wait(60.0)
        session.stop()

    stopper = threading.Thread(target=stop_when_posing, daemon=True)
    stopper.start()
    session.run()
    stopper.join(5.0)
    assert sink.closed == 1 and len(sink.poses) > 0 and not stopper.is_alive()


def test_a_failing_sink_still_lets_the_others_close(predictor, take):
    class Broken(KeepingSink):
        def send(self, pose):
            raise OSError("disk full")

    good, bad = KeepingSink(), Broken()
    with pytest.raises(OSError):
        LiveSession(ReplaySource(take), predictor, [bad, good], options=TRACE).run()
    assert good.closed == 1 and bad.closed == 1


def test_the_frame_queue_keeps_order_and_drops_only_the_oldest_beyond_its_size():
    queue: FrameQueue[int] = FrameQueue(3)
    assert not any(queue.put(i) for i in range(3)) and queue.put(3)
    assert [queue.get(0.0) for _ in range(4)] == [1, 2, 3, None] and queue.overwritten == 1
    queue.close()
    assert queue.finished


def test_the_newest_slot_keeps_only_the_newest_and_counts_the_rest():
    slot: NewestSlot[int] = NewestSlot()
    assert not slot.put(1) and slot.put(2) and slot.put(3)
    assert slot.get(0.0) == 3 and slot.overwritten == 2 and slot.get(0.0) is None
    slot.close()
    assert slot.finished


def test_frames_from_a_source_keep_the_capture_conventions(take):
    source = ReplaySource(take, rate=float("inf"))
    source.open()
    frame = source.read(1.0)
    assert isinstance(frame, RigidBodyFrame)
    assert frame.pos.shape == (14, 3) and frame.rot.shape == (14, 3, 3)
    det = np.linalg.det(frame.rot[frame.valid])
    assert np.allclose(det, 1.0, atol=1e-5)
    q = roma.rotmat_to_unitquat(torch.as_tensor(frame.rot))
    assert torch.isfinite(q).all()


def test_a_threaded_sink_gets_the_newest_poses_at_most_at_its_rate(predictor, take):
    display = KeepingSink(inline=False)
    display.max_rate = 20.0
    stats = LiveSession(ReplaySource(take), predictor, [display], options=TRACE).run()
    seconds = take.num_frames / take.fps
    assert 0 < len(display.poses) <= 20.0 * seconds + 2 < stats.processed
    frames = _posed_frames(display.poses)
    assert np.all(np.diff(frames) > 0)  # newest first, never an older pose after a newer one


class _Renamed(_Flaky):
    """A replay whose rigid body ``gone`` is deleted from the stream after frame ``after``."""

    def __init__(self, take, gone: int, after: int) -> None:
        super().__init__(take, breaks=0)
        self.gone, self.after = gone, after

    def read(self, timeout):
        frame = super().read(timeout)
        if frame is not None and frame.frame > self.after:
            keep = [i for i in range(len(frame.names)) if i != self.gone]
            frame.names = tuple(frame.names[i] for i in keep)
            frame.pos, frame.rot, frame.valid = frame.pos[keep], frame.rot[keep], frame.valid[keep]
        return frame


def test_a_rigid_body_deleted_from_the_stream_is_unseen_from_then_on(predictor, take):
    sink = KeepingSink()
    stats = LiveSession(_Renamed(take, 5, 100), predictor, [sink], options=TRACE).run()
    after = [p for p in sink.poses if p.frame > 100]
    assert after and stats.processed == len(sink.poses)
    assert all(not p.plates_valid[5] and p.plates_valid[6] == take.valid[p.frame, 6] for p in after)
    assert all(p.plates_valid[5] == take.valid[p.frame, 5] for p in sink.poses if p.frame <= 100)
