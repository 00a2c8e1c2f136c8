"""Structured configurations composed from YAML files: :func:`load_config` (a dataclass schema)
and :func:`load_mapping` (a mapping of named entries).

A file, found by name or path (:func:`rbmcap.config.packaged.named_yaml`), is read with
:func:`rbmcap.config.safe_yaml.read_yaml`. Its ``defaults:`` list names the files it is composed
from, with Hydra's meaning (other files of the same group, then ``_self_``), so the files of the
Hydra tree's groups (``markers``) compose the same here and under Hydra. OmegaConf merges the
layers onto ``OmegaConf.structured(schema)``, which checks keys and types, and builds the
dataclass; each refusal is one ConfigError line naming the file (or ``overrides``) and the dotted
key.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from rbmcap.config.packaged import named_yaml
from rbmcap.config.safe_yaml import load_yaml_mapping
from rbmcap.config.values import short_repr
from rbmcap.errors import ConfigError, first_line

T = TypeVar("T")
SELF = "_self_"
"""The entry of a ``defaults:`` list that stands for the file's own keys (Hydra's name)."""


_REFUSED = (OmegaConfBaseException, OverflowError, TypeError, ValueError)
"""What OmegaConf raises for a key or value it refuses: its own errors, or Python's (a huge
integer for a float field is an OverflowError)."""


class ConfigValueError(ConfigError):
    """A configuration value outside its range or choices. ``key`` is its dotted key, so that
    :func:`build_config` can name the file (or ``overrides``) that set it."""

    def __init__(self, key: str, value: Any, problem: str) -> None:
        super().__init__(f"{key} = {short_repr(value)}: {problem}")
        self.key = key


def load_config(
    name_or_path: str | Path,
    group: str,
    schema: type[T],
    what: str,
    overrides: Mapping[str, Any] | None = None,
) -> T:
    """The configuration ``name_or_path`` of ``group`` as an instance of the dataclass ``schema``.

    The file is found by :func:`named_yaml` (a packaged name of ``rbmcap/conf/<group>/`` or a
    path) and read with :func:`read_yaml`. Its ``defaults:`` list names files it is composed
    from: names of the same group or YAML paths relative to the file, and ``_self_`` (the file's
    own keys; last when not listed). Later layers override earlier ones, ``overrides`` (nested
    or dotted keys) last. Where ``schema`` has a ``name`` field the file does not set, the
    name is the file's stem.

    Raises:
        ConfigError: unknown name or missing file; a cycle in the defaults; an unknown key, a
            wrong type, a missing key or a value out of range (the message names the file, or
            'overrides', and the dotted key).
        FormatError: a file is not UTF-8, not YAML (``file:line:column``) or not a mapping.
    """
    path = named_yaml(name_or_path, group, what)
    layers = _file_layers(path, group, what, seen=())
    if "name" in {f.name for f in fields(schema)}:  # type: ignore[arg-type]
        own = next(data for data, where in layers if where == str(path))
        own.setdefault("name", path.stem)
    if overrides:
        layers.append((overrides, "overrides"))
    return build_config(schema, layers)


def load_mapping(name_or_path: str | Path, group: str, what: str) -> dict[Any, Any]:
    """The configuration ``name_or_path`` of ``group`` as a plain mapping, for files whose keys
    are names rather than a schema's fields (plate definitions): found and composed from its
    ``defaults:`` list as in :func:`load_config`, each later layer's entry replacing an earlier
    one's whole (a plate is redefined, not patched).

    Raises:
        ConfigError: unknown name or missing file; a cycle in the defaults.
        FormatError: a file is not UTF-8, not YAML (``file:line:column``) or not a mapping.
    """
    path = named_yaml(name_or_path, group, what)
    merged: dict[Any, Any] = {}
    for data, _ in _file_layers(path, group, what, seen=()):
        merged.update(data)
    return merged


def build_config(schema: type[T], layers: Sequence[tuple[Mapping[str, Any], str]]) -> T:
    """Merge ``(mapping, where)`` layers in order onto ``OmegaConf.structured(schema)`` and build
    the dataclass; each error is one ConfigError line naming ``where`` and the dotted key.

    Keys may be nested or dotted (``{'optimiser.iterations': 7}``). ``${...}`` interpolations
    are refused: a configuration is data, not a program.
    """
    cfg = _writable(OmegaConf.structured(schema))
    sources: list[tuple[str, str]] = []  # (dotted key, the layer that set it), in merge order
    for data, where in layers:
        _refuse_interpolations(data, where)
        for key, value in data.items():
            try:
                OmegaConf.update(cfg, str(key), value, merge=True)
            except OmegaConfBaseException as exc:
                raise _omegaconf_error(exc, where) from None
            except _REFUSED as exc:  # Python's own, e.g. a huge integer for a float field
                raise ConfigError(
                    f"{where}: {key} = {short_repr(value)}: {first_line(exc)}"
                ) from None
            _writable(cfg)
            sources += [(dotted, where) for dotted in _dotted_keys(str(key), value)]
    first, last = (layers[0][1], layers[-1][1]) if layers else (schema.__name__,) * 2
    nested = _nested_container(schema, cfg)
    if nested is not None:
        key, value = nested
        raise ConfigError(
            f"{_set_by(key, sources, last)}: {key} = {short_repr(value)}: expected a name or number"
        )
    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        raise ConfigError(
            f"{first}: misses keys {missing} (set them, or compose a file that "
            "does through a defaults list)"
        )
    try:
        return OmegaConf.to_object(cfg)  # type: ignore[return-value]
    except ConfigValueError as exc:
        raise ConfigError(f"{_set_by(exc.key, sources, last)}: {exc}") from None
    except _REFUSED as exc:
        raise _omegaconf_error(exc, last) from None


def _set_by(key: str, sources: list[tuple[str, str]], fallback: str) -> str:
    """The last layer that set ``key`` or a key inside it (``sources``: (dotted key, layer))."""
    key = key.split("[")[0]
    setters = [where for k, where in sources if k == key or k.startswith(key + ".")]
    return setters[-1] if setters else fallback


def _file_layers(
    path: Path, group: str, what: str, seen: tuple[str, ...]
) -> list[tuple[dict[str, Any], str]]:
    """``path`` and the files its ``defaults:`` list names, as layers in merge order."""
    key = str(path.resolve())
    if key in seen:
        raise ConfigError(f"{path}: its defaults lead back to itself")
    data = load_yaml_mapping(path)
    defaults = data.pop("defaults", [])
    if not isinstance(defaults, list) or not all(isinstance(d, str) for d in defaults):
        raise ConfigError(
            f"{path}: defaults: expected a list of {what} names (or YAML paths) and {SELF}, "
            f"got {short_repr(defaults)}"
        )
    layers: list[tuple[dict[str, Any], str]] = []
    for entry in defaults if SELF in defaults else [*defaults, SELF]:
        if entry == SELF:
            layers.append((data, str(path)))
        else:
            layers += _file_layers(
                _default_path(entry, path, group, what), group, what, (*seen, key)
            )
    return layers


def _default_path(entry: str, including: Path, group: str, what: str) -> Path:
    """A ``defaults:`` entry's file: a YAML path relative to the including file, or a name."""
    if entry.endswith((".yaml", ".yml")) and not Path(entry).expanduser().is_absolute():
        return named_yaml(including.parent / entry, group, what)
    return named_yaml(entry, group, what)


