"""``rbmcap bench train``: training throughput of the default model on this machine.

The default configuration (``rbmcap/conf/train.yaml``: rbm14, kinematic features, relative-position
transformer, geodesic loss, Adam) is built on the stand-in body; full optimisation steps
(features, forward, losses, backward, Adam) run on batches of the reference size (15 windows of
120 frames) made from a synthesised procedural motion. The same steps are timed again under
bfloat16 autocast, as ``trainer.precision=bf16-mixed`` runs them (the network in bfloat16, the
rest in float32), in the same process: the ratio says whether mixed precision pays on this CPU
(it does where the CPU has bfloat16 instructions; elsewhere it is emulated and slower).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from hydra import compose, initialize_config_dir

from rbmcap.configfiles import conf_dir


def _batch(body, markers, batch: int, window: int) -> dict[str, torch.Tensor]:
    from rbmcap.markers.synth import Synthesizer
    from rbmcap.motion.procedural.library import generate

    motion = generate("walk", seed=0, body=body)
    frames = batch * window
    reps = int(np.ceil(frames / len(motion.poses)))
    poses = np.concatenate([motion.poses] * reps)[:frames]
    trans = np.concatenate([motion.trans] * reps)[:frames]
    obs = Synthesizer(body, markers, "realistic")(poses, trans, motion.betas, key="bench")

    def win(a):
        return torch.from_numpy(np.ascontiguousarray(a)).reshape(batch, window, *a.shape[1:])

    return {
        "pos": win(obs.pos),
        "rot": win(obs.rot),
        "valid": win(obs.valid),
        "poses": win(poses.astype(np.float32)),
        "trans": win(trans.astype(np.float32)),
        "joints": win(obs.joints),
        "betas": torch.from_numpy(motion.betas.astype(np.float32)).expand(batch, -1),
    }


def run(quick: bool = False) -> dict:
    from rbmcap.body import load_body_model
    from rbmcap.training.run import build_model, configured_markers

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("train")
    body = load_body_model(str(cfg.data.body))
    markers = configured_markers(cfg)
    model = build_model(cfg, body, markers)
    bs, window = int(cfg.data.batch_size), int(cfg.data.window)
    batch = _batch(body, markers, bs, window)
    opt = torch.optim.Adam(model.parameters(), lr=float(cfg.optim.lr))
    model.train()

    def step(bf16: bool = False):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = model(batch["pos"], batch["rot"], batch["valid"])
            loss = model._losses(out, batch)[0]["total"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    steps = 3 if quick else 10

    def timed(bf16: bool) -> float:
        step(bf16)  # warm-up
        start = time.perf_counter()
        for _ in range(steps):
            step(bf16)
        return (time.perf_counter() - start) / steps

    seconds = timed(False)
    seconds_bf16 = timed(True)
    with torch.no_grad():
        model.eval()
        start = time.perf_counter()
        for _ in range(steps):
            model(batch["pos"], batch["rot"], batch["valid"])
        infer = (time.perf_counter() - start) / steps
    return {
        "model": cfg.model.name,
        "features": cfg.features,
        "parameters_m": sum(p.numel() for p in model.parameters()) / 1e6,
        "batch": bs,
        "window": window,
        "seconds_per_step": seconds,
        "windows_per_second": bs / seconds,
        "frames_per_second": bs * window / seconds,
        "inference_frames_per_second": bs * window / infer,
        "bf16_mixed_frames_per_second": bs * window / seconds_bf16,
        "bf16_mixed_speedup": seconds / seconds_bf16,
    }
