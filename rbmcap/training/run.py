"""Wiring a Hydra configuration to Lightning objects (``train.py`` calls :func:`train`).

Everything is built from the composed configuration with ``hydra.utils.instantiate``: the
module from ``cfg.module``, the data module from ``cfg.data``, the logger from ``cfg.logger``
(each names its class in ``_target_``), the marker set from ``cfg.markers`` (so ``markers.*``
overrides count); the module builds its optimiser and schedule from ``cfg.optim`` and
``cfg.scheduler``. Building has no side effects: a missing dataset is made by
:meth:`RBMDataModule.prepare_data` when ``trainer.fit`` starts, in one process per node.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L
from hydra.utils import instantiate
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from omegaconf import DictConfig, OmegaConf

from rbmcap.body import load_body_model
from rbmcap.checkpoint import load_weights
from rbmcap.markers.markerset import load_marker_set
from rbmcap.model.body_facts import regressor_config
from rbmcap.motion.procedural.library import SHAPE_CLIP, SHAPE_STD
from rbmcap.training.callbacks import EpochSummary, RunRecord
from rbmcap.training.data import RBMDataModule
from rbmcap.training.guards import AtomicCheckpointIO
from rbmcap.training.loggers import build_logger

log = logging.getLogger("rbmcap.train")

LAST = "last"
"""Name (without ``.ckpt``) of the checkpoint written after every validation: resume from it."""


def configured_markers(cfg: DictConfig):
    """The marker set the composed ``cfg.markers`` describes (overrides included)."""
    return load_marker_set(OmegaConf.to_container(cfg.markers, resolve=True))


def build_model(cfg: DictConfig, body, markers):
    """The LightningModule ``cfg.module`` describes (``_target_`` and its hyper-parameters, as
    plain data so checkpoints load safely), its ``model`` section completed with the facts of
    ``body`` and ``markers``. Nested ``_target_`` nodes (the optimiser, the schedule) stay data:
    the module instantiates them itself."""
    factory = instantiate(cfg.module, _partial_=True, _recursive_=False, _convert_="all")
    return factory(model=regressor_config(body, markers, **factory.keywords["model"]).to_dict())


def load_initial_weights(module, spec: str | Path) -> None:
    """Start ``module``'s model from the weights of the checkpoint ``spec`` (a path or a shipped
    model's name, e.g. ``standin-rbm14``) to fine-tune it; the optimiser and schedule start
    afresh. ConfigError when the architectures differ (the configuration must build the same
    network); see :func:`rbmcap.checkpoint.load_weights`."""
    log.info("starting from the weights of %s", load_weights(module.model, spec))


def build_datamodule(cfg: DictConfig) -> RBMDataModule:
    """The data module ``cfg.data`` describes (``_target_``): windows of the dataset at
    ``cfg.data.path``, made from ``cfg.data.generate`` (when set) by ``prepare_data`` if it does
    not exist."""
    return instantiate(cfg.data, _convert_="all")


def run_record(cfg: DictConfig, command: str | None) -> dict[str, Any]:
    """What a checkpoint keeps of how it was made: the ``command`` line and the data recipe
    (dataset, body, plates, realism, procedural motions, real clips and their splits)."""
    data = cfg.data
    gen = data.get("generate")
    recipe: dict[str, Any] = {
        "path": str(data.path),
        "body": str(data.body),
        "markers": str(cfg.markers.name),
        "realism": str(data.realism),
        "fps": float(data.fps),
    }
    if gen is not None:
        recipe["procedural"] = {
            "num": int(gen.num),
            "seed": int(gen.seed),
            "subjects": int(gen.get("subjects") or 0),
        }
        shape = {k: float(v) for k, v in dict(gen.get("shape") or {}).items()}
        if shape and shape != {"std": SHAPE_STD, "clip": SHAPE_CLIP}:
            recipe["procedural"]["shape"] = shape  # recorded where it is not the default
        bvh = OmegaConf.to_container(gen.bvh, resolve=True) if gen.get("bvh") else []
        recipe["real"] = [
            {
                "dir": Path(str(b["dir"])).name,
                "joint_map": str(b.get("joint_map") or "auto"),
                "splits": {str(k): str(v) for k, v in dict(b.get("splits") or {}).items()},
                **({"subject_pattern": b["subject_pattern"]} if b.get("subject_pattern") else {}),
            }
            for b in bvh
        ]
    if data.get("oversample"):
        recipe["oversample"] = {str(k): int(v) for k, v in data.oversample.items()}
    return {"command": command or "", "data": recipe}


def build_trainer(cfg: DictConfig, output_dir: Path):
    """The Lightning Trainer (``cfg.trainer``) with its logger (``cfg.logger``) and callbacks;
    returns it with its checkpoint callback."""
    checkpoint = ModelCheckpoint(
        dirpath=output_dir / "checkpoints",
        filename="epoch{epoch:03d}-mpjpe{val/mpjpe_mm:.1f}",
        monitor="val/mpjpe_mm",
        mode="min",
        auto_insert_metric_name=False,
    )
    # Lightning's save_last writes last.ckpt only when the monitored figure improves: this one
    # writes it after every validation, so a killed run resumes from its latest epoch.
    last = ModelCheckpoint(
        dirpath=output_dir / "checkpoints", filename=LAST, enable_version_counter=False
    )
    logger = build_logger(cfg.logger, output_dir)
    callbacks = [checkpoint, last, EpochSummary()]
    if logger is not None:
        callbacks.append(LearningRateMonitor("step"))
    trainer_kwargs = OmegaConf.to_container(cfg.trainer, resolve=True)
    plugins = [*(trainer_kwargs.pop("plugins", None) or []), AtomicCheckpointIO()]
    trainer = L.Trainer(
        default_root_dir=output_dir,
        logger=logger or False,
        callbacks=callbacks,
        plugins=plugins,
        **trainer_kwargs,
    )
    return trainer, checkpoint


def train(cfg: DictConfig, output_dir: str | Path, command: str | None = None) -> dict[str, Any]:
    """Train as configured; returns the best checkpoint and its validation figures. ``command``
    (the command line that started the run) and the data recipe are kept in every checkpoint.
    With ``prepare_only`` it makes the dataset if it is missing and returns its path."""
    output_dir = Path(output_dir)
    if cfg.get("prepare_only"):
        datamodule = build_datamodule(cfg)
        datamodule.prepare_data()
        return {"data_path": str(datamodule.path), "prepared_only": True}
    for name in ("lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).propagate = False  # Lightning prints these itself
    L.seed_everything(int(cfg.seed), workers=True)
    body = load_body_model(str(cfg.data.body))
    markers = configured_markers(cfg)
    model = build_model(cfg, body, markers)
    if cfg.get("init_from"):
        load_initial_weights(model, cfg.init_from)
    datamodule = build_datamodule(cfg)
    trainer, checkpoint = build_trainer(cfg, output_dir)
    trainer.callbacks.append(RunRecord(run_record(cfg, command)))
    log.info(
        "model: %s features, %s network, %.2f M parameters",
        cfg.features,
        cfg.model.name,
        sum(p.numel() for p in model.parameters()) / 1e6,
    )
    trainer.fit(model, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    best = checkpoint.best_model_score
    last = [c.best_model_path for c in trainer.checkpoint_callbacks if c.filename == LAST]
    result = {
        "best_checkpoint": checkpoint.best_model_path,
        "last_checkpoint": last[0] if last else checkpoint.last_model_path,
        "best_val_mpjpe_mm": float(best) if best is not None else None,
        "val_metrics": {
            k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")
        },
        "epochs": trainer.current_epoch,
        "output_dir": str(output_dir),
        "data_path": str(datamodule.path),
    }
    log.info(
        "best validation MPJPE %.1f mm: %s",
        result["best_val_mpjpe_mm"] or float("nan"),
        result["best_checkpoint"],
    )
    return result
