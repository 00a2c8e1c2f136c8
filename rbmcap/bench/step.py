"""``rbmcap bench step``: a live stream's frame step, timed back to back and paced at capture
rates, for each type the network's weights may be held in and each subject count.

The step is :class:`~rbmcap.inference.stream.StreamSession`'s ``push`` (plates in, the frame's
pose out: features, the GRU step, decoding, the plate fit) of the shipped stream model on one
torch thread, ``compiled`` (``trace`` in ``quick``), for ``float32`` and the narrow types of
:mod:`rbmcap.inference.narrow`, with 1, 4 and 8 subjects stepped together. Back to back, the
step's weights and code stay in the core's caches; paced, the session sleeps until the next
frame is due, as a live session waiting idle does, and whatever else the machine runs meanwhile
takes the cache. Each variant is timed in turn within every round, so a change of load on the
machine reaches all of them alike; the figures are each variant's p50/p99 over every round.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from rbmcap.inference import Predictor
from rbmcap.inference.narrow import PRECISIONS, matrix_bytes

STREAM_CHECKPOINT = "standin-rbm14-stream"
RATES = (120.0, 240.0, 360.0)
SUBJECTS = (1, 4, 8)


def run(
    quick: bool = False,
    ckpt: str | None = None,
    seconds: float | None = None,
    rounds: int | None = None,
) -> dict:
    """Every precision × subject count, back to back and paced at each of :data:`RATES`, in
    ``rounds`` rounds of ``seconds`` per rate (default 3 × 2 s; ``quick``: one round of 0.2 s,
    one subject, 240 Hz, the trace backend)."""
    from rbmcap.bench.infer import sample_observations  # model code: as in bench live

    seconds = seconds or (0.2 if quick else 2.0)
    rounds = rounds or (1 if quick else 3)
    backend = "trace" if quick else "compiled"
    rates, counts = ((240.0,), (1,)) if quick else (RATES, SUBJECTS)
    obs, *_ = sample_observations(600)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        variants = {}
        for precision in PRECISIONS:
            predictor = Predictor.from_checkpoint(ckpt or STREAM_CHECKPOINT, precision=precision)
            for subjects in counts:
                session = predictor.stream(backend=backend, subjects=subjects)
                frames = _frames(obs, subjects)
                _paced(session, frames, 50, 0.0)  # built and warm
                weights = matrix_bytes(predictor.model.net)
                variants[(precision, subjects)] = (session, frames, weights)
        times: dict[tuple, list[float]] = {}
        for _ in range(rounds):
            for key, (session, frames, _) in variants.items():
                times.setdefault((*key, 0.0), []).extend(_paced(session, frames, 200, 0.0))
                for rate in rates:
                    count = max(1, int(seconds * rate))
                    times.setdefault((*key, rate), []).extend(
                        _paced(session, frames, count, 1.0 / rate)
                    )
    finally:
        torch.set_num_threads(threads)
    weights = {key: bytes_ for key, (_, _, bytes_) in variants.items()}
    return {
        "ckpt": ckpt or STREAM_CHECKPOINT,
        "backend": backend,
        "torch_threads": 1,
        "rounds": rounds,
        "seconds_per_rate": seconds,
        "runs": _rows(times, weights),
    }


def _rows(times: dict[tuple, list[float]], weights: dict[tuple, int]) -> list[dict]:
    """One row per precision × subjects × rate (0: back to back) with its step percentiles."""
    return [
        {
            "precision": precision,
            "subjects": subjects,
            "rate_hz": rate or None,
            "paced": bool(rate),
            "steps": len(ms),
            "step_p50_ms": float(np.percentile(ms, 50)),
            "step_p99_ms": float(np.percentile(ms, 99)),
            "weights_mb": weights[(precision, subjects)] / 1e6,
        }
        for (precision, subjects, rate), ms in times.items()
    ]


def _frames(obs, subjects: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every frame of ``obs`` for ``subjects`` subjects (the same plates, stacked)."""
    frames = []
    for i in range(len(obs.pos)):
        frame = (obs.pos[i], obs.rot[i], obs.valid[i])
        if subjects > 1:
            frame = tuple(np.stack([a] * subjects) for a in frame)
        frames.append(frame)
    return frames


def _paced(session, frames, count: int, period: float) -> list[float]:
    """Milliseconds of ``count`` pushes, each ``period`` s after the one before (sleeping in
    between; 0: back to back)."""
    out = []
    due = time.perf_counter()
    for i in range(count):
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        start = time.perf_counter()
        session.push(*frames[i % len(frames)])
        out.append(1e3 * (time.perf_counter() - start))
        due = max(due + period, time.perf_counter()) if period else due
    return out
