"""``rbmcap bench refine``: live refinement's accuracy against its time budget.

Each held-out sequence is streamed frame by frame through the shipped stream model
(``Predictor.stream``, the ``compiled`` backend, one torch thread) at the model's rate, as one
phase of a live source sees it, once per budget of :data:`BUDGETS_MS` (0: the network alone;
the refinement of :mod:`rbmcap.inference.refine` otherwise), back to back (not paced). Per
budget and set: MPJPE against the true joints (mm, no alignment; each frame's joints posed with
the betas the stream held at that frame, as a live sink receives them), the steps a frame took
(mean, and the share of frames refined), and the refinement's time per frame after the
network's step (mean, p99) beside the whole frame's (network included, p99). One more pass caps
the steps instead of the time (:data:`CONVERGED_STEPS` a frame, no deadline): what the
refinement approaches given time.

The sets: with ``data`` (a dataset such as ``data/real_n2000_s0_b1000_rbm14_realistic``), the
test split's real CMU subject (``cmu-iclone/*``) and Bandai styles (``bandai/*``); without it,
a realistic synthetic walk (1,800 frames). ``quick`` (smoke tests): 120 frames of the walk,
budgets 0 and 10 ms, the trace backend, no converged pass.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from rbmcap.bench.infer import sample_observations
from rbmcap.body import load_body_model
from rbmcap.dataset import RBMDataset
from rbmcap.errors import DataError
from rbmcap.evaluation.sequences import Split
from rbmcap.inference import Predictor
from rbmcap.inference.capture import checkpoint_body
from rbmcap.inference.refine import RefineOptions
from rbmcap.metrics.positions import mpjpe

STREAM_CHECKPOINT = "standin-rbm14-stream"
BUDGETS_MS = (0.0, 1.0, 2.0, 3.0, 4.0, 6.0)
"""Refinement budgets per frame (ms)."""
CONVERGED_STEPS = 10
"""Steps a frame of the converged pass (no deadline)."""
SETS = {"cmu": "cmu-iclone/*", "bandai": "bandai/*"}
"""The held-out real sets of a dataset's test split, by the glob of their sequence names."""


def run(
    quick: bool = False,
    data: str | None = None,
    budgets: tuple[float, ...] | None = None,
    ckpt: str | None = None,
) -> dict:
    """Accuracy, steps and time of live refinement at each budget (ms); see the module
    docstring. Returns ``rows``: one per set and budget (``budget_ms`` None for the converged
    pass), and the set-up (model, backend, sets and their frames)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(quick, data, budgets, ckpt)
    finally:
        torch.set_num_threads(threads)


def _run(quick: bool, data: str | None, budgets, ckpt: str | None) -> dict:
    predictor = Predictor.from_checkpoint(ckpt or STREAM_CHECKPOINT)
    backend = "trace" if quick else "compiled"
    budgets = tuple(budgets) if budgets else ((0.0, 10.0) if quick else BUDGETS_MS)
    if data:
        body = checkpoint_body(predictor.body_id)
        sets = {name: _real(data, name, glob) for name, glob in SETS.items()}
    else:
        body = load_body_model("standin")
        sets = {"walk": _walk(body, 120 if quick else 1800)}
    passes = [(b, RefineOptions(b * 1e-3) if b > 0 else None) for b in budgets]
    if not quick:
        passes.append((None, RefineOptions(60.0, max_iterations=CONVERGED_STEPS)))
    rows = []
    for name, sequences in sets.items():
        for budget, refine in passes:
            row = _stream(predictor, body, sequences, backend, refine)
            rows.append({"set": name, "budget_ms": budget, **row})
    return {
        "model": ckpt or STREAM_CHECKPOINT,
        "backend": backend,
        "fps": predictor.fps,
        "sets": {name: sum(len(s[0]) for s in seqs) for name, seqs in sets.items()},
        "converged_steps": None if quick else CONVERGED_STEPS,
        "rows": rows,
    }


def _real(data: str, name: str, glob: str) -> list[tuple]:
    """(pos, rot, valid, true joints) of each test sequence of ``data`` matching ``glob`` (the
    set ``name``).

    Raises:
        DataError: the test split has no such sequence.
    """
    split = Split(RBMDataset(data, "test"), sequences=glob)
    out = [(*(np.array(a) for a in seq.observations), np.array(seq.joints)) for seq in split]
    if not out:
        raise DataError(
            f"{data}: its test split has no {name} sequence (none named {glob!r}); "
            f"`rbmcap bench refine --data` needs the sets {', '.join(SETS)}"
        )
    return out


def _walk(body, frames: int) -> list[tuple]:
    """A realistic synthetic walk as one sequence: (pos, rot, valid, true joints)."""
    obs, poses, trans, betas = sample_observations(frames)
    with torch.no_grad():
        joints, _ = body.pose_joints(
            torch.as_tensor(poses), torch.as_tensor(betas), torch.as_tensor(trans)
        )
    return [(obs.pos, obs.rot, obs.valid, joints.numpy())]


def _stream(predictor, body, sequences, backend: str, refine) -> dict:
    """Every sequence streamed through one session each (sharing a refiner), scored."""
    template = predictor.stream(backend=backend, refine=refine)
    errors, steps, refine_ms, frame_ms = [], [], [], []
    for pos, rot, valid, truth in sequences:
        session = template.fork()
        rotmats, trans, betas = [], [], []
        for t in range(len(pos)):
            t0 = time.perf_counter()
            r, tr = session.push(pos[t], rot[t], valid[t])
            frame_ms.append(1e3 * (time.perf_counter() - t0))
            stats = session.refine_stats
            if stats is not None:
                steps.append(stats.last_iterations)
                refine_ms.append(1e3 * stats.last_seconds)
            rotmats.append(r)
            trans.append(tr)
            betas.append(session.betas)
        with torch.no_grad():
            joints, _ = body.pose_joints(
                torch.as_tensor(np.stack(rotmats)),
                torch.as_tensor(np.stack(betas)),
                torch.as_tensor(np.stack(trans)),
            )
        errors.append(1e3 * mpjpe(joints, torch.as_tensor(truth)).numpy())
    steps_a = np.asarray(steps if steps else [0])
    refine_a = np.asarray(refine_ms if refine_ms else [0.0])
    return {
        "mpjpe_mm": float(np.concatenate(errors).mean()),
        "steps_mean": float(steps_a.mean()),
        "frames_refined": float((steps_a > 0).mean()),
        "refine_ms_mean": float(refine_a.mean()),
        "refine_ms_p99": float(np.percentile(refine_a, 99)),
        "frame_ms_mean": float(np.mean(frame_ms)),
        "frame_ms_p99": float(np.percentile(frame_ms, 99)),
    }
