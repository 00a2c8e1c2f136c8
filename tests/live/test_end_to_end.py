"""Live capture end to end, through real sockets on 127.0.0.1.

A NatNet sender written from the published protocol (``helpers.natnet_sender``), a QTM RT server
(``helpers.qtm_server``) and a replayed take stream a synthetic rbm14 walk at 240 Hz into a
:class:`~rbmcap.live.session.LiveSession`; every pose must be the causal model's offline answer
for its phase on the frames as received, and every frame received must be posed or counted as
dropped. Then several subjects on one consumer thread, faults (packet loss, a rigid body gone, a
restarted sender, a slow sink), ``rbmcap live`` stopped by SIGTERM, and VMC bundles for every
pose.

The servers run in a forked process (:class:`ServerProcess`): their send loops spin to keep time
and would otherwise hold the interpreter lock that the session's threads need. The figures of
each run (dropped, lost, behind, latency p50/p99) are printed: ``pytest -s`` shows them. The
``acceptance`` streams run the compiled backend for :data:`STREAM_SECONDS` each: seconds in CI, a
minute in an acceptance run (``RBMCAP_ACCEPTANCE=1``), whose figures ``docs/live.md`` records.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import roma
import torch
from helpers.acceptance import FULL, length
from helpers.live import KeepingSink, max_difference, offline_answer, prefixed, synthetic_take
from helpers.natnet_sender import MotiveSender, frames_from_capture
from helpers.qtm_server import QTMServer
from pythonosc.osc_bundle import OscBundle

from rbmcap.inference import Predictor
from rbmcap.live.frames import LiveStats, RigidBodyFrame
from rbmcap.live.session import BURST, CATCH_UP, LiveOptions, LiveSession
from rbmcap.live.sinks.recording import RecordingSink
from rbmcap.live.sinks.vmc import UNITY_BONES, VMCSink
from rbmcap.live.sources.natnet import NatNetSource
from rbmcap.live.sources.qualisys import QualisysSource
from rbmcap.live.sources.replay import ReplaySource
from rbmcap.live.subject import Subject
from rbmcap.motion.smpl_motion import SMPLMotion

# Each test streams in real time through sockets and counts what was posed in time: under
# pytest-xdist it runs with no other test alongside (tests/conftest.py).
pytestmark = pytest.mark.exclusive

RATE = 240.0
"""The capture rate every source streams at, Hz (four phases of the 60 Hz model)."""
PHASES = 4
TAKE_FRAMES = 1200
"""Frames of the synthetic take (5 s); the servers repeat it, the offline answer is computed on
the frames as received."""
SUBJECTS = ("s1", "s2", "s3", "s4")
TOLERANCE = 1e-5
"""Largest |streamed − offline| allowed in a rotation matrix element or a translation (m)."""
STREAM_SECONDS = length(5.0, 60.0)
"""Seconds of each compiled-backend stream: 5 by default, a minute in an acceptance run."""
KEEP_UP = 0.75
"""The least share of a stream's frames that the compiled backend must pose (the rest dropped):
a step slower than a frame's 4.2 ms poses less (one 6 ms slower: 48% waiting idle, 64% hot).
Waiting hot spins a core, which a busy machine takes from the stream: 84% at load 5."""
LAB = {1: (0.0, 1.5), 4: (0.0, 3.0), 8: (0.005, None)}
"""What a lab needs, by subject count: the largest share of frames dropped and the latency p99
(ms; None: not asked), checked in an acceptance run (:data:`helpers.acceptance.FULL`) on a
quiet machine (docs/live.md#latency records the figures): one subject and four at 240 Hz, eight
at 120 Hz, posed at the settings docs/live.md gives for them."""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def predictor():
    return Predictor.from_checkpoint("standin-rbm14-stream")


@pytest.fixture(scope="module")
def lab_predictor():
    """The model as ``rbmcap live`` runs it compiled: its weights in bfloat16."""
    return Predictor.from_checkpoint("standin-rbm14-stream", precision="bfloat16")


@pytest.fixture(scope="module")
def take():
    return synthetic_take(TAKE_FRAMES, fps=RATE)


# ------------------------------------------------------------------------------ servers


class ServerProcess:
    """A test server built by ``make()`` in a forked process and driven over a pipe.

    ``call(method, *args)`` runs one of the server's methods there (``drop``, ``hide``,
    ``restart``, ``stop``, or ``None`` for nothing) and returns its counters ``{"sent",
    "frame"}``. The fork shares the parent's memory, so ``make`` may close over arrays; it must
    not use torch (whose thread pools do not survive a fork).

    Attributes:
        port: the NatNet command port or the QTM RT port, on 127.0.0.1.
    """

    def __init__(self, make: Callable[[], object]) -> None:
        context = multiprocessing.get_context("fork")
        self._pipe, child = context.Pipe()
        self._lock = threading.Lock()
        self.process = context.Process(target=_serve, args=(make, child), daemon=True)
        self.process.start()
        child.close()
        self.port = self._answer(30.0)

    def call(self, method: str | None, *args) -> dict:
        with self._lock:
            self._pipe.send((method, args))
            return self._answer(10.0)

    def _answer(self, timeout: float):
        if not self._pipe.poll(timeout):
            raise TimeoutError(f"the server process did not answer within {timeout:g} s")
        answer = self._pipe.recv()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self) -> None:
        if self.process.is_alive():
            try:
                self.call("stop")
            except (OSError, EOFError, TimeoutError):
                pass
        self.process.join(5.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5.0)
        self._pipe.close()


def _serve(make: Callable[[], object], pipe) -> None:
    """The server process: build the server, say its port, run the calls until ``stop``."""
    try:
        server = make()
    except BaseException as exc:
        pipe.send(exc)
        return
    pipe.send(getattr(server, "command_port", None) or server.port)
    method = None
    while method != "stop":
        try:
            method, args = pipe.recv()
        except (EOFError, OSError):  # the test process is gone
            server.stop()
            return
        try:
            if method is not None:
                getattr(server, method)(*args)
            pipe.send({"sent": server.sent, "frame": getattr(server, "frame", None)})
        except Exception as exc:
            pipe.send(exc)


@pytest.fixture
def servers():
    """``start(make)``: a :class:`ServerProcess`, closed after the test."""
    started: list[ServerProcess] = []

    def start(make: Callable[[], object]) -> ServerProcess:
        started.append(ServerProcess(make))
        return started[-1]

    yield start
    for server in started:
        server.close()


def motive(take) -> Callable[[], MotiveSender]:
    """A Motive (NatNet 4.1, Y up, metres) streaming ``take`` at its rate; frame number i
    carries the take's frame ``i mod T``."""
    poses = frames_from_capture(take)  # torch: here, before the fork
    names = list(take.names)
    return lambda: MotiveSender(names, poses, take.fps)


