"""Training set-ups the tests share: the packaged configuration composed with overrides, small
models built from it (with or without their training module), a run of seconds, and
``train.py`` run as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lightning as L
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from helpers.shared import REPO
from rbmcap.config.packaged import conf_dir
from rbmcap.markers.markerset import load_marker_set
from rbmcap.model.body_facts import regressor_config
from rbmcap.model.regressor import PoseRegressor
from rbmcap.training.module import RegressorLitModule
from rbmcap.training.run import build_model, configured_markers

TRAIN_PY = REPO / "train.py"
SMALL = {
    "mlp": {"hidden_dim": 64, "num_blocks": 2},
    "bigru": {"hidden_dim": 32, "num_layers": 1},
    "transformer": {"d_model": 32, "nhead": 4, "num_layers": 1, "dim_feedforward": 64},
    "causal_transformer": {"d_model": 32, "nhead": 4, "num_layers": 1, "dim_feedforward": 64},
    "causal_gru": {"hidden_dim": 32, "num_layers": 1},
}
"""Small sizes of each network: seconds to train, the same code paths as the full ones."""


def compose_train(*overrides: str) -> DictConfig:
    """The packaged ``train`` configuration with Hydra ``overrides`` applied."""
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose("train", overrides=list(overrides))


def _small_config(network: str, *overrides: str) -> DictConfig:
    small = [f"model.{k}={v}" for k, v in SMALL[network].items()]
    return compose_train(f"model={network}", *small, *overrides)


def small_module(standin, network: str, *overrides: str) -> RegressorLitModule:
    """The training module the training configuration builds, with a small ``network``."""
    cfg = _small_config(network, *overrides)
    return build_model(cfg, standin, configured_markers(cfg))


def small_model(standin, network: str, *overrides: str) -> PoseRegressor:
    """The model the training configuration describes, with a small ``network``, built from
    :mod:`rbmcap.model` alone (no training module)."""
    cfg = _small_config(network, *overrides)
    settings = OmegaConf.to_container(cfg.module.model, resolve=True)
    markers = load_marker_set(OmegaConf.to_container(cfg.markers, resolve=True))
    return PoseRegressor(regressor_config(standin, markers, **settings))


def tiny_run(dataset, *extra: str) -> list[str]:
    """Overrides for a run of seconds: a small MLP, one epoch of 3 batches on ``dataset``."""
    return [
        f"data.path={dataset}",
        "data.window=30",
        "data.batch_size=4",
        "model=mlp",
        "model.hidden_dim=64",
        "model.num_blocks=1",
        "trainer.max_epochs=1",
        "+trainer.limit_train_batches=3",
        "+trainer.limit_val_batches=2",
        "trainer.enable_progress_bar=false",
        *extra,
    ]


class StartProbe(L.Callback):
    """Records where training starts: step, epoch and a copy of the weights."""

    def on_train_start(self, trainer, pl_module) -> None:
        self.step, self.epoch = trainer.global_step, trainer.current_epoch
        self.weights = {k: v.detach().clone() for k, v in pl_module.state_dict().items()}


def probe_training_start(monkeypatch) -> StartProbe:
    """Add a :class:`StartProbe` to the trainer that ``train`` builds."""
    from rbmcap.training import run

    probe, build = StartProbe(), run.build_trainer

    def with_probe(cfg, output_dir):
        trainer, checkpoint = build(cfg, output_dir)
        trainer.callbacks.append(probe)
        return trainer, checkpoint

    monkeypatch.setattr(run, "build_trainer", with_probe)
    return probe


def run_train_py(cwd: Path, *overrides: str) -> subprocess.CompletedProcess:
    """``python train.py OVERRIDES`` in ``cwd``, with W&B off and no ``RBMCAP_ROOT``."""
    env = {**os.environ, "WANDB_MODE": "disabled"}
    env.pop("RBMCAP_ROOT", None)
    return subprocess.run(
        [sys.executable, str(TRAIN_PY), *overrides],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
