"""Experiment loggers, instantiated from the ``logger`` config group (``_target_`` + arguments).

:func:`build_logger` gives the logger its save folder (the run's output folder);
:func:`wandb_logger` is the ``_target_`` of ``logger=wandb``: it applies the rule that keeps W&B
from ever blocking on the network.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from rbmcap.errors import ConfigError


def wandb_logger(project: str, save_dir: str | Path, **kwargs: Any):
    """A ``WandbLogger`` that never waits on the network.

    ``WandbLogger(offline=True)`` overrides ``WANDB_MODE=disabled``, so ``offline`` is passed only
    when W&B is enabled but has no key (``WANDB_API_KEY`` unset): the run is then written
    offline, to be synced later. With a key it logs online; with ``WANDB_MODE=disabled`` it is a
    no-op.
    """
    from lightning.pytorch.loggers import WandbLogger  # start-up: loads wandb, only when asked for

    if os.environ.get("WANDB_MODE") != "disabled" and not os.environ.get("WANDB_API_KEY"):
        kwargs["offline"] = True
    return WandbLogger(project=project, save_dir=str(save_dir), **kwargs)


def build_logger(logger_cfg: DictConfig | dict[str, Any], save_dir: str | Path):
    """The logger ``logger_cfg`` describes (``_target_`` and its arguments; ``_target_: null``
    for none), writing under ``save_dir``; None for none.

    Raises:
        ConfigError: no ``_target_`` key, or the target cannot be built with these arguments.
    """
    cfg = OmegaConf.create(logger_cfg) if isinstance(logger_cfg, dict) else logger_cfg
    if cfg is None or "_target_" not in cfg:
        raise ConfigError("logger: needs a _target_ (a logger class or factory), or null for none")
    if cfg._target_ is None:
        return None
    try:
        return instantiate(cfg, save_dir=str(save_dir))
    except InstantiationException as exc:
        raise ConfigError(f"logger {cfg._target_}: {exc}") from exc