def qtm(take) -> Callable[[], QTMServer]:
    """A QTM (Z up, mm) streaming ``take`` at its rate, untracked plates as NaN; frame number f
    carries the take's frame ``f mod T``."""
    pos_mm = np.where(take.valid[..., None], take.pos.astype(np.float64) * 1000.0, np.nan)
    rot = take.rot.astype(np.float64)
    names = list(take.names)
    return lambda: QTMServer(names, (pos_mm, rot), frequency=take.fps)


def natnet_source(server: ServerProcess) -> NatNetSource:
    return NatNetSource(command_port=server.port, data_port=0, up="y", timeout=5.0)


def qtm_source(server: ServerProcess) -> QualisysSource:
    return QualisysSource(port=server.port, timeout=5.0)


# ------------------------------------------------------------------------------ sessions


class Tapped:
    """A source passed on unchanged that keeps every frame it hands to the session, and how
    many it had handed out when the session was ready to pose (``ready_at``)."""

    def __init__(self, source) -> None:
        self.inner = source
        self.frames: list[RigidBodyFrame] = []
        self.ready_at = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def fps(self) -> float | None:
        return self.inner.fps

    @property
    def finite(self) -> bool:
        return self.inner.finite

    def open(self) -> None:
        self.inner.open()

    def read(self, timeout: float) -> RigidBodyFrame | None:
        frame = self.inner.read(timeout)
        if frame is not None:
            self.frames.append(frame)
        return frame

    def ready(self) -> None:
        self.ready_at = len(self.frames)
        self.inner.ready()

    def close(self) -> None:
        self.inner.close()


