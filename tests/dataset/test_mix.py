"""Training data mixing procedural and real motion: ``data=procedural_real`` makes a dataset whose
split lists put the CMU clips by subject and the Bandai clips by style beside the procedural
motions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.shared import BANDAI
from helpers.shared import ICLONE as CLIPS
from helpers.training import compose_train

from rbmcap.dataset import Manifest
from rbmcap.training.run import build_datamodule


@pytest.mark.skipif(
    not (CLIPS.is_dir() and BANDAI.is_dir()), reason="the CMU iClone or Bandai clips are absent"
)
def test_procedural_real_recipe_mixes_both_with_subjects_kept_apart(tmp_path):
    clips = tmp_path / "cmu-iclone"
    clips.mkdir()
    for name in ("002_03.bvh", "003_02.bvh", "001_01.bvh"):  # test, val and train subjects
        if not (CLIPS / name).exists():
            pytest.skip(f"{name} missing")
        shutil.copy(CLIPS / name, clips / name)
    bandai = tmp_path / "bandai"
    bandai.mkdir()
    styles = {"old": "test", "happy": "val", "normal": "train"}
    for style in styles:  # a test, a validation and a training style
        name = f"dataset-1_walk_{style}_001.bvh"
        if not (BANDAI / name).exists():
            pytest.skip(f"{name} missing")
        shutil.copy(BANDAI / name, bandai / name)
    overrides = [
        "data=procedural_real",
        f"paths.root_dir={tmp_path}",
        "data.generate.num=4",
        f"data.generate.bvh.0.dir={clips}",
        f"data.generate.bvh.1.dir={bandai}",
        "data.realism=none",
    ]
    cfg = compose_train(*overrides)
    dm = build_datamodule(cfg)
    dm.prepare_data()
    seqs = Manifest.load(Path(cfg.data.path)).sequences
    real = {s.source.split("/")[-1]: s.split for s in seqs if s.source.startswith("cmu-iclone/")}
    assert real == {
        "002_03_poses.npz": "test",
        "003_02_poses.npz": "val",
        "001_01_poses.npz": "train",
    }
    styled = {s.source.split("/")[1]: s.split for s in seqs if s.source.startswith("bandai/")}
    assert styled == styles
    procedural = [s for s in seqs if s.source.startswith("Procedural/")]
    assert len(procedural) == 4 and {s.split for s in procedural} >= {"train"}
