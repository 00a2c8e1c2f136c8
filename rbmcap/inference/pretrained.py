"""Pretrained checkpoints shipped inside the package, resolved by name.

A pretrained model is two files in ``rbmcap/pretrained/``: ``NAME.ckpt`` (the weights and
hyper-parameters of a Lightning checkpoint, without optimiser state) and ``NAME.yaml`` (its card:
the command that trained it, what it was trained on, and its accuracy on the fixed check set of
:func:`check_accuracy`, measured when it was packed). ``Predictor.from_checkpoint("NAME")``,
``rbmcap eval --ckpt NAME`` and ``rbmcap infer --ckpt NAME`` take the name wherever they take a
path.

The check set is small, fixed and made on the fly (no files): one procedural motion of each of
:data:`CHECK_KINDS` on the stand-in body (seeds 0, 1, …, each motion's own body shape), the
first :data:`CHECK_FRAMES` frames, synthesised with the ``realistic`` preset (seed 0). Its MPJPE
(mm, no alignment) is a fingerprint of the weights and the pipeline: a changed synthesis,
feature encoding or network code shows up as a changed figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import yaml

from rbmcap.atomic import write_text_atomic
from rbmcap.checkpoint import RUN_KEY, pack, read_checkpoint
from rbmcap.config.safe_yaml import load_yaml_mapping
from rbmcap.errors import DataError, ModelError
from rbmcap.inference.capture import checkpoint_body
from rbmcap.inference.predictor import Predictor
from rbmcap.markers.synth import Synthesizer
from rbmcap.motion.procedural import generate
from rbmcap.paths import pretrained_dir, resolve_checkpoint

CHECK_KINDS = ("walk", "run", "squat", "reach", "jumping_jack", "kick")
CHECK_FRAMES = 240
CHECK_REALISM = "realistic"


def model_card(name: str) -> dict:
    """The card (``NAME.yaml``) of a shipped model: ``command``, ``trained_on``, ``check``."""
    resolve_checkpoint(name)
    path = pretrained_dir() / f"{name}.yaml"
    return load_yaml_mapping(path, missing=ModelError)


def check_sequences(body) -> list[tuple[str, object, object]]:
    """The fixed check set: (name, motion, observations) per :data:`CHECK_KINDS` kind."""
    synth = Synthesizer(body, "rbm14", CHECK_REALISM)
    out = []
    for seed, kind in enumerate(CHECK_KINDS):
        m = generate(kind, seed=seed, body=body)
        n = min(CHECK_FRAMES, m.num_frames)
        obs = synth(m.poses[:n], m.trans[:n], m.betas, fps=m.fps, seed=0, key=f"check/{kind}")
        out.append((f"{kind}_{seed}", m, obs))
    return out


@torch.no_grad()
def check_accuracy(predictor) -> dict[str, float]:
    """MPJPE (mm, no alignment) of ``predictor``'s raw answer (not smoothed over time) on the
    check set: per sequence and ``mean`` (the mean over sequences). The predictor must be an
    rbm14 model on the stand-in body."""
    body = checkpoint_body(predictor.body_id)
    result = {}
    for name, m, obs in check_sequences(body):
        n = len(obs.pos)
        params = predictor.predict(obs.pos, obs.rot, obs.valid, smoothing=0.0)  # the raw network
        pred = body.forward(params.poses, params.betas[: body.num_betas], params.trans).joints
        true = body.forward(
            torch.as_tensor(m.poses[:n]), torch.as_tensor(m.betas), torch.as_tensor(m.trans[:n])
        ).joints
        err = (pred[:, :24] - true[:, :24]).norm(dim=-1).mean()
        result[name] = round(float(err) * 1000.0, 3)
    result["mean"] = round(float(np.mean(list(result.values()))), 3)
    return result


def card_from_run(run: dict | None) -> dict:
    """A card's ``command``, ``trained_on`` and ``data`` from a checkpoint's run record (empty
    without one)."""
    if not run:
        return {}
    data = run.get("data") or {}
    parts = [
        f"{data.get('body')} body, {data.get('markers')} plates, {data.get('realism')} realism"
    ]
    proc = data.get("procedural")
    if proc:
        parts.append(
            f"{proc['num']} procedural motions (seed {proc['seed']}, "
            f"{proc['subjects'] or 'automatic'} body shapes)"
        )
    for real in data.get("real") or []:
        held = ", ".join(f"{k} {v}" for k, v in real.get("splits", {}).items())
        parts.append(f"real clips of {real['dir']} ({real['joint_map']} map; held out: {held})")
    command = run.get("command") or ""
    if command:
        command = f"OMP_NUM_THREADS=1 {command}"
    return {"command": command, "trained_on": "; ".join(parts), "data": data}


def pack_checkpoint(src: str | Path, name: str, card: dict, out_dir: str | Path | None = None):
    """Write ``NAME.ckpt`` (``src`` packed by :func:`rbmcap.checkpoint.pack`) and ``NAME.yaml``
    (``card`` plus ``check``: the accuracy measured here) into ``out_dir`` (default: the
    package's folder).
    The card's ``command``, ``trained_on`` and ``data`` come from the checkpoint's run record
    (:func:`card_from_run`) where ``card`` does not give them.

    Returns:
        (checkpoint path, the card written).
    """
    full = read_checkpoint(src)
    card = {**card_from_run(full.get(RUN_KEY)), **{k: v for k, v in card.items() if v}}
    for key in ("command", "trained_on"):
        if not card.get(key):
            raise DataError(
                f"{src}: the checkpoint records no {key.replace('_', ' ')}: give the card's {key}"
            )
    folder = Path(out_dir) if out_dir is not None else pretrained_dir()
    folder.mkdir(parents=True, exist_ok=True)
    dst = pack(full, folder / f"{name}.ckpt")
    card["check"] = {
        "realism": CHECK_REALISM,
        "frames": CHECK_FRAMES,
        "mpjpe_mm": check_accuracy(Predictor.from_checkpoint(dst)),
    }
    card["size_mb"] = round(dst.stat().st_size / 2**20, 2)
    write_text_atomic(folder / f"{name}.yaml", yaml.safe_dump(card, sort_keys=False))
    return dst, card
