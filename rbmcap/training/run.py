"""Wiring a Hydra configuration to Lightning objects (``train.py`` calls :func:`train`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf

from rbmcap.errors import ConfigError

log = logging.getLogger("rbmcap.train")


def ensure_dataset(data: DictConfig, markers: str, body) -> Path:
    """The configured dataset folder; synthesised from procedural motion if it does not exist."""
    from rbmcap.dataset import SynthOptions, synthesize_dataset

    path = Path(data.path)
    if (path / "manifest.json").is_file():
        return path
    gen = data.get("generate")
    if gen is None:
        raise ConfigError(f"{path}: no dataset there and data.generate is not configured")
    motions = Path(gen.motions_dir)
    if not motions.is_dir() or not any(motions.rglob("*.npz")):
        from rbmcap.motion.procedural.library import generate_library

        log.info("generating %d procedural motions into %s (seed %d)", gen.num, motions, gen.seed)
        subjects = int(gen.get("subjects") or 0) or None
        generate_library(
            motions, int(gen.num), int(gen.seed), fps=float(data.fps), num_subjects=subjects,
            body=body,
        )  # fmt: skip
    log.info("dataset %s does not exist: synthesising it from %s (markers %s, realism %s)",
             path, motions, markers, data.realism)  # fmt: skip
    synthesize_dataset(
        SynthOptions(
            motions=motions,
            out=path,
            body=str(data.body),
            markers=markers,
            realism=str(data.realism),
            fps=float(data.fps),
            seed=int(gen.seed),
            progress=False,
            split_lists=motions / "splits" if (motions / "splits").is_dir() else None,
        ),
        body=body,
    )
    return path


def plate_rest_frames(body, markers) -> tuple[torch.Tensor, torch.Tensor]:
    """Each plate's rest position (N, 3) and rotation (N, 3, 3) on the body (canonical frame,
    zero pose and betas)."""
    from rbmcap.markers.synth import Synthesizer

    obs = Synthesizer(body, markers, "none")(torch.zeros(1, 24, 3).numpy())
    return torch.from_numpy(obs.pos[0].copy()), torch.from_numpy(obs.rot[0].copy())


def marker_description(markers) -> dict[str, Any]:
    """Plain data about a marker set that a checkpoint needs (name, parents, carrying joints)."""
    from rbmcap.skeleton import SMPL_JOINT_NAMES

    joints = [SMPL_JOINT_NAMES.index(a.joint) if isinstance(a.joint, str) else int(a.joint)
              for a in markers.anchors]  # fmt: skip
    return {"name": markers.name, "names": list(markers.names), "parents": list(markers.parents),
            "joints": joints}  # fmt: skip


def build_model(cfg: DictConfig, body, markers):
    from rbmcap.body.joints import JointModel
    from rbmcap.training.module import RBMRegressor

    plain = OmegaConf.to_container(cfg, resolve=True)
    joints = JointModel.from_body(body)
    rest_pos, rest_rot = plate_rest_frames(body, markers)
    return RBMRegressor(
        markers=marker_description(markers),
        plate_rest_rot=rest_rot,
        plate_rest_pos=rest_pos,
        joint_template=joints.joint_template,
        joint_shapedirs=joints.joint_shapedirs,
        body_id=body.identity,
        features=plain["features"],
        rotations=plain.get("rotations", "global"),
        network=plain["model"],
        loss=plain["loss"],
        optim=plain["optim"],
        augment=plain["augment"],
        num_betas=body.num_betas,
        seed=int(cfg.seed),
    )


def build_loggers(cfg: DictConfig, output_dir: Path) -> list:
    from lightning.pytorch import loggers

    kind = cfg.logger.name
    if kind == "csv":
        return [loggers.CSVLogger(output_dir, name="csv")]
    if kind == "tensorboard":
        return [loggers.TensorBoardLogger(output_dir, name="tensorboard")]
    if kind == "wandb":
        kwargs = {"project": cfg.logger.project, "save_dir": str(output_dir)}
        # WandbLogger(offline=True) would override WANDB_MODE=disabled, so only pass it when
        # W&B is enabled but has no key: it then logs offline and never blocks on the network.
        if os.environ.get("WANDB_MODE") != "disabled" and not os.environ.get("WANDB_API_KEY"):
            kwargs["offline"] = True
        return [loggers.WandbLogger(**kwargs)]
    if kind in ("none", None):
        return []
    raise ConfigError(f"unknown logger {kind!r}; expected csv, tensorboard, wandb or none")


def train(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    """Train as configured; returns the best checkpoint and its validation figures."""
    from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint

    from rbmcap.body import load_body_model
    from rbmcap.dataset import Manifest
    from rbmcap.markers.markerset import load_marker_set
    from rbmcap.training.callbacks import EpochSummary
    from rbmcap.training.data import RBMDataModule

    output_dir = Path(output_dir)
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).propagate = False  # Lightning prints these itself
    L.seed_everything(int(cfg.seed), workers=True)
    body = load_body_model(str(cfg.data.body))
    markers = load_marker_set(str(cfg.markers.name))
    data_path = ensure_dataset(cfg.data, markers.name, body)
    manifest = Manifest.load(data_path)
    if manifest.marker_set != markers.name:
        raise ConfigError(f"{data_path} was made with marker set {manifest.marker_set!r}, "
                          f"the config asks for {markers.name!r}")  # fmt: skip
    model = build_model(cfg, body, markers)
    datamodule = RBMDataModule(
        data_path, window=int(cfg.data.window), train_stride=int(cfg.data.train_stride),
        batch_size=int(cfg.data.batch_size), num_workers=int(cfg.data.num_workers),
    )  # fmt: skip
    checkpoint = ModelCheckpoint(
        dirpath=output_dir / "checkpoints", filename="epoch{epoch:03d}-mpjpe{val/mpjpe_mm:.1f}",
        monitor="val/mpjpe_mm", mode="min", save_last=True, auto_insert_metric_name=False,
    )  # fmt: skip
    loggers = build_loggers(cfg, output_dir)
    callbacks = [checkpoint, EpochSummary()]
    if loggers:
        callbacks.append(LearningRateMonitor("step"))
    trainer_kwargs = OmegaConf.to_container(cfg.trainer, resolve=True)
    trainer = L.Trainer(default_root_dir=output_dir, logger=loggers or False,
                        callbacks=callbacks, **trainer_kwargs)  # fmt: skip
    log.info("model: %s features, %s network, %.2f M parameters", cfg.features, cfg.model.name,
             sum(p.numel() for p in model.parameters()) / 1e6)  # fmt: skip
    trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    best = checkpoint.best_model_score
    result = {
        "best_checkpoint": checkpoint.best_model_path,
        "last_checkpoint": checkpoint.last_model_path,
        "best_val_mpjpe_mm": float(best) if best is not None else None,
        "val_metrics": {
            k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")
        },
        "epochs": trainer.current_epoch,
        "output_dir": str(output_dir),
        "data_path": str(data_path),
    }
    log.info("best validation MPJPE %.1f mm: %s", result["best_val_mpjpe_mm"] or float("nan"),
             result["best_checkpoint"])  # fmt: skip
    return result