class Trigger(KeepingSink):
    """A :class:`KeepingSink` that runs ``action(pose)`` once, on a thread of its own (the
    consumer must not wait for it), when its ``at``-th pose arrives."""

    def __init__(self, at: int, action: Callable) -> None:
        super().__init__()
        self.at, self.action = at, action
        self.thread: threading.Thread | None = None

    def send(self, pose) -> None:
        super().send(pose)
        if len(self.poses) == self.at:
            self.thread = threading.Thread(target=self.action, args=(pose,), daemon=True)
            self.thread.start()


@dataclass
class Run:
    """What a session did: its counters, phases, the frames it received (``ready_at`` of them
    before it was ready to pose), the poses it gave."""

    stats: LiveStats
    phases: int
    received: list[RigidBodyFrame]
    poses: list
    ready_at: int = 0

    def __repr__(self) -> str:  # short: a failed assertion prints it
        return f"Run({len(self.received)} frames received, {len(self.poses)} poses)"


def stream(
    source,
    predictor,
    seconds: float,
    sinks: Sequence = (),
    subjects: Sequence[Subject] = (Subject(),),
    backend: str = "trace",
    keep: KeepingSink | None = None,
    hot: bool = False,
) -> Run:
    """Run a session on ``source`` for ``seconds`` of posing (or until a replay ends)."""
    keep = keep if keep is not None else KeepingSink()
    tapped = Tapped(source)
    options = LiveOptions(backend=backend, duration=seconds, wait_s=20.0, hot=hot)
    session = LiveSession(tapped, predictor, [keep, *sinks], list(subjects), options)
    stats = session.run()
    return Run(stats, session.phases, tapped.frames, keep.poses, tapped.ready_at)


def report(label: str, run: Run) -> dict:
    """Print the run's figures (shown with ``pytest -s``) and return them."""
    s = run.stats.summary()
    print(
        f"\n[{label}] received {s['received']}, posed {s['processed']}, dropped {s['dropped']}, "
        f"lost {s['lost']}, late {s['late']}, restarts {s['restarts']}, "
        f"reconnects {s['reconnects']}, "
        f"behind {s['behind']}, latency p50 {s['latency_p50_ms']:.3f} ms, "
        f"p99 {s['latency_p99_ms']:.3f} ms, max {s['latency_max_ms']:.3f} ms, "
        f"step p50 {s['step_p50_ms']:.3f} ms, p99 {s['step_p99_ms']:.3f} ms, "
        f"duplicates {s['duplicates']}, resets {s['resets']}"
    )
    return s


# ------------------------------------------------------------------------------ checks


def plate_columns(names: Sequence[str], subject: str, plates: Sequence[str]) -> np.ndarray:
    """(N,) where each marker-set plate of ``subject`` is among a frame's rigid-body names."""
    own = [f"{subject}_{p}" if subject else p for p in plates]
    return np.array([list(names).index(n) for n in own])


def offline_on_received(predictor, run: Run, subject: str = "") -> dict:
    """The causal model offline, per phase, on every frame in order that came after the
    session was ready (posed, or dropped and stepped without a pose; not a late one):
    {frame number: (rotmats (24, 3, 3), trans (3,))}."""
    by_number = {f.frame: f for f in run.received}
    assert len(by_number) == len(run.received), "frame numbers repeat: use this before a restart"
    numbers, newest = [], max((f.frame for f in run.received[: run.ready_at]), default=-1)
    for f in run.received[run.ready_at :]:
        if f.frame > newest:
            numbers.append(f.frame)
            newest = f.frame
    numbers = np.array(numbers)
    cols = plate_columns(run.received[0].names, subject, predictor.marker_names)
    size = int(numbers.max()) + 1
    pos = np.zeros((size, len(cols), 3), np.float32)
    rot = np.zeros((size, len(cols), 3, 3), np.float32)
    valid = np.zeros((size, len(cols)), bool)
    for f in numbers:
        frame = by_number[int(f)]
        pos[f], rot[f], valid[f] = frame.pos[cols], frame.rot[cols], frame.valid[cols]
    return offline_answer(predictor, pos, rot, valid, numbers, run.phases)


