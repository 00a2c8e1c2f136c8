"""Where the tests find files: the repository itself (``train.py``, ``notebooks/``, ``docs/``) and
the shared data, ``shared/data`` beside the repository (``../shared/data`` from its root), which
holds captures and motion clips the repository does not ship. The package never reads the shared
data; tests that need a folder skip where it is absent, or, through :func:`require`, fail there
under ``CI``.

A folder with an ``RBMCAP_*_DIR`` variable (the names the training configuration and the
notebooks read) is taken from that variable when it is set.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
"""The repository's root (this file is ``tests/helpers/shared.py``)."""
SHARED_DATA = REPO.parent / "shared" / "data"


def _folder(name: str, variable: str) -> Path:
    """``SHARED_DATA / name``, or the folder the environment variable ``variable`` names."""
    return Path(os.environ.get(variable) or SHARED_DATA / name)


CMU = _folder("cmu", "RBMCAP_CMU_DIR")
"""The CMU clips on their own rig (BVH)."""
ICLONE = _folder("cmu-iclone", "RBMCAP_ICLONE_DIR")
"""CMU clips on the iClone / Character Creator rig (BVH)."""
BANDAI = _folder("bandai", "RBMCAP_BANDAI_DIR")
"""The Bandai Namco Research Motion clips (BVH)."""
PIG = _folder("pig", "RBMCAP_PIG_DIR")
"""A Vicon Plug-in Gait session (static and walk)."""
OPTITRACK_SAMPLE = SHARED_DATA / "optitrack" / "sample_take_v1.21.csv"
"""An OptiTrack Motive CSV export."""


def require(path: Path) -> Path:
    """``path``, where it exists; else the test skips, or fails with ``CI`` set (as ``.ci/run``
    sets it), where a check of the shared data that skipped would pass unseen."""
    if not path.exists():
        give_up = pytest.fail if os.environ.get("CI") else pytest.skip
        give_up(f"{path} is absent (the shared data: ../shared/data beside the repository)")
    return path
