"""The Hydra twin of ``rbmcap synth``, behind ``data_prep/synthesize.py`` and the
``rbmcap-synthesize`` command.

    rbmcap-synthesize motions=data/amass markers=rbm14 realism=realistic
    rbmcap-synthesize motions=data/amass shard=3/16 out=data/amass_rbm14_s3
    rbmcap-synthesize -m motions=data/amass markers=rbm_a,rbm_b,rbm_c

Configuration: the packaged ``rbmcap/conf/data_prep/synthesize.yaml``. Hydra does not change
directory; without ``out`` the dataset goes to ``<run dir>/dataset``, and a summary to
``<run dir>/dataset_info.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rbmcap.configfiles import HYDRA_CONFIG_MODULE
from rbmcap.errors import RBMCapError


def synthesize(cfg: DictConfig, output_dir: str | Path) -> dict:
    """Run the synthesis ``cfg`` describes; returns the dataset summary (also saved as JSON)."""
    from rbmcap.dataset import SynthOptions, dataset_info, parse_shard, synthesize_dataset

    output_dir = Path(output_dir)
    out = Path(cfg.out) if cfg.out else output_dir / "dataset"
    markers = OmegaConf.to_container(cfg.markers, resolve=True)
    realism = OmegaConf.to_container(cfg.realism, resolve=True)
    options = SynthOptions(
        motions=str(cfg.motions),
        out=out,
        body=str(cfg.body),
        gender=str(cfg.gender),
        markers=markers,  # type: ignore[arg-type]
        realism=realism,  # type: ignore[arg-type]
        fps=float(cfg.fps),
        seed=int(cfg.seed),
        workers=int(cfg.workers),
        shard=parse_shard(cfg.shard) if cfg.shard else None,
        split_lists=cfg.split_lists,
        progress=bool(cfg.progress),
    )
    synthesize_dataset(options)
    info = dataset_info(out)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "dataset_info.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


@hydra.main(
    version_base="1.3",
    config_path=f"pkg://{HYDRA_CONFIG_MODULE}",
    config_name="data_prep/synthesize",
)
def main(cfg: DictConfig) -> None:
    """Synthesise as ``cfg`` says; print the summary as JSON, or one error line and exit 2."""
    try:
        info = synthesize(cfg, HydraConfig.get().runtime.output_dir)
    except RBMCapError as exc:
        print(f"synthesize: error: {exc}", file=sys.stderr)
        sys.exit(2)
    print(json.dumps(info))
