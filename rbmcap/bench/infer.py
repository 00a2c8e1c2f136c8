"""``rbmcap bench infer``: network inference speed.

Whole-sequence prediction (chunked, batch of windows) of the default (offline) model in frames
per second, and the causal model's streaming latency (one new frame in, that frame's answer out,
batch 1) as p50/p99 milliseconds, on all of torch's threads and on one (a live stream usually
gets one core). The causal model is the shipped ``standin-rbm14-stream`` (a causal GRU on
``bones`` features with the plate fit, see :mod:`rbmcap.inference.stream`), run by the
``compiled`` backend (``stream_backend``; compiled once, then cached, see
:mod:`rbmcap.inference.compiled`). On one thread it is also timed through the TorchScript trace,
eagerly, and traced with the full ``kinematic`` features (untrained: the prior that fits the
pelvis and swings the collars, a few hundred more operations per frame). ``quick`` (smoke
tests): 240 frames, 10 latencies, the trace instead of the compiled step. ``ckpt`` times that
checkpoint for both (a non-recurrent network streams by re-running a 60-frame context, 30 in
``quick``).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from rbmcap.body import load_body_model
from rbmcap.config.packaged import conf_dir
from rbmcap.inference import Predictor
from rbmcap.markers.markerset import DEFAULT_MARKERS, load_marker_set
from rbmcap.markers.synth import Synthesizer
from rbmcap.model.body_facts import regressor_config
from rbmcap.model.regressor import PoseRegressor
from rbmcap.motion.procedural.library import generate

STREAM_CHECKPOINT = "standin-rbm14-stream"
"""The causal model timed unless a checkpoint is given."""
STREAM_EXPERIMENT = "standin_rbm14_stream"
"""The experiment (``conf/experiment``) of the untrained ``kinematic`` comparison."""


def network_predictor(ckpt: str | None = None, overrides: tuple[str, ...] = ()):
    """A :class:`Predictor` for ``ckpt``, or for the training configuration composed with these
    Hydra ``overrides`` (e.g. ``("experiment=standin_rbm14_stream",)``), untrained."""
    if ckpt:
        return Predictor.from_checkpoint(ckpt)

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("train", overrides=list(overrides))
    body = load_body_model(str(cfg.data.body))
    markers = load_marker_set(OmegaConf.to_container(cfg.markers, resolve=True))
    settings = OmegaConf.to_container(cfg.module.model, resolve=True)
    return Predictor(PoseRegressor(regressor_config(body, markers, **settings)))


def sample_observations(frames: int, seed: int = 0):
    """Realistic rbm14 observations of a procedural walk on the stand-in, ``frames`` long."""
    body = load_body_model("standin")
    motion = generate("walk", seed=seed, body=body)
    reps = int(np.ceil(frames / motion.num_frames))
    poses = np.concatenate([motion.poses] * reps)[:frames]
    trans = np.concatenate([motion.trans] * reps)[:frames]
    obs = Synthesizer(body, DEFAULT_MARKERS, "realistic")(poses, trans, motion.betas, key="bench")
    return obs, poses, trans, motion.betas


def stream_latencies(
    predictor, obs, context: int, measured: int, backend: str = "trace"
) -> np.ndarray:
    """Milliseconds per :meth:`StreamSession.push` (``backend``) for ``measured`` frames, after
    ``context`` frames that fill a window (or warm a recurrent state)."""
    session = predictor.stream(context=context, backend=backend)
    latencies = []
    for i in range(context + measured):
        t0 = time.perf_counter()
        session.push(obs.pos[i], obs.rot[i], obs.valid[i])
        if i >= context:
            latencies.append(1e3 * (time.perf_counter() - t0))
    return np.asarray(latencies)


def run(quick: bool = False, ckpt: str | None = None) -> dict:
    predictor = network_predictor(ckpt)
    frames = 240 if quick else 3600
    obs, *_ = sample_observations(frames)
    args = (obs.pos, obs.rot, obs.valid)
    predictor.predict(*args)  # warm-up
    start = time.perf_counter()
    predictor.predict(*args)
    batch_s = time.perf_counter() - start
    streamer = predictor if ckpt else network_predictor(STREAM_CHECKPOINT)
    context, measured = (30, 10) if quick else (60, 1000)
    backend = "trace" if quick else "compiled"
    threads = torch.get_num_threads()
    all_threads = stream_latencies(streamer, obs, context, measured, backend)
    torch.set_num_threads(1)
    try:
        one_thread = stream_latencies(streamer, obs, context, measured, backend)
        extra = _one_thread_comparisons(streamer, obs, context, measured, quick, ckpt)
    finally:
        torch.set_num_threads(threads)
    model = streamer.model
    result = {
        "model": predictor.model.config.network["name"],
        "features": predictor.model.config.features,
        "frames": frames,
        "batch_frames_per_second": frames / batch_s,
        "batch_ms_per_frame": 1e3 * batch_s / frames,
        "stream_model": model.config.network["name"],
        "stream_hidden": model.config.network.get("hidden_dim"),
        "stream_features": model.config.features,
        "stream_plate_fit": getattr(model, "plate_fit", None) is not None,
        "stream_recurrent": hasattr(model.net, "step") and model.is_causal,
        "stream_backend": backend,
        "stream_context_frames": context,
        "stream_frames_timed": measured,
        "stream_threads": threads,
    }
    for q in (50, 99):
        result[f"stream_latency_ms_p{q}"] = float(np.percentile(all_threads, q))
        result[f"stream_latency_ms_p{q}_1thread"] = float(np.percentile(one_thread, q))
        for name, lat in extra.items():
            result[f"stream_{name}_latency_ms_p{q}_1thread"] = float(np.percentile(lat, q))
    return result


def _one_thread_comparisons(streamer, obs, context, measured, quick, ckpt) -> dict:
    """The same stream through the trace (unless it was the timed backend) and eagerly, and
    (without ``ckpt``) an untrained causal GRU on the full ``kinematic`` features, traced."""
    extra = {} if quick else {"traced": stream_latencies(streamer, obs, context, measured)}
    extra["eager"] = stream_latencies(streamer, obs, context, measured, "eager")
    if not ckpt:
        overrides = (f"experiment={STREAM_EXPERIMENT}", "features=kinematic")
        full = network_predictor(overrides=overrides)
        extra["kinematic"] = stream_latencies(full, obs, context, measured)
    return extra
