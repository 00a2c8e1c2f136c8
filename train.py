"""Train an RBM → SMPL regression network.

    python train.py                              # defaults: procedural data on the stand-in
    python train.py experiment=demo              # the CPU demo (a few minutes)
    python train.py experiment=paper_rbm14 trainer=gpu
    python train.py experiment=demo trainer.max_epochs=20 ckpt_path=outputs/.../last.ckpt

Configuration lives in ``conf/`` (groups: data, markers, model, loss, optim, trainer, logger,
experiment, paths); this file only wires it to :func:`rbmcap.training.run.train`.
"""

from __future__ import annotations

import json
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from rbmcap.errors import RBMCapError


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> None:
    from rbmcap.training.run import train

    try:
        result = train(cfg, HydraConfig.get().runtime.output_dir)
    except RBMCapError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
