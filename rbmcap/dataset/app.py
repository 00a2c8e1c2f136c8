"""The Hydra twin of ``rbmcap synth``, behind ``data_prep/synthesize.py`` and the
``rbmcap-synthesize`` command.

    rbmcap-synthesize motions=data/amass markers=rbm14 realism=realistic
    rbmcap-synthesize motions=data/amass shard=3/16 out=data/amass_rbm14_s3
    rbmcap-synthesize -m motions=data/amass markers=rbm_a,rbm_b,rbm_c

Configuration: the packaged ``rbmcap/conf/data_prep/synthesize.yaml``, which holds only Hydra's own
keys; the options and their defaults are :class:`~rbmcap.dataset.SynthOptions`' (registered here
with the ConfigStore as ``data_prep/synth_options``). Hydra does not change
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

from rbmcap.config.packaged import HYDRA_CONFIG_MODULE
from rbmcap.dataset.options import SynthOptions, hydra_node
from rbmcap.errors import USER_ERRORS, user_error


def register_configs() -> None:
    """Register the synthesis options (built from :class:`SynthOptions`' defaults) with Hydra's
    ConfigStore as ``data_prep/synth_options``, which ``data_prep/synthesize.yaml`` extends."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(
        group="data_prep", name="synth_options", node=hydra_node(), package="_global_"
    )


register_configs()


def synthesize(cfg: DictConfig, output_dir: str | Path) -> dict:
    """Run the synthesis ``cfg`` describes; returns the dataset summary (also saved as JSON).

    Raises:
        ConfigError: a bad value (from :class:`SynthOptions`, naming the key).
    """
    from rbmcap.dataset import dataset_info, synthesize_dataset

    output_dir = Path(output_dir)
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    values["out"] = values.get("out") or output_dir / "dataset"
    options = SynthOptions.from_mapping(values)
    synthesize_dataset(options)
    info = dataset_info(options.out)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "dataset_info.json").write_text(json.dumps(info, indent=1) + "\n")
    return info


@hydra.main(
    version_base="1.3",
    config_path=f"pkg://{HYDRA_CONFIG_MODULE}",
    config_name="data_prep/synthesize",
)
def main(cfg: DictConfig) -> None:
    """Synthesise as ``cfg`` says; print the summary as JSON, or one error line and the error's
    exit status (:mod:`rbmcap.errors`)."""
    try:
        info = synthesize(cfg, HydraConfig.get().runtime.output_dir)
    except USER_ERRORS as exc:
        message, status = user_error(exc)
        print(f"synthesize: error: {message}", file=sys.stderr)
        sys.exit(status)
    print(json.dumps(info))