def assert_posed_as_offline(
    predictor, run: Run, subjects: Sequence[str] = ("",), phases: int = PHASES
) -> None:
    assert run.phases == phases
    assert run.stats.resets == 0, "a phase started afresh: its poses are not those of all frames"
    for subject in subjects:
        own = [p for p in run.poses if p.subject == subject]
        assert own, f"no pose of subject {subject!r}"
        worst = max_difference(own, offline_on_received(predictor, run, subject))
        assert worst < TOLERANCE, f"subject {subject!r}: streamed − offline up to {worst:.2e}"


def assert_every_frame_posed_or_dropped(run: Run) -> None:
    """Every frame received after the first one posed was posed, or counted as dropped or late
    (one may be left in the hand-off when the session ends)."""
    posed = {p.frame for p in run.poses}
    first = run.poses[0].frame
    after = {f.frame for f in run.received if f.frame >= first}
    missing = len(after - posed)
    dropped, late = run.stats.dropped, run.stats.late
    assert missing <= dropped + late + 1, (
        f"{missing} frames received but neither posed nor counted ({dropped} dropped, {late} late)"
    )
    assert (
        run.stats.processed == len(posed) == len(run.poses) // len({p.subject for p in run.poses})
    )


def assert_frames_carry_the_take(received: Sequence[RigidBodyFrame], take, atol=1e-5) -> None:
    """Each received frame number f holds the take's frame f mod T in rbmcap's conventions
    (metres, Z up, world-from-body), its untracked plates invalid."""
    assert received[0].names == tuple(take.names)
    k = np.array([f.frame for f in received]) % take.num_frames
    valid = np.stack([f.valid for f in received])
    np.testing.assert_array_equal(valid, take.valid[k])
    pos, rot = np.stack([f.pos for f in received]), np.stack([f.rot for f in received])
    np.testing.assert_allclose(pos[valid], take.pos[k][valid], atol=atol)
    np.testing.assert_allclose(rot[valid], take.rot[k][valid], atol=atol)


def assert_recording_holds_the_poses(npz: Path, bvh: Path, poses) -> None:
    motion = SMPLMotion.load(npz)
    frames = np.load(npz)["frame_numbers"]
    np.testing.assert_array_equal(frames, [p.frame for p in poses])
    rotvec = roma.rotmat_to_rotvec(torch.from_numpy(np.stack([p.rotmats for p in poses])))
    np.testing.assert_allclose(motion.poses.reshape(rotvec.shape), rotvec.numpy(), atol=1e-5)
    assert motion.fps == RATE
    assert f"Frames: {len(poses)}" in bvh.read_text()


# ------------------------------------------------------------------------------ sources


def test_natnet_stream_is_posed_frame_by_frame_as_the_causal_model_poses_it_offline(
    predictor, take, servers, tmp_path
):
    sender = servers(motive(take))
    npz, bvh = tmp_path / "live.npz", tmp_path / "live.bvh"
    record = RecordingSink(npz=npz, bvh=bvh)
    run = stream(natnet_source(sender), predictor, 4.0, sinks=[record])
    report("natnet trace 4 s", run)
    assert len(run.poses) > 240 * 4 * 0.5
    assert_frames_carry_the_take(run.received, take)
    assert_posed_as_offline(predictor, run)
    assert_every_frame_posed_or_dropped(run)
    assert_recording_holds_the_poses(npz, bvh, run.poses)


def test_replayed_take_is_posed_frame_by_frame_as_the_causal_model_poses_it_offline(
    predictor, take
):
    run = stream(ReplaySource(take), predictor, 2.0)
    report("replay trace 2 s", run)
    assert len(run.poses) > 240
    assert_frames_carry_the_take(run.received, take, atol=0.0)
    assert_posed_as_offline(predictor, run)
    assert_every_frame_posed_or_dropped(run)


def test_qtm_stream_is_posed_frame_by_frame_as_the_causal_model_poses_it_offline(
    predictor, take, servers
):
    server = servers(qtm(take))
    run = stream(qtm_source(server), predictor, 2.0)
    report("qtm trace 2 s", run)
    assert len(run.poses) > 240
    assert_frames_carry_the_take(run.received, take)
    assert_posed_as_offline(predictor, run)
    assert_every_frame_posed_or_dropped(run)


