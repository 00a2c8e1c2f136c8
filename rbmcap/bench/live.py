"""``rbmcap bench live``: a live session's packet-received → pose-sent latency and lost frames.

A NatNet server (:class:`~rbmcap.bench.natnet_server.NatNetServer`, NatNet 4.1, unicast on
loopback) runs in a child process, so its send loop shares no interpreter lock with the session,
and streams rbm14 plates of a procedural walk on the stand-in (one subject, or four with their
plates prefixed ``s1_``…``s4_``) at 120, 240 and 360 Hz. In this process a
:class:`~rbmcap.inference.stream.StreamSession`-backed :class:`~rbmcap.live.session.LiveSession`
receives them through :class:`~rbmcap.live.sources.natnet.NatNetSource` on one torch thread,
poses every subject with the shipped causal model (``compiled``; ``trace`` in ``quick``) and
sends each pose as VMC over OSC to a loopback port, first waiting idle between frames, then
``hot`` (:attr:`~rbmcap.live.session.LiveOptions.hot`). Per run: latency p50/p99/max (from
the packet's arrival to the last pose sent), the step's p50/p99 as paced by the stream (posing
every subject of a frame, :attr:`~rbmcap.live.frames.LiveStats.steps_ms`), and the session's
counters (:data:`~rbmcap.live.frames.COUNTERS`: received, posed, dropped, lost, late,
duplicates, restarts, resets, how far the consumer fell behind).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import tempfile
from pathlib import Path

import numpy as np
import torch

from rbmcap.bench.natnet_server import NatNetServer
from rbmcap.io.capture import Capture
from rbmcap.live.frames import COUNTERS
from rbmcap.live.session import LiveOptions, LiveSession
from rbmcap.live.sinks.vmc import VMCSink
from rbmcap.live.sources.natnet import NatNetSource
from rbmcap.live.subject import Subject
from rbmcap.markers.markerset import DEFAULT_MARKERS, load_marker_set

RATES = (120.0, 240.0, 360.0)
SUBJECTS = (1, 4)
SUBJECT_NAMES = tuple(f"s{k}" for k in range(1, 9))
"""Subjects' name prefixes, up to eight (``subjects`` may ask for up to eight)."""


def run(
    quick: bool = False,
    seconds: float | None = None,
    precision: str | None = None,
    rates: tuple[float, ...] | None = None,
    subjects: tuple[int, ...] | None = None,
    busy: bool = False,
) -> dict:
    """Every rate × subject count for ``seconds`` each (default 20; ``quick``: 2 s, 240 Hz and
    one subject only, the trace backend), waiting idle between frames, then hot; the network's
    weights held as ``precision`` (:mod:`rbmcap.inference.narrow`; None: as ``rbmcap live``
    holds them, bfloat16 compiled and float32 traced). ``rates`` and ``subjects``
    narrow the runs (default :data:`RATES` × :data:`SUBJECTS`; up to eight subjects). ``busy``
    runs a CPU-bound neighbour (:func:`neighbour`: matrix products on one thread, as a training
    run keeps a core busy) in another process throughout, as on a lab PC that also runs the
    capture software."""
    # Not at the top: the spawned server process imports this module, and needs no model code.
    from rbmcap.inference import Predictor

    seconds = seconds or (2.0 if quick else 20.0)
    backend = "trace" if quick else "compiled"
    precision = precision or ("float32" if quick else "bfloat16")
    rates = rates or ((240.0,) if quick else RATES)
    counts = subjects or ((1,) if quick else SUBJECTS)
    predictor = Predictor.from_checkpoint("standin-rbm14-stream", precision=precision)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    runs = []
    ctx = multiprocessing.get_context("spawn")
    stop_neighbour = ctx.Event()
    busy_process = ctx.Process(target=neighbour, args=(stop_neighbour,), daemon=True)
    try:
        if busy:
            busy_process.start()
        with tempfile.TemporaryDirectory(prefix="rbmcap-bench-live-") as tmp:
            takes = {n: _take(Path(tmp), n) for n in counts}
            for hot in (False, True):
                for count in counts:
                    for rate in rates:
                        take = takes[count]
                        runs.append(_measure(predictor, take, rate, count, seconds, backend, hot))
    finally:
        torch.set_num_threads(threads)
        stop_neighbour.set()
        if busy:
            busy_process.join(timeout=10)
    return {
        "backend": backend,
        "precision": precision,
        "seconds_per_run": seconds,
        "torch_threads_session": 1,
        "busy_neighbour": busy,
        "sink": "vmc (OSC over UDP, loopback)",
        "runs": runs,
    }


