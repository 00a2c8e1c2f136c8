"""Shared test set-up: no network, a private cache, the stand-in body once per session."""

from __future__ import annotations

import os
import tempfile

os.environ["WANDB_MODE"] = "disabled"
os.environ.setdefault("RBMCAP_CACHE", tempfile.mkdtemp(prefix="rbmcap-test-cache-"))

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def standin():
    """The neutral stand-in body (built into the session's private cache)."""
    from rbmcap.body import load_body_model

    return load_body_model("standin")
