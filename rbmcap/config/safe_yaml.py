"""Safe YAML reading: every YAML reader of rbmcap goes through :func:`read_yaml` (or
:func:`load_yaml_mapping`).

The loader bounds nesting and alias expansion, so that no file makes a reader recurse, hang or
fill the memory. A file that is not UTF-8, not YAML or (for a mapping) not a mapping is a
FormatError naming ``file:line:column``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rbmcap.errors import ConfigError, FormatError, RBMCapError, location

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