def neighbour(stop) -> None:
    """A CPU-bound process until ``stop`` is set: 512 × 512 float32 products on one thread,
    whose operands (3 MB) also take the cache a training step would."""
    torch.set_num_threads(1)
    a = torch.randn(512, 512)
    b = torch.randn(512, 512)
    while not stop.is_set():
        for _ in range(20):
            a = torch.tanh(a @ b)


def _take(folder: Path, subjects: int) -> Path:
    """An rbm14 take of a procedural walk (10 s at 240 Hz), prefixed per subject when several,
    saved as a capture ``.npz`` for the server's process."""
    from rbmcap.bench.infer import sample_observations  # model code: as for Predictor in run()

    obs, *_ = sample_observations(2400)
    names = list(load_marker_set(DEFAULT_MARKERS).names)
    capture = Capture(fps=240.0, names=names, pos=obs.pos, rot=obs.rot, valid=obs.valid)
    if subjects > 1:
        capture = _prefixed(capture, SUBJECT_NAMES[:subjects])
    return capture.save(folder / f"take_{subjects}.npz")


def _prefixed(capture, subjects):
    k = len(subjects)
    shift = np.concatenate([np.tile([[2.0 * i, 0, 0]], (capture.num_plates, 1)) for i in range(k)])
    valid = np.tile(capture.valid, (1, k))
    pos = np.tile(capture.pos, (1, k, 1)) + shift.astype(np.float32)
    return Capture(
        fps=capture.fps,
        names=[f"{s}_{n}" for s in subjects for n in capture.names],
        pos=np.where(valid[..., None], pos, 0.0),
        rot=np.tile(capture.rot, (1, k, 1, 1)),
        valid=valid,
    )


def _measure(
    predictor, take: Path, rate: float, subjects: int, seconds: float, backend: str, hot: bool
):
    ctx = multiprocessing.get_context("spawn")
    ports, stop = ctx.Queue(), ctx.Event()
    server = ctx.Process(target=serve, args=(str(take), rate, ports, stop), daemon=True)
    server.start()
    try:
        port = ports.get(timeout=120)
        who = [Subject(s) for s in SUBJECT_NAMES[:subjects]] if subjects > 1 else [Subject()]
        with _receiver() as vmc_port:
            sink = VMCSink(port=vmc_port)
            options = LiveOptions(backend=backend, duration=seconds, wait_s=30.0, hot=hot)
            source = NatNetSource(command_port=port)
            session = LiveSession(source, predictor, [sink], who, options)
            stats = session.run()
    finally:
        stop.set()
        server.join(timeout=10)
    summary = stats.summary()
    return {
        "rate_hz": rate,
        "subjects": subjects,
        "hot": hot,
        "phases": session.phases,
        **{k: summary[k] for k in COUNTERS if k != "reconnects"},
        **{k: summary[k] for k in summary if k.startswith(("latency_", "step_"))},
    }


def serve(take: str, rate: float, ports, stop) -> None:
    """The server process: stream ``take`` at ``rate`` until ``stop`` is set; its command port
    goes to ``ports``."""
    server = NatNetServer(Capture.load(take), fps=rate).start()
    ports.put(server.command_port)
    try:
        while not stop.wait(0.2):
            pass
    finally:
        server.stop()


@contextlib.contextmanager
def _receiver():
    """A loopback UDP port held open for the run (where a VMC receiver would listen)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]
