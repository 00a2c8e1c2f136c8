"""``rbmcap bench baseline``: optimisation-solver time per frame and the accuracy it reaches.

The sequence is the stand-in body walking (procedural ``walk``, seed 0, the motion ``bench
train`` uses): its first 240 frames at 60 Hz, observed by noise-free ``rbm14`` plates. The solver
runs with ``rbmcap/conf/baseline/default.yaml`` and a pose prior fitted on two other procedural
motions (``run`` and ``walk`` with seed 1), whole sequence in one batch, best of two solves.
Times exclude motion generation, synthesis and prior fitting, and include the solver's own
initialisation; the convergence curve (MPJPE and ms/frame against sweeps) comes with them. The
solve runs until the configuration's tolerance says it converged.

``quick`` (a smoke run of a few seconds, same keys, figures not comparable): 30 frames, 4
sweeps, one solve, the prior fitted on ``run`` alone, the network timed once.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from rbmcap.baseline import Solver, fit_pose_prior, load_solver_config
from rbmcap.bench.infer import network_predictor
from rbmcap.body import load_body_model
from rbmcap.markers.markerset import DEFAULT_MARKERS
from rbmcap.markers.synth import Synthesizer
from rbmcap.motion.procedural.library import generate

FRAMES, QUICK_FRAMES = 240, 30
QUICK_ITERATIONS = 4


def run(quick: bool = False, device: str = "cpu") -> dict:
    """Solver (and network) cost per frame on the bench sequence; see the module docstring.

    Returns a JSON-ready dict: ``ms_per_frame``, ``mpjpe_mm`` (final), ``converged_*`` (where
    the MPJPE curve converged), ``network_ms_per_frame``, ``solver_to_network_time_ratio``,
    ``curve`` and the set-up (model, markers, frames, optimiser, iterations, evaluations).
    """
    body, motion, obs, prior = _sequence_and_prior(quick)
    config = load_solver_config("default")
    iterations = QUICK_ITERATIONS if quick else config.optimiser.iterations
    solver = Solver(body, DEFAULT_MARKERS, config, prior=prior, device=device)
    solves = [
        solver.solve(
            obs.pos,
            obs.rot,
            obs.valid,
            fps=motion.fps,
            truth_joints=obs.joints,
            iterations=iterations,
            tolerance=0 if quick else None,
        )
        for _ in range(1 if quick else 2)
    ]
    best = min(solves, key=lambda sol: sol.seconds)
    rec = best.record
    k = rec.iterations.index(rec.converged_at("mpjpe_mm"))
    net_ms = _network_ms_per_frame(obs, repeats=1 if quick else 3)
    return {
        "model": body.identity,
        "markers": DEFAULT_MARKERS,
        "realism": "none",
        "sequence": f"procedural walk seed 0, first {best.frames} frames",
        "frames": best.frames,
        "device": str(device),
        "torch_threads": torch.get_num_threads(),
        "optimiser": "levenberg-marquardt sweeps",
        "converged": best.converged,
        "iterations": best.iterations,
        "evaluations": best.evaluations,
        "ms_per_frame": best.ms_per_frame,
        "mpjpe_mm": rec.mpjpe_mm[-1],
        "converged_iterations": rec.iterations[k],
        "converged_ms_per_frame": rec.ms_per_frame[k],
        "converged_mpjpe_mm": rec.mpjpe_mm[k],
        "network_ms_per_frame": net_ms,
        "solver_to_network_time_ratio": rec.ms_per_frame[k] / net_ms,
        "curve": {
            "iterations": rec.iterations,
            "mpjpe_mm": rec.mpjpe_mm,
            "ms_per_frame": rec.ms_per_frame,
        },
    }


def _sequence_and_prior(quick: bool):
    """The stand-in body, the walk, its noise-free rbm14 observations (first frames) and the
    pose prior fitted on other motions."""
    body = load_body_model("standin")
    frames = QUICK_FRAMES if quick else FRAMES
    motion = generate("walk", seed=0, body=body)
    poses, trans = motion.poses[:frames], motion.trans[:frames]
    obs = Synthesizer(body, DEFAULT_MARKERS, "none")(poses, trans, motion.betas, key="bench")
    kinds = ("run",) if quick else ("run", "walk")
    train = np.concatenate([generate(k, seed=1, body=body).poses for k in kinds])
    return body, motion, obs, fit_pose_prior(train, num_components=4, seed=0)


def _network_ms_per_frame(obs, repeats: int) -> float:
    """The default network on the same frames, in the same process (weights do not change the
    cost): best of ``repeats`` whole-sequence predictions after a warm-up, ms per frame."""
    predictor = network_predictor()
    predictor.predict(obs.pos, obs.rot, obs.valid)  # warm-up
    seconds = min(
        _timed(lambda: predictor.predict(obs.pos, obs.rot, obs.valid)) for _ in range(repeats)
    )
    return 1e3 * seconds / obs.pos.shape[0]


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