def test_four_subjects_are_posed_on_one_thread_never_more_than_a_frame_behind(
    predictor, take, servers
):
    sender = servers(motive(prefixed(take, list(SUBJECTS))))
    subjects = [Subject(name) for name in SUBJECTS]
    run = stream(natnet_source(sender), predictor, 2.0, subjects=subjects)
    report("natnet 4 subjects trace 2 s", run)
    assert run.stats.behind <= CATCH_UP
    assert_posed_as_offline(predictor, run, SUBJECTS)
    per_frame = {}
    for pose in run.poses:
        per_frame.setdefault(pose.frame, set()).add(pose.subject)
    assert all(s == set(SUBJECTS) for s in per_frame.values())
    assert_every_frame_posed_or_dropped(run)


@pytest.mark.slow
@pytest.mark.acceptance
@pytest.mark.parametrize("wait", ["idle", "hot"])
@pytest.mark.parametrize("kind", ["natnet", "replay", "qtm"])
def test_a_stream_at_240_hz_is_posed_as_offline_and_kept_up_with(
    lab_predictor, take, servers, kind, wait
):
    """Every pose the offline answer, every frame posed or counted, at least KEEP_UP of them
    posed, never more than a frame behind. Dropped frames and the latency are printed: the
    target of 0 dropped and p99 <= 1.5 ms is measured by ``make acceptance`` (docs/live.md)."""
    if kind == "natnet":
        source = natnet_source(servers(motive(take)))
    elif kind == "qtm":
        source = qtm_source(servers(qtm(take)))
    else:
        source = ReplaySource(take, loop=True)
    run = stream(source, lab_predictor, STREAM_SECONDS, backend="compiled", hot=wait == "hot")
    figures = report(f"{kind} compiled {wait} {STREAM_SECONDS:g} s", run)
    assert_posed_as_offline(lab_predictor, run)
    assert_every_frame_posed_or_dropped(run)
    assert figures["processed"] >= KEEP_UP * RATE * STREAM_SECONDS, figures
    assert run.stats.behind <= CATCH_UP
    if kind == "natnet":
        assert_what_a_lab_needs(figures, 1)


def assert_what_a_lab_needs(figures: dict, subjects: int) -> None:
    """In an acceptance run, at most :data:`LAB`'s share of frames dropped and latency p99."""
    if not FULL:
        return
    share, p99 = LAB[subjects]
    assert figures["dropped"] <= share * figures["received"], figures
    if p99 is not None:
        assert figures["latency_p99_ms"] <= p99, figures


@pytest.mark.slow
@pytest.mark.acceptance
def test_four_subjects_at_240_hz_never_fall_more_than_a_frame_behind(lab_predictor, take, servers):
    sender = servers(motive(prefixed(take, list(SUBJECTS))))
    subjects = [Subject(name) for name in SUBJECTS]
    run = stream(
        natnet_source(sender), lab_predictor, STREAM_SECONDS, subjects=subjects, backend="compiled"
    )
    figures = report(f"natnet 4 subjects compiled {STREAM_SECONDS:g} s", run)
    assert run.stats.behind <= CATCH_UP
    assert_posed_as_offline(lab_predictor, run, SUBJECTS)
    assert_every_frame_posed_or_dropped(run)
    assert figures["processed"] >= KEEP_UP * RATE * STREAM_SECONDS, figures
    assert_what_a_lab_needs(figures, 4)


