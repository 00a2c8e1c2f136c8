"""Live refinement in a live run: ``rbmcap live --refine`` sends refined poses to its sinks and
says what refinement did, and a NatNet stream at 120 Hz is refined within its frames.

The ``acceptance`` stream runs the compiled backend for :data:`STREAM_SECONDS`: seconds in CI, a
minute in an acceptance run (``RBMCAP_ACCEPTANCE=1``), which also holds it to the target (0
frames dropped, latency p99 ≤ 8 ms) whose figures ``docs/live.md`` records.
"""

from __future__ import annotations

import json
import multiprocessing

import numpy as np
import pytest
import torch
from helpers.acceptance import FULL, length
from helpers.live import KeepingSink, offline_answer, synthetic_take
from helpers.natnet_sender import MotiveSender, frames_from_capture

from rbmcap.baseline import Solver
from rbmcap.baseline.objective import predict_markers
from rbmcap.calibrate.calibration import Calibration, PlateOffset
from rbmcap.cli.live import DEFAULT_REFINE_S
from rbmcap.cli.main import build_parser, main
from rbmcap.inference import Predictor
from rbmcap.inference.capture import checkpoint_body
from rbmcap.inference.stream import StreamSession
from rbmcap.live.session import BURST, LiveOptions, LiveSession
from rbmcap.live.sources.natnet import NatNetSource
from rbmcap.live.sources.replay import ReplaySource
from rbmcap.live.subject import Subject
from rbmcap.motion.smpl_motion import SMPLMotion

# Real-time streams: under pytest-xdist each runs with no other test alongside.
pytestmark = pytest.mark.exclusive

RATE = 120.0
"""The acceptance stream's rate, Hz (two phases of the 60 Hz model)."""
STREAM_SECONDS = length(5.0, 60.0)
"""Seconds of the acceptance stream: 5 by default, a minute in an acceptance run."""
KEEP_UP = 0.75
"""The least share of the stream's frames posed (as the other live streams ask on any
machine)."""
TARGET_P99_MS = 8.0
"""The acceptance run's latency target at 120 Hz with refinement."""


@pytest.fixture(scope="module")
def predictor():
    return Predictor.from_checkpoint("standin-rbm14-stream")


def plate_error(body, solver, rotmats, trans, betas, pos, valid) -> float:
    """Mean distance (m) of the plates of the body posed by (rotmats (T, 24, 3, 3), trans,
    betas) from the observed seen ones."""
    with torch.no_grad():
        pred, _ = predict_markers(
            body,
            solver.topology,
            torch.as_tensor(rotmats),
            torch.as_tensor(betas),
            torch.as_tensor(trans),
        )
    seen = torch.as_tensor(valid)
    return float((pred - torch.as_tensor(pos)).norm(dim=-1)[seen].mean())


