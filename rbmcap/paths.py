"""Where rbmcap keeps files it builds for the user (the stand-in body, caches)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$RBMCAP_CACHE``, else ``$XDG_CACHE_HOME/rbmcap``, else ``~/.cache/rbmcap``."""
    if os.environ.get("RBMCAP_CACHE"):
        return Path(os.environ["RBMCAP_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rbmcap"
