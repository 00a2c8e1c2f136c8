"""``rbmcap bench train``: training throughput of the default model on this machine.

The default configuration (``rbmcap/conf/train.yaml``: rbm14, kinematic features, relative-position
transformer, geodesic loss, Adam) is built on the stand-in body; full optimisation steps
(features, forward, losses, backward, Adam) run on batches of the reference size (15 windows of
120 frames) made from a synthesised procedural motion. The same steps are timed again under
bfloat16 autocast, as ``trainer.precision=bf16-mixed`` runs them (the network in bfloat16, the
rest in float32), in the same process: the ratio says whether mixed precision pays on this CPU
(it does where the CPU has bfloat16 instructions; elsewhere it is emulated and slower).

``experiment`` times a named experiment's model instead (e.g. ``paper_rbm14``), ``device`` puts
it on an accelerator (``cuda``: times are taken after synchronising it), and ``batches`` adds
step times at other batch sizes (``by_batch``), the way to read how far a GPU's throughput grows
with the batch.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from hydra import compose, initialize_config_dir

from rbmcap.body import load_body_model
from rbmcap.config.packaged import conf_dir
from rbmcap.markers.synth import Synthesizer
from rbmcap.motion.procedural.library import generate
from rbmcap.training.run import build_model, configured_markers


def _batch(body, markers, batch: int, window: int) -> dict[str, torch.Tensor]:
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


def run(
    quick: bool = False,
    device: str = "cpu",
    experiment: str | None = None,
    batches: tuple[int, ...] = (),
) -> dict:
    """Long because it composes the configuration, builds and times three kinds of step and
    the optional batch sizes, and assembles the report in one place."""
    overrides = [f"experiment={experiment}"] if experiment else []
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    dev = torch.device(device)
    body = load_body_model(str(cfg.data.body))
    markers = configured_markers(cfg)
    model = build_model(cfg, body, markers).to(dev)
    bs, window = int(cfg.data.batch_size), int(cfg.data.window)
    batch = _on(_batch(body, markers, bs, window), dev)
    opt = torch.optim.Adam(model.parameters(), lr=float(cfg.optim.lr))
    model.train()
    steps = 3 if quick else 10

    def timed(fn) -> float:
        fn()  # warm-up
        _sync(dev)
        start = time.perf_counter()
        for _ in range(steps):
            fn()
        _sync(dev)
        return (time.perf_counter() - start) / steps

    def step(data, bf16: bool = False):
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            out = model(data["pos"], data["rot"], data["valid"])
            loss = model._losses(out, data)[0]["total"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    seconds = timed(lambda: step(batch))
    seconds_bf16 = timed(lambda: step(batch, True))
    by_batch = []
    for size in batches:
        big = _on(_batch(body, markers, int(size), window), dev)
        for bf16 in (False, True):
            t = timed(lambda big=big, bf16=bf16: step(big, bf16))
            by_batch.append(
                {
                    "batch": int(size),
                    "bf16_mixed": bf16,
                    "seconds_per_step": t,
                    "frames_per_second": int(size) * window / t,
                }
            )
    with torch.no_grad():
        model.eval()
        infer = timed(lambda: model(batch["pos"], batch["rot"], batch["valid"]))
    extra = {"by_batch": by_batch} if by_batch else {}
    return {
        "model": cfg.model.name,
        "experiment": experiment or "(defaults)",
        "device": str(dev) if dev.type == "cpu" else torch.cuda.get_device_name(dev),
        "features": cfg.features,
        "parameters_m": sum(p.numel() for p in model.parameters()) / 1e6,
        "batch": bs,
        "window": window,
        **extra,
        "seconds_per_step": seconds,
        "windows_per_second": bs / seconds,
        "frames_per_second": bs * window / seconds,
        "inference_frames_per_second": bs * window / infer,
        "bf16_mixed_frames_per_second": bs * window / seconds_bf16,
        "bf16_mixed_speedup": seconds / seconds_bf16,
    }


def _on(batch: dict[str, torch.Tensor], dev: torch.device) -> dict[str, torch.Tensor]:
    return {k: v.to(dev) for k, v in batch.items()}


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
