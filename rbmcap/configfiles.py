"""Locate and read the YAML data files rbmcap ships under ``conf/`` (marker sets, realism presets,
solver configs, joint limits and maps) or that users pass as paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rbmcap.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"
"""The repository's configuration tree (``conf/``)."""


def conf_file(*parts: str) -> Path:
    """Path of a file under ``conf/`` (e.g. ``conf_file("motion", "joint_limits.yaml")``)."""
    path = CONF_DIR.joinpath(*parts)
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found (expected under {CONF_DIR})")
    return path


def load_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML file whose top level must be a mapping."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a YAML mapping at the top level")
    return data


def named_yaml(name_or_path: str | Path, group: str, what: str) -> Path:
    """A YAML file given by name (``conf/<group>/<name>.yaml``) or by path.

    Raises ConfigError naming the known names when neither exists.
    """
    text = str(name_or_path)
    path = Path(text).expanduser()
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise ConfigError(f"{path}: {what} file not found")
        return path
    path = CONF_DIR / group / f"{text}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml")))
        raise ConfigError(f"unknown {what} {text!r}; known: {known} (or a YAML path)")
    return path
