"""Seeds for per-sequence random processes: independent of processing order, shards and workers."""

from __future__ import annotations

import hashlib

import numpy as np

COMPONENTS = ("placement", "soft_tissue", "noise", "occlusion")


def sequence_rng(seed: int, key: str, component: str) -> np.random.Generator:
    """Generator for one realism ``component`` of the sequence ``key`` under run ``seed``.

    Each (seed, key, component) has its own stream, so switching one model off, reordering the
    sequences or splitting the run into shards leaves every other draw unchanged.
    """
    if component not in COMPONENTS:
        raise ValueError(f"unknown realism component {component!r}")
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    ss = np.random.SeedSequence(entropy=int(seed), spawn_key=(COMPONENTS.index(component), *words))
    return np.random.default_rng(ss)