@pytest.mark.slow
@pytest.mark.acceptance
def test_eight_subjects_at_120_hz_are_posed_as_offline_and_kept_up_with(lab_predictor, servers):
    """Eight subjects in one batched step, two phases of the 60 Hz model."""
    names = [f"s{k}" for k in range(1, 9)]
    take = prefixed(synthetic_take(TAKE_FRAMES // 2, fps=RATE / 2), names)
    run = stream(
        natnet_source(servers(motive(take))),
        lab_predictor,
        STREAM_SECONDS,
        subjects=[Subject(name) for name in names],
        backend="compiled",
    )
    figures = report(f"natnet 8 subjects 120 Hz compiled {STREAM_SECONDS:g} s", run)
    assert run.stats.behind <= CATCH_UP
    assert_posed_as_offline(lab_predictor, run, names, phases=PHASES // 2)
    assert_every_frame_posed_or_dropped(run)
    assert figures["processed"] >= KEEP_UP * RATE / 2 * STREAM_SECONDS, figures
    assert_what_a_lab_needs(figures, 8)


# ------------------------------------------------------------------------------ faults


def test_five_percent_packet_loss_is_counted_and_every_frame_that_came_is_posed(
    predictor, take, servers
):
    sender = servers(motive(take))
    sender.call("drop", 0.05)
    run = stream(natnet_source(sender), predictor, 2.0)
    report("natnet 5% loss", run)
    stats = run.stats
    assert 0.025 <= stats.lost / (stats.received + stats.lost) <= 0.085
    assert stats.restarts == 0 and stats.reconnects == 0
    assert len(run.poses) > 240
    assert_posed_as_offline(predictor, run)
    assert_every_frame_posed_or_dropped(run)


def test_a_rigid_body_gone_for_two_seconds_does_not_stop_the_stream(predictor, take, servers):
    sender = servers(motive(take))
    gone: dict[str, int] = {}

    def hide(pose) -> None:
        gone["start"], gone["stop"] = pose.frame + 48, pose.frame + 48 + int(2 * RATE)
        sender.call("hide", "left_forearm", gone["start"], gone["stop"])

    trigger = Trigger(at=60, action=hide)
    run = stream(natnet_source(sender), predictor, 3.2, keep=trigger)
    report("natnet plate gone 2 s", run)
    trigger.thread.join()
    column = take.names.index("left_forearm")
    during = [f for f in run.received if gone["start"] <= f.frame < gone["stop"]]
    assert len(during) > 0.9 * 2 * RATE and not any(f.valid[column] for f in during)
    posed = np.array([p.frame for p in run.poses])
    assert ((posed >= gone["start"]) & (posed < gone["stop"])).sum() > 0.5 * 2 * RATE
    assert (posed >= gone["stop"]).sum() > 0.2 * RATE  # and it goes on after
    assert_posed_as_offline(predictor, run)
    assert_every_frame_posed_or_dropped(run)


def test_a_restarted_sender_is_found_again_and_the_stream_goes_on(predictor, take, servers):
    sender = servers(motive(take))
    trigger = Trigger(at=120, action=lambda pose: sender.call("restart"))
    run = stream(natnet_source(sender), predictor, 3.0, keep=trigger)
    report("natnet sender restarted", run)
    trigger.thread.join()
    frames = np.array([p.frame for p in run.poses])
    back = np.flatnonzero(np.diff(frames) < 0)
    assert len(back) == 1, "the frame numbers start again once, at the restart"
    after = frames[back[0] + 1 :]
    assert after[0] < RATE and len(after) > 0.5 * RATE
    assert run.stats.restarts + run.stats.reconnects >= 1
    assert run.stats.lost >= 0


@pytest.mark.slow  # CI's serial stage: beside make test's other worker it fell 2 frames behind
def test_a_slow_sink_makes_the_session_drop_frames_and_count_them_never_queue(
    predictor, take, servers
):
    sender = servers(motive(take))
    slow = KeepingSink(delay_s=0.02)  # 50 poses/s against 240 frames/s
    run = stream(natnet_source(sender), predictor, 1.5, keep=slow)
    report("natnet slow sink", run)
    stats = run.stats
    assert stats.dropped > 150 and stats.processed < 100
    assert stats.processed + stats.dropped <= stats.received
    # never queued: a frame behind at most, or BURST where the sender's frames came together (a
    # loopback sender descheduled for a moment sends a burst; the session's contract, which
    # tests/live/test_session.py checks on an exact burst). In CI a burst once gave 2.
    assert stats.behind <= BURST
    assert_every_frame_posed_or_dropped(run)


# ------------------------------------------------------------------------------ the command


class Datagrams:
    """A UDP socket on 127.0.0.1 (an OS-chosen port) keeping every datagram, on a thread."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._halt.is_set():
            try:
                self.received.append(self.sock.recv(65536))
            except TimeoutError:
                continue
            except OSError:
                return

    def wait_for(self, count: int, seconds: float, while_=lambda: True) -> bool:
        end = time.monotonic() + seconds
        while len(self.received) < count and time.monotonic() < end and while_():
            time.sleep(0.02)
        return len(self.received) >= count

    def close(self) -> None:
        self._halt.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def datagrams():
    receiver = Datagrams()
    yield receiver
    receiver.close()


def _messages(bundle: OscBundle) -> list:
    return [bundle.content(i) for i in range(bundle.num_contents)]


def test_vmc_receiver_gets_every_bone_of_every_frame_posed(predictor, take, datagrams):
    vmc = VMCSink(port=datagrams.port)
    run = stream(ReplaySource(take), predictor, 1.5, sinks=[vmc])
    assert len(run.poses) > 120
    datagrams.wait_for(len(run.poses), 2.0)
    assert len(datagrams.received) == len(run.poses) == vmc.sent
    for dgram in datagrams.received:
        messages = _messages(OscBundle(dgram))
        bones = [m.params[0] for m in messages if m.address == "/VMC/Ext/Bone/Pos"]
        assert bones == list(UNITY_BONES)
        assert messages[0].address == "/VMC/Ext/Root/Pos"
        assert all(np.isfinite(m.params[1:]).all() for m in messages[:-2])


def rbmcap_live(args: list[str], **popen) -> subprocess.Popen:
    """``rbmcap live ARGS`` in a process of its own (one torch thread, the tests' cache)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", WANDB_MODE="disabled")
    return subprocess.Popen(
        [sys.executable, "-m", "rbmcap", "live", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def terminate_once_posing(proc: subprocess.Popen, vmc: Datagrams, poses: int = 120):
    """Wait for ``poses`` VMC bundles (the command is posing), send SIGTERM; (stdout, stderr,
    exit status)."""
    posing = vmc.wait_for(poses, 120.0, while_=lambda: proc.poll() is None)
    if posing:
        proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=60.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    assert posing, f"rbmcap live never posed {poses} frames; stderr:\n{err}"
    return out, err, proc.returncode


def assert_stopped_cleanly(out: str, err: str, status: int, npz: Path, bvh: Path) -> dict:
    """Exit 0 without a traceback; the summary says interrupted; the recording holds every pose
    (frame numbers rising, the gaps no more than the frames dropped); the BVH the same count."""
    assert status == 0, f"exit status {status}; stderr:\n{err}"
    assert "Traceback" not in err
    summary = json.loads(out)
    assert summary["interrupted"] is True
    motion = SMPLMotion.load(npz)
    frames = np.load(npz)["frame_numbers"]
    steps = np.diff(frames)
    assert motion.num_frames == len(frames) == summary["processed"] > 0
    assert (steps >= 1).all() and (steps - 1).sum() <= summary["dropped"]
    assert f"Frames: {len(frames)}" in bvh.read_text()
    assert sorted(summary["written"]) == sorted([str(npz), str(bvh)])
    return summary


def test_sigterm_stops_rbmcap_live_and_writes_the_recording(take, tmp_path, datagrams):
    take.save(tmp_path / "take.npz")
    npz, bvh = tmp_path / "out.npz", tmp_path / "out.bvh"
    args = [f"replay:{tmp_path / 'take.npz'}", "--backend", "trace", "--loop", "--json"]
    args += ["--record", str(npz), "--bvh", str(bvh), "--vmc", f"127.0.0.1:{datagrams.port}"]
    out, err, status = terminate_once_posing(rbmcap_live(args), datagrams)
    summary = assert_stopped_cleanly(out, err, status, npz, bvh)
    print(f"\n[rbmcap live replay, SIGTERM] {summary}")


@pytest.mark.slow
def test_sigterm_stops_rbmcap_live_on_a_natnet_stream(take, tmp_path, servers, datagrams):
    sender = servers(motive(take))
    npz, bvh = tmp_path / "out.npz", tmp_path / "out.bvh"
    args = [f"natnet://127.0.0.1:{sender.port}", "--data-port", "0", "--up", "y"]
    args += ["--backend", "trace", "--json", "--record", str(npz), "--bvh", str(bvh)]
    args += ["--vmc", f"127.0.0.1:{datagrams.port}"]
    out, err, status = terminate_once_posing(rbmcap_live(args), datagrams)
    summary = assert_stopped_cleanly(out, err, status, npz, bvh)
    print(f"\n[rbmcap live natnet, SIGTERM] {summary}")