def test_rbmcap_live_refine_records_poses_closer_to_the_plates(predictor, tmp_path, capsys):
    """A 60 Hz take replayed at 30 frames/s (one phase), refined 15 ms a frame."""
    take = synthetic_take(60, fps=60.0)
    path = take.save(tmp_path / "take.npz")
    out = tmp_path / "rec.npz"
    argv = ["live", f"replay:{path}", "--backend", "trace", "--rate", "30", "--record", str(out)]
    assert main([*argv, "--refine", "0.015", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    refine = summary["refine"]
    assert refine["budget_ms"] == pytest.approx(15.0)
    assert refine["frames"] == summary["processed"] > 40
    assert refine["steps_mean"] > 0.5
    motion = SMPLMotion.load(out)
    frames = np.load(out)["frame_numbers"]
    network = offline_answer(predictor, take.pos, take.rot, take.valid, np.arange(60), 1)
    body = checkpoint_body(predictor.body_id)
    solver = Solver(body, "rbm14")
    pos, valid = take.pos[frames], take.valid[frames]
    refined = plate_error(
        body,
        solver,
        motion.rotmats().astype(np.float32),
        motion.trans,
        motion.betas,
        pos,
        valid,
    )
    net_rot = np.stack([network[int(f)][0] for f in frames])
    net_trans = np.stack([network[int(f)][1] for f in frames])
    plain = plate_error(body, solver, net_rot, net_trans, motion.betas, pos, valid)
    assert refined < 0.95 * plain, (refined, plain)


def test_refine_without_seconds_takes_the_default_and_a_bad_budget_is_one_error(capsys):
    args = build_parser().parse_args(["live", "replay:x.npz", "--refine"])
    assert args.refine == DEFAULT_REFINE_S
    assert main(["live", "replay:x.npz", "--refine", "-1"]) == 2
    assert "refine budget -1" in capsys.readouterr().err


def test_a_calibrated_subject_is_refined_with_its_calibrations_shape(predictor, monkeypatch):
    """The sinks get a calibrated subject's betas: refinement holds the same shape."""
    take = synthetic_take(30, fps=60.0)
    betas = np.zeros(10, np.float32)
    betas[0] = 1.0
    zero = np.zeros(3)
    plates = {n: PlateOffset(rotation=zero, position=zero, residual_mm=0.0) for n in take.names}
    calibration = Calibration(
        betas=betas, frames=[[0]], rotation=zero, translation=zero, plates=plates
    )
    held = []
    push = StreamSession.push

    def spy(self, pos, rot, valid, betas=None, **kwargs):
        held.append(betas)
        return push(self, pos, rot, valid, betas=betas, **kwargs)

    monkeypatch.setattr(StreamSession, "push", spy)
    options = LiveOptions(backend="trace", refine=0.005)
    subjects = [Subject("", calibration)]
    LiveSession(ReplaySource(take, rate=30.0), predictor, [KeepingSink()], subjects, options).run()
    posed = [b for b in held if b is not None]  # the warm-up's rest frames hold none
    assert len(posed) > 10
    assert all(np.array_equal(b, betas) for b in posed)


# ------------------------------------------------------------------------------ acceptance


def _serve(names, arrays, fps, pipe) -> None:
    """A Motive sender in a forked process (its send loop would hold the interpreter lock the
    session needs): says its command port, streams until told to stop."""
    sender = MotiveSender(names, arrays, fps)
    pipe.send(sender.command_port)
    try:
        pipe.recv()
    except EOFError:
        pass
    sender.stop()


@pytest.mark.slow
@pytest.mark.acceptance
def test_a_120_hz_stream_is_refined_within_its_frames(predictor):
    """One subject at 120 Hz over NatNet, refined within :data:`DEFAULT_REFINE_S` a frame:
    refinement runs, at least KEEP_UP of the frames are posed and the session is never more
    than a frame behind (two in a burst); an acceptance run also holds it to 0 dropped and p99
    ≤ 8 ms. The figures are printed (``pytest -s``)."""
    take = synthetic_take(1200, fps=RATE)
    arrays = frames_from_capture(take)  # torch: here, before the fork
    context = multiprocessing.get_context("fork")
    pipe, child = context.Pipe()
    server = context.Process(
        target=_serve, args=(list(take.names), arrays, RATE, child), daemon=True
    )
    server.start()
    try:
        assert pipe.poll(30.0), "the sender did not start"
        port = pipe.recv()
        source = NatNetSource(command_port=port, data_port=0, up="y", timeout=5.0)
        options = LiveOptions(
            backend="compiled", duration=STREAM_SECONDS, wait_s=20.0, refine=DEFAULT_REFINE_S
        )
        session = LiveSession(source, predictor, [KeepingSink()], options=options)
        stats = session.run()
    finally:
        pipe.send("stop")
        server.join(10.0)
        if server.is_alive():
            server.kill()
    s = stats.summary()
    refined = [x.refine_stats for x in session.group.sessions]
    frames = sum(r.frames for r in refined)
    steps = sum(r.iterations for r in refined) / max(frames, 1)
    stepped = sum(r.stepped for r in refined) / max(frames, 1)
    ms = 1e3 * sum(r.seconds for r in refined) / max(frames, 1)
    print(
        f"\n[natnet 120 Hz refined {DEFAULT_REFINE_S * 1e3:g} ms, {STREAM_SECONDS:g} s] "
        f"received {s['received']}, posed {s['processed']}, dropped {s['dropped']}, "
        f"behind {s['behind']}, refinement {steps:.2f} steps {ms:.2f} ms a frame "
        f"({100 * stepped:.1f}% of frames stepped), latency "
        f"p50 {s['latency_p50_ms']:.2f} ms, p99 {s['latency_p99_ms']:.2f} ms, "
        f"max {s['latency_max_ms']:.2f} ms"
    )
    assert session.phases == 2
    assert steps >= 1.0, steps
    assert s["processed"] >= KEEP_UP * RATE * STREAM_SECONDS, s
    assert stats.behind <= BURST  # a frame, or the frames a burst of the sender brought at once
    if FULL:
        assert s["dropped"] == 0, s
        assert s["latency_p99_ms"] <= TARGET_P99_MS, s
