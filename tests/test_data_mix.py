"""Training data mixing procedural and real motion (issue 14): ``data=procedural_real`` makes a
dataset whose split lists put real clips by subject beside the procedural motions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from rbmcap.configfiles import conf_dir
from rbmcap.dataset import Manifest
from rbmcap.training.run import build_datamodule

CLIPS = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "cmu-iclone"


@pytest.mark.skipif(not CLIPS.is_dir(), reason="the CMU iClone clips are not on this machine")
def test_procedural_real_recipe_mixes_both_with_subjects_kept_apart(tmp_path):
    clips = tmp_path / "cmu-iclone"
    clips.mkdir()
    for name in ("002_03.bvh", "003_02.bvh", "001_01.bvh"):  # test, val and train subjects
        if not (CLIPS / name).exists():
            pytest.skip(f"{name} missing")
        shutil.copy(CLIPS / name, clips / name)
    overrides = ["data=procedural_real", f"paths.root_dir={tmp_path}", "data.generate.num=4",
                 f"data.generate.bvh.0.dir={clips}", "data.realism=none"]  # fmt: skip
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    dm = build_datamodule(cfg, None)
    dm.prepare_data()
    seqs = Manifest.load(Path(cfg.data.path)).sequences
    real = {s.source.split("/")[-1]: s.split for s in seqs if s.source.startswith("cmu-iclone/")}
    assert real == {"002_03_poses.npz": "test", "003_02_poses.npz": "val",
                    "001_01_poses.npz": "train"}  # fmt: skip
    procedural = [s for s in seqs if not s.source.startswith("cmu-iclone/")]
    assert len(procedural) == 4 and {s.split for s in procedural} >= {"train"}