def _writable(node: Any) -> Any:
    """``node`` with the read-only flag OmegaConf gives frozen dataclasses cleared on it and on
    every node below (the layers are merged into it; the dataclass built at the end stays
    frozen). OmegaConf flags the nodes themselves, which its public ``set_readonly`` reaches
    only for containers."""
    node._set_flag("readonly", None)
    if isinstance(node, DictConfig) and not (node._is_missing() or node._is_none()):
        for key in node:
            _writable(node._get_node(key))
    elif isinstance(node, ListConfig) and not (node._is_missing() or node._is_none()):
        for i in range(len(node)):
            _writable(node._get_node(i))
    return node


def _nested_container(schema: type, cfg: DictConfig, prefix: str = "") -> tuple[str, Any] | None:
    """The first ``(dotted key, value)`` where a field typed as a list or mapping of scalars
    (``list[str]``, ``dict[str, str]``, ``tuple[int, ...]``) holds a list or mapping: OmegaConf
    checks the scalars' types but lets containers through."""
    for name, hint in typing.get_type_hints(schema).items():
        if name not in cfg or OmegaConf.is_missing(cfg, name) or cfg[name] is None:
            continue
        value, key = cfg[name], f"{prefix}{name}"
        if typing.get_origin(hint) in (typing.Union, UnionType):  # X | None: X
            hint = next(h for h in typing.get_args(hint) if h is not type(None))
        if is_dataclass(hint) and isinstance(value, DictConfig):
            found = _nested_container(hint, value, f"{key}.")  # type: ignore[arg-type]
            if found is not None:
                return found
        elif typing.get_origin(hint) in (list, tuple, dict) and all(
            arg in (str, int, float, bool, Ellipsis) for arg in typing.get_args(hint)
        ):
            items = value.items() if isinstance(value, DictConfig) else enumerate(value)
            for item, element in items:
                if isinstance(element, (DictConfig, ListConfig)):
                    where = f"{key}.{item}" if isinstance(value, DictConfig) else f"{key}[{item}]"
                    return where, element
    return None


def _dotted_keys(key: str, value: Any) -> list[str]:
    """The dotted keys a layer's entry sets: ``('a', {'b': 1, 'c': {'d': 2}})`` → a.b, a.c.d."""
    if isinstance(value, Mapping) and value:
        return [k for sub, v in value.items() for k in _dotted_keys(f"{key}.{sub}", v)]
    return [key]


def _refuse_interpolations(data: Any, where: str, key: str = "") -> None:
    """ConfigError where a string (key or value) holds ``${``: OmegaConf would resolve it."""
    if isinstance(data, str) and "${" in data:
        raise ConfigError(
            f"{where}: {key or 'a key'}: {short_repr(data)}: interpolations "
            "(${...}) are not allowed here"
        )
    if isinstance(data, Mapping):
        for k, v in data.items():
            _refuse_interpolations(k, where, key)
            _refuse_interpolations(v, where, f"{key}.{k}" if key else str(k))
    elif isinstance(data, (list, tuple)):
        for i, v in enumerate(data):
            _refuse_interpolations(v, where, f"{key}[{i}]")


def _omegaconf_error(exc: Exception, where: str) -> ConfigError:
    """OmegaConf's validation error as one line naming ``where`` and the dotted key."""
    key = getattr(exc, "full_key", None) or getattr(exc, "key", None) or "?"
    if isinstance(exc, (ConfigKeyError, AttributeError)) and "not in" in str(exc):
        parent = getattr(exc, "object_type", None)
        parent = parent if is_dataclass(parent) else None
        known = f"; known: {sorted(f.name for f in fields(parent))}" if parent else ""
        return ConfigError(f"{where}: unknown key {key}{known}")
    value = short_repr(getattr(exc, "value", None))
    return ConfigError(f"{where}: {key} = {value} has the wrong type ({first_line(exc)})")
