"""``rbmcap bench infer``: network inference speed of the default model.

Whole-sequence prediction (chunked, batch of windows) in frames per second, and batch-1
streaming latency (one new frame in, that frame's answer out) as p50/p99 milliseconds, with a
60-frame context (``quick``, for smoke tests: 240 frames, a 30-frame context, 10 latencies).
Weights do not change the cost, so an untrained default model is timed unless ``ckpt`` is given.
"""

from __future__ import annotations

import time

import numpy as np
import torch


def network_predictor(ckpt: str | None = None):
    """A :class:`Predictor` for ``ckpt``, or for the default configuration's model."""
    from rbmcap.inference import Predictor

    if ckpt:
        return Predictor.from_checkpoint(ckpt)
    from hydra import compose, initialize_config_dir

    from rbmcap.body import load_body_model
    from rbmcap.configfiles import conf_dir
    from rbmcap.markers.markerset import load_marker_set
    from rbmcap.training.run import build_model

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("train")
    body = load_body_model(str(cfg.data.body))
    return Predictor(build_model(cfg, body, load_marker_set(str(cfg.markers.name))))


def sample_observations(frames: int, seed: int = 0):
    """Realistic rbm14 observations of a procedural walk on the stand-in, ``frames`` long."""
    from rbmcap.body import load_body_model
    from rbmcap.markers.synth import Synthesizer
    from rbmcap.motion.procedural.library import generate

    body = load_body_model("standin")
    motion = generate("walk", seed=seed, body=body)
    reps = int(np.ceil(frames / motion.num_frames))
    poses = np.concatenate([motion.poses] * reps)[:frames]
    trans = np.concatenate([motion.trans] * reps)[:frames]
    obs = Synthesizer(body, "rbm14", "realistic")(poses, trans, motion.betas, key="bench")
    return obs, poses, trans, motion.betas


def run(quick: bool = False, ckpt: str | None = None) -> dict:
    predictor = network_predictor(ckpt)
    frames = 240 if quick else 3600
    obs, *_ = sample_observations(frames)
    args = (obs.pos, obs.rot, obs.valid)
    predictor.predict(*args)  # warm-up
    start = time.perf_counter()
    predictor.predict(*args)
    batch_s = time.perf_counter() - start
    context, measured = (30, 10) if quick else (60, 300)
    session = predictor.stream(context=context)
    latencies = []
    for i in range(context + measured):
        t0 = time.perf_counter()
        with torch.no_grad():
            session.push(obs.pos[i], obs.rot[i], obs.valid[i])
        if i >= context:  # once the context is full
            latencies.append(1e3 * (time.perf_counter() - t0))
    return {
        "model": predictor.model.hparams["network"]["name"],
        "features": predictor.model.hparams["features"],
        "frames": frames,
        "batch_frames_per_second": frames / batch_s,
        "batch_ms_per_frame": 1e3 * batch_s / frames,
        "stream_context_frames": context,
        "stream_latency_ms_p50": float(np.percentile(latencies, 50)),
        "stream_latency_ms_p99": float(np.percentile(latencies, 99)),
    }
