"""Locate and read the YAML data rbmcap ships inside the package (``rbmcap/conf/``: marker sets,
realism presets, solver configs, joint limits and maps, and the Hydra training tree) or that users
pass as paths.

Everything is found through :func:`conf_dir`, which asks ``importlib.resources`` where the
installed package keeps its data, so an editable checkout and a wheel behave the same from any
working directory.

Every YAML reader goes through :func:`read_yaml` (or :func:`load_yaml_mapping`): a safe loader
with bounded nesting and alias expansion, so that no file makes a reader recurse, hang or fill
the memory. A file that is not UTF-8, not YAML or (for a mapping) not a mapping is a
FormatError naming ``file:line:column``; a bad value inside well-formed YAML is each reader's
ConfigError naming the file and the key (:func:`finite_float`, :func:`finite_vector`,
:func:`short_repr` help there).

Configurations with a schema (solver, realism presets, marker sets, joint maps) load through
:func:`load_config`: the file, found by name or path, is read with :func:`read_yaml`; its
``defaults:`` list (other files of the same group, then ``_self_``, as in Hydra's config tree)
is composed, and the layers are merged onto ``OmegaConf.structured(schema)``, which checks keys
and types and returns the dataclass.
"""

from __future__ import annotations

import math
import numbers
import reprlib
import typing
from collections.abc import Mapping, Sequence
from dataclasses import fields, is_dataclass
from importlib import resources
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar

import numpy as np
import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from rbmcap.errors import ConfigError, FormatError, RBMCapError, first_line, location

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


MAX_YAML_DEPTH = 64
"""Deepest nesting of lists and mappings a YAML file may have (aliases expanded)."""
MAX_YAML_NODES = 100_000
"""Most nodes a YAML file may expand to through its aliases (a "billion laughs" is refused)."""


class _Bounds:
    """Mixed into a safe loader: refuses deep nesting (no RecursionError) and aliases expanding
    to huge or recursive trees, and turns a scalar it cannot construct (``!!int x``, a timestamp
    such as 2001-13-45, ``!!timestamp x``, a 5000-digit integer) into a ConstructorError with its
    position."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_YAML_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        _check_expansion(node)
        return node

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # PyYAML's scalar constructors may raise anything
            what = repr(node.value)[:40] if isinstance(node, yaml.ScalarNode) else node.id
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read {what} as {node.tag}: {exc}", node.start_mark
            ) from None


class _PyLoader(_Bounds, yaml.SafeLoader):
    """The bounded safe loader, all Python."""


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _CLoader(
        _Bounds,
        yaml.composer.Composer,
        CParser,
        yaml.constructor.SafeConstructor,
        yaml.resolver.Resolver,
    ):
        """The bounded safe loader on libyaml's scanner and parser (iterative, in C);
        composition stays in Python (:class:`yaml.composer.Composer` comes before
        CParser, whose own composer has no bounds)."""

        def __init__(self, stream):
            CParser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _BoundedLoader: type = _CLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _BoundedLoader = _PyLoader


def _check_expansion(root) -> None:
    """ComposerError if the node graph, aliases expanded, is cyclic, deeper than
    :data:`MAX_YAML_DEPTH` or larger than :data:`MAX_YAML_NODES` (iterative, linear time)."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        kids = _child_nodes(node)
        if finished:
            size[key] = 1 + sum(size[id(c)] for c in kids)
            depth[key] = 1 + max((depth[id(c)] for c in kids), default=0)
            problem = None
            if size[key] > MAX_YAML_NODES:
                problem = f"its aliases expand to more than {MAX_YAML_NODES} nodes"
            elif depth[key] > MAX_YAML_DEPTH:
                problem = f"its aliases expand to more than {MAX_YAML_DEPTH} levels of nesting"
            if problem:
                raise yaml.composer.ComposerError(None, None, problem, node.start_mark)
        elif key in depth:
            continue
        elif key in size:  # entered, not finished: an ancestor of itself
            raise yaml.composer.ComposerError(None, None, "recursive alias", node.start_mark)
        else:
            size[key] = 0
            stack.append((node, True))
            stack.extend((c, False) for c in kids)


def _child_nodes(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _yaml_error(path: Path, text: str, exc: yaml.YAMLError) -> FormatError:
    """FormatError ``path:line:column: not valid YAML: problem`` (1-based)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = column = None
    if mark is not None:
        line, column = mark.line + 1, mark.column + 1
    elif isinstance(exc, yaml.reader.ReaderError):  # libyaml: a byte offset into UTF-8
        before = text.encode("utf-8")[: exc.position] if _BoundedLoader is not _PyLoader else None
        before = before.decode("utf-8", "ignore") if before is not None else text[: exc.position]
        line, column = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    problem = getattr(exc, "problem", None) or str(exc)
    if isinstance(exc, yaml.reader.ReaderError):
        char = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or " ")
        problem = f"unacceptable character #x{char:04x}: {exc.reason}"
    context = getattr(exc, "context", None)
    what = f"{context}: {problem}" if context else problem
    return FormatError(f"{location(path, line, column)}: not valid YAML: {what}")


def read_yaml(path: str | Path, missing: type[RBMCapError] = ConfigError) -> Any:
    """The content of a YAML file, read safely: bounded nesting and alias expansion, so that
    no input makes the reader recurse, hang or fill the memory.

    Raises:
        ``missing`` (ConfigError by default): the file does not exist.
        FormatError: the file cannot be read, is not UTF-8 or not valid YAML (the message gives
            ``file:line:column`` where YAML tells it).
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise missing(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise FormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _yaml_error(path, text, exc) from None
    except RecursionError:  # not expected with the bounds above; never a traceback
        raise FormatError(f"{path}: not valid YAML: nested too deeply") from None


def load_yaml_mapping(path: str | Path, missing: type[RBMCapError] = ConfigError) -> dict:
    """Read a YAML file whose top level must be a mapping (:func:`read_yaml`; FormatError
    when it is not a mapping)."""
    data = read_yaml(path, missing)
    if not isinstance(data, dict):
        raise FormatError(
            f"{path}: expected a mapping of keys at the top level, got {type_name(data)}"
        )
    return data


def type_name(value: Any) -> str:
    """What a YAML value is, for messages: 'a list', 'a mapping', 'null', 'a string' …"""
    if value is None:
        return "null (nothing)"
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }
    return names.get(type(value), f"a {type(value).__name__}")


MAX_MAGNITUDE = 1e6
"""Largest magnitude :func:`finite_vector` accepts by default (metres, radians, shape
coefficients: far beyond any real value, far below where squares and norms overflow)."""


def finite_float(value: Any, bound: float = MAX_MAGNITUDE) -> float | None:
    """``value`` as a float if it is a real number (not a boolean) with ``|value| ≤ bound``
    (finite), else None; a huge integer is None, not an OverflowError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        x = float(value)
    except (OverflowError, ValueError):
        return None
    return x if math.isfinite(x) and abs(x) <= bound else None


def finite_vector(
    value: Any, size: int | None = None, bound: float = MAX_MAGNITUDE
) -> np.ndarray | None:
    """``value`` as a float64 array if it is a sequence (list, tuple, OmegaConf list) of
    ``size`` (any count when None) numbers accepted by :func:`finite_float`, else None."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return None
    if size is not None and len(value) != size:
        return None
    xs = [finite_float(v, bound) for v in value]
    if any(x is None for x in xs):
        return None
    return np.asarray(xs, dtype=np.float64).reshape(len(xs))


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages (a value may be huge)."""
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother = 3, limit, limit
    text = short.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


# ----------------------------------------------------------------------- structured configs
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
