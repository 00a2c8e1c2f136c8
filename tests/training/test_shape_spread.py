"""The procedural body-shape spread (``data.generate.shape``): drawn as asked, recorded with the
motions and the dataset, and a recipe asking another spread of existing data is refused."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from rbmcap.dataset.recipe import MotionRecipe, add_procedural_motions
from rbmcap.errors import ConfigError
from rbmcap.motion.procedural.library import generate_library, sample_betas
from rbmcap.training.data import RBMDataModule


def _subject_betas(folder, n):
    return np.stack(
        [np.load(folder / "Procedural" / f"S{s:02d}" / "shape.npz")["betas"] for s in range(n)]
    )


def test_sample_betas_scales_and_clips_the_same_draws():
    z = np.random.default_rng(3).normal(0.0, 1.0, 10)
    default = sample_betas(np.random.default_rng(3), 10)
    wide = sample_betas(np.random.default_rng(3), 10, std=1.5, clip=3.0)
    np.testing.assert_allclose(default[:10], np.clip(0.8 * z, -2, 2))
    np.testing.assert_allclose(wide[:10], np.clip(1.5 * z, -3, 3))
    assert wide.shape == (16,) and not wide[10:].any()
    with pytest.raises(ConfigError, match="shape spread"):
        sample_betas(np.random.default_rng(3), 10, std=1.0, clip=0.0)


def test_library_draws_and_records_its_spread_and_refuses_another(tmp_path, standin):
    narrow, wide = tmp_path / "narrow", tmp_path / "wide"
    generate_library(narrow, 3, 5, kinds=["walk"], num_subjects=3, body=standin)
    generate_library(
        wide, 3, 5, kinds=["walk"], num_subjects=3, shape_std=1.6, shape_clip=4.0, body=standin
    )
    record = json.loads((wide / "Procedural" / "library.json").read_text())
    assert record == {"num": 3, "seed": 5, "subjects": 3, "shape": {"std": 1.6, "clip": 4.0}}
    a = _subject_betas(narrow, 3)[:, : standin.num_betas]
    b = _subject_betas(wide, 3)[:, : standin.num_betas]
    # the same master draws, twice as wide: where neither clip bites, exactly double
    free = np.abs(a) < 2.0
    assert free.sum() > 10
    np.testing.assert_allclose(b[free], 2.0 * a[free], rtol=1e-6)

    def recipe(**shape):
        return MotionRecipe(wide, num=3, seed=5, subjects=3, bvh=[], shape=shape or None)

    add_procedural_motions(wide, recipe(std=1.6, clip=4.0), 60.0, standin)  # reused as it is
    with pytest.raises(ConfigError, match=r"std 1\.6 clipped to ±4\.0.*asks std 0\.8"):
        add_procedural_motions(wide, recipe(), 60.0, standin)
    with pytest.raises(ConfigError, match="unknown key"):
        recipe(sd=1.0).shape_spread()


def test_an_existing_dataset_made_with_another_spread_is_refused(tmp_path, tiny_dataset):
    """A dataset without a record was made with the default spread (the only one there was)."""
    data_path = tmp_path / "dataset"
    shutil.copytree(tiny_dataset, data_path)

    def module(**shape):
        recipe = MotionRecipe(tmp_path / "m", num=12, seed=0, subjects=0, bvh=[], shape=shape)
        return RBMDataModule(data_path, window=30, batch_size=4, generate=recipe)

    module().prepare_data()
    module(std=0.8, clip=2.0).prepare_data()
    with pytest.raises(ConfigError, match=r"give data\.path and data\.generate\.motions_dir new"):
        module(std=1.2).prepare_data()
    (data_path / "recipe.json").write_text(json.dumps({"shape": {"std": 1.2, "clip": 2.0}}))
    module(std=1.2).prepare_data()
    with pytest.raises(ConfigError, match=r"std 1\.2 clipped"):
        module().prepare_data()
