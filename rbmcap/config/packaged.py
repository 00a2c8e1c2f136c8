"""Where rbmcap's packaged configuration lives, and how a YAML file is named.

``rbmcap/conf/`` holds marker sets, realism presets, solver configs, joint limits and maps, and
the Hydra training tree. Everything is found through :func:`conf_dir`, which asks
``importlib.resources`` where the installed package keeps its data, so an editable checkout and a
wheel behave the same from any working directory. :func:`named_yaml` takes either a packaged name
of a group or a path.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from rbmcap.config.values import short_repr
from rbmcap.errors import ConfigError

HYDRA_CONFIG_MODULE = "rbmcap.conf"
"""The Hydra config tree as a module (``initialize_config_module`` / ``pkg://rbmcap.conf``)."""


def conf_dir() -> Path:
    """The packaged configuration tree (``rbmcap/conf``) as a directory on disk.

    Wheels and editable installs both unpack the package onto the file system, so the resource
    is a real directory; Hydra's ``initialize_config_dir`` and ``hydra.main`` can be given it.
    """
    path = Path(str(resources.files("rbmcap") / "conf"))
    if not path.is_dir():
        raise ConfigError(f"{path}: rbmcap's packaged configuration is missing (broken install?)")
    return path


def conf_file(*parts: str) -> Path:
    """Path of a packaged file: ``conf_file("motion", "joint_limits.yaml")``."""
    path = conf_dir().joinpath(*parts)
    if not path.is_file():
        raise ConfigError(f"{path}: configuration file not found (expected under {conf_dir()})")
    return path


def conf_names(group: str) -> list[str]:
    """Names of a group's packaged YAML files: ``conf_names("markers")`` → ``["moshpp53", …]``."""
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


def named_yaml(name_or_path: str | Path, group: str, what: str) -> Path:
    """A YAML file given by name (packaged ``rbmcap/conf/<group>/<name>.yaml``) or by path.

    Raises ConfigError naming the known names when neither exists (also for a name no file
    system could hold: a NUL byte, too long, ``~user`` of an unknown user).
    """
    text = str(name_or_path)
    try:
        path = Path(text).expanduser()
        if path.suffix in (".yaml", ".yml") or path.is_file():
            if not path.is_file():
                raise ConfigError(f"{path}: {what} file not found")
            return path
        path = conf_dir() / group / f"{text}.yaml"
        found = path.is_file()
    except (OSError, ValueError, RuntimeError):
        found = False
    if not found:
        known = ", ".join(conf_names(group))
        raise ConfigError(f"unknown {what} {short_repr(text)}; known: {known} (or a YAML path)")
    return path
