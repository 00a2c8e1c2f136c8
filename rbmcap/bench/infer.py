"""``rbmcap bench infer``: network inference speed.

Whole-sequence prediction (chunked, batch of windows) of the default (offline) model in frames
per second, and the causal model's streaming latency (one new frame in, that frame's answer out,
batch 1) as p50/p99 milliseconds, on all of torch's threads and on one (a live stream usually
gets one core); on one thread also with ``canonical`` input features (no kinematic prior), the
cheaper streaming configuration. ``quick`` (smoke tests): 240 frames and 10 latencies. Weights
do not change the cost, so untrained default models are timed unless ``ckpt`` is given (then
that checkpoint is timed for both; a non-recurrent network streams by re-running a 60-frame
context, 30 in ``quick``).
"""

from __future__ import annotations

import time

import numpy as np
import torch

STREAM_MODEL = "causal_gru"
"""The network configuration (``conf/model``) whose stream is timed when no checkpoint is given."""

LIGHT_FEATURES = "canonical"
"""Input features also timed for the stream: without the kinematic prior a frame costs little
more than the network. Its accuracy cost (``experiment=demo``, 4 epochs, test split, streamed
frame by frame): MPJPE 50.7 mm, 1.25x the offline transformer's 40.6 mm (validation: 1.41x);
the kinematic causal GRU streams at 38.3 mm, 0.94x."""


def network_predictor(ckpt: str | None = None, model: str | None = None, features=None):
    """A :class:`Predictor` for ``ckpt``, or for the default configuration's model (with
    ``model`` instead of the default network, e.g. ``"causal_gru"``, and ``features`` instead
    of the default input features)."""
    from rbmcap.inference import Predictor

    if ckpt:
        return Predictor.from_checkpoint(ckpt)
    from hydra import compose, initialize_config_dir

    from rbmcap.body import load_body_model
    from rbmcap.configfiles import conf_dir
    from rbmcap.markers.markerset import load_marker_set
    from rbmcap.training.run import build_model

    overrides = [f"model={model}"] if model else []
    overrides += [f"features={features}"] if features else []
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
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


def stream_latencies(predictor, obs, context: int, measured: int) -> np.ndarray:
    """Milliseconds per :meth:`StreamSession.push` for ``measured`` frames, after ``context``
    frames that fill a window (or warm a recurrent state)."""
    session = predictor.stream(context=context)
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
    streamer = predictor if ckpt else network_predictor(model=STREAM_MODEL)
    context, measured = (30, 10) if quick else (60, 300)
    threads = torch.get_num_threads()
    light = None if ckpt else network_predictor(model=STREAM_MODEL, features=LIGHT_FEATURES)
    all_threads = stream_latencies(streamer, obs, context, measured)
    torch.set_num_threads(1)
    try:
        one_thread = stream_latencies(streamer, obs, context, measured)
        if light is not None:
            light_one_thread = stream_latencies(light, obs, context, measured)
    finally:
        torch.set_num_threads(threads)
    result = {
        "model": predictor.model.hparams["network"]["name"],
        "features": predictor.model.hparams["features"],
        "frames": frames,
        "batch_frames_per_second": frames / batch_s,
        "batch_ms_per_frame": 1e3 * batch_s / frames,
        "stream_model": streamer.model.hparams["network"]["name"],
        "stream_features": streamer.model.hparams["features"],
        "stream_recurrent": hasattr(streamer.model.net, "step"),
        "stream_context_frames": context,
        "stream_frames_timed": measured,
        "stream_threads": threads,
        "stream_latency_ms_p50": float(np.percentile(all_threads, 50)),
        "stream_latency_ms_p99": float(np.percentile(all_threads, 99)),
        "stream_latency_ms_p50_1thread": float(np.percentile(one_thread, 50)),
        "stream_latency_ms_p99_1thread": float(np.percentile(one_thread, 99)),
    }
    if light is not None:
        result[f"stream_{LIGHT_FEATURES}_latency_ms_p50_1thread"] = float(
            np.percentile(light_one_thread, 50)
        )
        result[f"stream_{LIGHT_FEATURES}_latency_ms_p99_1thread"] = float(
            np.percentile(light_one_thread, 99)
        )
    return result
