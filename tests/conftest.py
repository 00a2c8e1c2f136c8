"""Shared test set-up: no network, a private cache, the stand-in body once per session,
hypothesis profiles (``ci``: derandomised, chosen when ``CI`` is set; ``dev``: the default), and
under pytest-xdist, tests marked ``exclusive`` run with no other test alongside."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile

os.environ["WANDB_MODE"] = "disabled"
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

# A private cache for the run, made by the first process (pytest-xdist's workers inherit it, so
# the stand-in body is built once, written atomically) and removed by it when the run ends.
_OWN_CACHE = "RBMCAP_CACHE" not in os.environ
if _OWN_CACHE:
    os.environ["RBMCAP_CACHE"] = tempfile.mkdtemp(prefix="rbmcap-test-cache-")

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
if settings.default.derandomize:
    # hypothesis also draws values from a pool of the literals in the project's modules that are
    # imported so far; which those are depends on the tests that ran before in the process and
    # on every literal in the package, so a derandomised run's inputs moved with the test order
    # and with any edit of the code. Derandomised runs draw from hypothesis's own constants only.
    from hypothesis.internal.conjecture import providers as _providers

    _providers._get_local_constants = _providers.Constants


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


_LOCKS = pytest.StashKey[str]()


def pytest_configure(config):
    """In the first process, a folder for the ``exclusive`` locks, which xdist's workers (started
    after this, with its environment) share; removed when the run ends."""
    if not hasattr(config, "workerinput") and "RBMCAP_TEST_LOCKS" not in os.environ:
        locks = tempfile.mkdtemp(prefix="rbmcap-test-locks-")
        config.stash[_LOCKS] = os.environ["RBMCAP_TEST_LOCKS"] = locks


def pytest_unconfigure(config):
    """The first process removes the lock folder and the cache it made."""
    locks = config.stash.get(_LOCKS, None)
    if locks:
        shutil.rmtree(locks, ignore_errors=True)
        del os.environ["RBMCAP_TEST_LOCKS"]
    if _OWN_CACHE:
        shutil.rmtree(os.environ["RBMCAP_CACHE"], ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Run the test (set-up, call and tear-down, with the wider fixtures they build or end) in
    its turn: alone if it is marked ``exclusive``, else beside other unmarked tests."""
    with _turn(item):
        return (yield)


@contextlib.contextmanager
def _turn(item):
    """Under pytest-xdist, a readers-writer lock over the workers: an unmarked test holds a
    shared lock on ``run`` while it runs; an ``exclusive`` one (it streams in real time or
    counts what arrives in time, which a second busy worker on a 2-core machine breaks) closes
    ``gate`` to tests not yet started, then waits for the running ones to end and holds ``run``
    alone. Outside xdist (or without ``fcntl``) tests run in turn anyway."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock
        fcntl = None
    locks = os.environ.get("RBMCAP_TEST_LOCKS")
    if not hasattr(item.config, "workerinput") or fcntl is None or not locks:
        yield
        return
    exclusive = item.get_closest_marker("exclusive") is not None
    with (
        open(os.path.join(locks, "gate"), "a") as gate,
        open(os.path.join(locks, "run"), "a") as run,
    ):
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(run, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield  # closing the files releases the locks


_FUZZ_PARTS = pytest.StashKey[list]()
_FUZZ_TOTAL = pytest.StashKey[dict]()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """Under pytest-xdist, the first process keeps each worker's fuzz counts as it ends."""
    part = getattr(node, "workeroutput", {}).get("fuzz")
    if part:
        node.config.stash.setdefault(_FUZZ_PARTS, []).append(part)


def pytest_sessionfinish(session, exitstatus):
    """With ``RBMCAP_FUZZ_REPORT=FILE``, write the fuzz tests' counts per reader there, summed
    over pytest-xdist's workers (each hands its counts to the first process)."""
    path = os.environ.get("RBMCAP_FUZZ_REPORT")
    if not path:
        return
    from helpers.fuzzing import report, write_report

    config = session.config
    if hasattr(config, "workerinput"):
        config.workeroutput["fuzz"] = report()
        return
    parts = [*config.stash.get(_FUZZ_PARTS, []), report()]
    if any(parts):
        config.stash[_FUZZ_TOTAL] = write_report(path, parts)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The fuzz counts written by :func:`pytest_sessionfinish`, one line per reader."""
    data = config.stash.get(_FUZZ_TOTAL, None)
    if data:
        from helpers.fuzzing import table

        terminalreporter.section(f"fuzz counts ({os.environ['RBMCAP_FUZZ_REPORT']})")
        for line in table(data):
            terminalreporter.write_line(line)
