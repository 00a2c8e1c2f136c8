"""Shared test set-up: no network, a private cache, the stand-in body once per session, and
hypothesis profiles (``ci``: derandomised, chosen when ``CI`` is set; ``dev``: the default)."""

from __future__ import annotations

import os
import tempfile

os.environ["WANDB_MODE"] = "disabled"
os.environ.setdefault("RBMCAP_CACHE", tempfile.mkdtemp(prefix="rbmcap-test-cache-"))
# One intra-op thread for the whole run and for every process a test starts: the tests' batches
# are small, where torch's thread pool costs more than it gives, and on a machine whose cores are
# busy with other work its threads spin waiting for each other (a suite run then takes 10-20
# times as long). RBMCAP_TEST_THREADS=N tries another count.
os.environ["OMP_NUM_THREADS"] = os.environ.get("RBMCAP_TEST_THREADS", "1")
os.environ["MKL_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"]

import pytest
import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# CI runs must not depend on luck: the same examples every run (hypothesis derives them from the
# test itself), no example database. Locally, random exploration keeps finding new cases.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


@pytest.fixture(autouse=True)
def _seeded_global_rngs():
    """Every test starts from the same global random state (torch, numpy, random), so a test
    that draws from a global generator is as repeatable as one that takes a seed."""
    import random

    import numpy as np
    import torch

    random.seed(0)
    np.random.seed(0)  # noqa: NPY002 - seeding the legacy global generator is the point
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def standin():
    """The neutral stand-in body (built into the session's private cache)."""
    from rbmcap.body import load_body_model

    return load_body_model("standin")


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory, standin):
    """A small synthesised dataset (12 procedural motions, rbm14, realistic) with all splits."""
    from rbmcap.dataset import SynthOptions, synthesize_dataset
    from rbmcap.motion.procedural.library import generate_library

    root = tmp_path_factory.mktemp("tiny")
    generate_library(root / "motions", 12, seed=0, body=standin)
    out = root / "dataset"
    synthesize_dataset(
        SynthOptions(
            motions=root / "motions",
            out=out,
            realism="realistic",
            progress=False,
            split_lists=root / "motions" / "splits",
        ),
        body=standin,
    )
    return out


@pytest.fixture(scope="session")
def checkpoint(standin, tiny_dataset, tmp_path_factory):
    """A tiny MLP trained for two steps on :func:`tiny_dataset` (seconds), saved as a
    checkpoint: for tests of loading, inference and evaluation plumbing, not of accuracy."""
    import lightning as L
    import torch
    from helpers.training import small_module

    from rbmcap.training.data import RBMDataModule

    torch.manual_seed(0)
    model = small_module(standin, "mlp")
    path = tmp_path_factory.mktemp("ckpt") / "model.ckpt"
    trainer = L.Trainer(
        max_steps=2,
        limit_val_batches=1,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=path.parent,
    )
    trainer.fit(model, datamodule=RBMDataModule(tiny_dataset, window=30, batch_size=4))
    trainer.save_checkpoint(path)
    return path


def pytest_sessionfinish(session, exitstatus):
    """With ``RBMCAP_FUZZ_REPORT=FILE``, write the fuzz tests' counts per reader there."""
    report = os.environ.get("RBMCAP_FUZZ_REPORT")
    if report:
        from helpers.fuzzing import STATS, write_report

        if STATS:
            write_report(report)
