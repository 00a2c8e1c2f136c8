"""Where rbmcap keeps files: those it builds for the user (the stand-in body, caches) and the
pretrained checkpoints it ships (resolved by name)."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from rbmcap.errors import ModelError


def cache_dir() -> Path:
    """``$RBMCAP_CACHE``, else ``$XDG_CACHE_HOME/rbmcap``, else ``~/.cache/rbmcap``."""
    if os.environ.get("RBMCAP_CACHE"):
        return Path(os.environ["RBMCAP_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "rbmcap"


def pretrained_dir() -> Path:
    """The folder of the shipped checkpoints (inside the installed package)."""
    return Path(str(resources.files("rbmcap") / "pretrained"))


def pretrained_names() -> list[str]:
    """Names of the shipped checkpoints, sorted."""
    folder = pretrained_dir()
    return sorted(p.stem for p in folder.glob("*.ckpt")) if folder.is_dir() else []


def resolve_checkpoint(spec: str | Path) -> Path:
    """The checkpoint file ``spec`` names: an existing path, or a shipped model's name.

    Raises:
        ModelError: neither (the message lists the shipped names).
    """
    path = Path(spec)
    try:
        if path.is_file():
            return path
    except OSError:  # a name no file system takes (too long, ...): not a file, perhaps a name
        pass
    if str(spec) in pretrained_names():
        return pretrained_dir() / f"{spec}.ckpt"
    names = ", ".join(pretrained_names()) or "none"
    raise ModelError(f"{spec}: no such checkpoint (file or pretrained model: {names})")
