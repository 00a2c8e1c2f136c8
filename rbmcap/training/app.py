"""The Hydra application behind ``train.py`` and the ``rbmcap-train`` command.

The configuration tree is the packaged ``rbmcap/conf`` (``pkg://rbmcap.conf``), so training runs
from any working directory and from an installed wheel.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rbmcap.config.packaged import HYDRA_CONFIG_MODULE
from rbmcap.errors import USER_ERRORS, user_error


@hydra.main(version_base="1.3", config_path=f"pkg://{HYDRA_CONFIG_MODULE}", config_name="train")
def main(cfg: DictConfig) -> None:
    """Train as ``cfg`` says; print the result as JSON, or one error line and exit with the
    error's status (:mod:`rbmcap.errors`: 2 configuration, 3 format, 4 model, 5 data, e.g. a
    loss that became NaN). SIGTERM stops the run after its current batch with one line naming the
    checkpoint to resume from, and status 143 (:mod:`rbmcap.training.stop`)."""
    # start-up: Hydra composes the configuration and reports its errors before torch and
    # Lightning load (seconds)
    from rbmcap.training.run import train
    from rbmcap.training.stop import stopped_by_sigterm, watch_sigterm

    hydra_cfg = HydraConfig.get()
    watch_sigterm()
    try:
        command = " ".join(["rbmcap-train", *hydra_cfg.overrides.task])
        result = train(cfg, hydra_cfg.runtime.output_dir, command=command)
    except USER_ERRORS as exc:
        message, status = user_error(exc)
        print(f"train: error: {message}", file=sys.stderr)
        sys.exit(status)
    except BaseException:
        if not stopped_by_sigterm():
            raise
        print(
            f"train: stopped by SIGTERM; {_resume_hint(hydra_cfg.runtime.output_dir)}",
            file=sys.stderr,
        )
        sys.exit(128 + signal.SIGTERM)
    print(json.dumps(result, indent=2))


def _resume_hint(output_dir: str) -> str:
    """Where a stopped run can go on from: its last checkpoint (written after every epoch)."""
    from rbmcap.training.run import LAST  # start-up: as in main, only when a run stopped

    last = Path(output_dir) / "checkpoints" / f"{LAST}.ckpt"
    if last.is_file():
        return f"resume from its last epoch with ckpt_path={last}"
    return f"no epoch had ended, so {output_dir} holds no checkpoint"
