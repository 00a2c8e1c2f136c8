"""The import graph of ``rbmcap``: imports flow one way, down the data flow, with no cycle between
files, and an import written inside a function says why it is there.

The graph is read from the source with :mod:`ast`, not by importing it, and counts every import:
at module level, inside functions and under ``if TYPE_CHECKING:``. A type-only import runs at no
time but is still a dependency of the code's meaning: a lower layer that names a higher layer's
type, or two modules that name each other's, are the same knot whether or not the interpreter
sees it, so such imports are edges like any other (they are not counted as function-level
imports, since they cost nothing at start-up).

An import names the module that defines what it imports: ``from rbmcap.a import b`` is an edge to
``rbmcap.a.b`` when ``b`` is a submodule, to the module a package's ``__init__`` re-exports ``b``
from when it is a re-export, and to ``rbmcap.a`` otherwise. The packages above the imported module
run too but are not edges, or every ``__init__`` that gathers its submodules would close a loop
with each of them.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from dataclasses import dataclass
from functools import cache
from itertools import pairwise
from pathlib import Path

import rbmcap

PACKAGE = Path(rbmcap.__file__).resolve().parent
ROOT = "rbmcap"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "skeleton", "atomic", "conf", "pretrained"),
    ("rbmcap", "paths", "config", "geometry"),
    ("body",),
    ("motion",),
    ("markers",),
    ("dataset", "metrics", "biomech"),
    ("model",),
    ("checkpoint", "baseline", "io"),
    ("calibrate",),
    ("inference",),
    ("evaluation",),
    ("render", "view"),
    ("live", "training", "session"),
    ("bench",),
    ("cli",),
    ("__main__",),
)
"""The top-level modules and packages of ``rbmcap`` (``"rbmcap"`` is the package's own
``__init__``), lowest first, in the order the data flows: the first layer imports nothing from
``rbmcap``; the body model comes before motion (retargeting and clip libraries pose motions on a
body); checkpoints build a model without training, so training sits beside the live pipeline
(which draws in the viewer) above everything that poses frames. A module may import from its own
package and from any lower layer, never from its own layer's other members nor from above."""

MAX_FUNCTION_LEVEL_IMPORTS = 60
"""Imports of the package's own modules or of third-party packages written inside a function."""


@dataclass(frozen=True)
class Import:
    """One imported name (or module) as the graph sees it."""

    path: str
    """The importing file, relative to the package's parent."""
    line: int
    target: str
    """Absolute name of the imported module; for ``from a import b``, ``a.b`` or ``a``."""
    where: str
    """``"module"``, ``"function"``, ``"typing"`` (under ``if TYPE_CHECKING:``) or ``"dynamic"``
    (``importlib.import_module`` or ``__import__`` of a name written in the call)."""
    statement: ast.stmt


# ------------------------------------------------------------------------------------ reading
@cache
def _sources() -> dict[str, str]:
    """The text of every module of the package by its dotted name."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path.read_text(encoding="utf-8")
    return found


@cache
def _trees() -> dict[str, ast.Module]:
    return {name: ast.parse(text) for name, text in _sources().items()}


def _path(module: str) -> str:
    """The file of ``module``, relative to the package's parent."""
    base = module.replace(".", "/")
    return (
        f"{base}/__init__.py" if (PACKAGE.parent / base / "__init__.py").is_file() else f"{base}.py"
    )


def _is_package(module: str) -> bool:
    return _path(module).endswith("__init__.py")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.Module):
    """(import statement, where) of every import in ``tree``."""

    def visit(node: ast.AST, where: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, where
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                yield from visit(child, "function")
            elif isinstance(child, ast.If) and _is_type_checking(child) and where == "module":
                for statement in child.body:
                    yield from visit(ast.Module(body=[statement], type_ignores=[]), "typing")
                for statement in child.orelse:
                    yield from visit(ast.Module(body=[statement], type_ignores=[]), "module")
            else:
                yield from visit(child, where)

    yield from visit(tree, "module")


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module a ``from … import`` reads from, inside ``module``."""
    if not node.level:
        return node.module or ""
    anchor = module.split(".") if _is_package(module) else module.split(".")[:-1]
    anchor = anchor[: len(anchor) - node.level + 1]
    return ".".join([*anchor, *([node.module] if node.module else [])])


@cache
def _reexports(package: str) -> dict[str, str]:
    """Name -> module a package's ``__init__`` imports it from (at module level)."""
    found = {}
    for node, where in _statements(_trees()[package]):
        if where == "module" and isinstance(node, ast.ImportFrom):
            base = _absolute(package, node)
            for alias in node.names:
                found[alias.asname or alias.name] = _resolve(base, alias.name)
    return found


def _resolve(base: str, name: str) -> str:
    """The module that defines ``name`` as ``from base import name`` reads it."""
    if f"{base}.{name}" in _sources():
        return f"{base}.{name}"
    if base in _sources() and _is_package(base) and name in _reexports(base):
        return _reexports(base)[name]
    return base


def _deepest_module(name: str) -> str:
    """``name`` itself or its longest prefix that is a module of the package."""
    parts = name.split(".")
    while len(parts) > 1 and ".".join(parts) not in _sources():
        parts.pop()
    return ".".join(parts)


def _dynamic_imports(tree: ast.Module):
    """(call, module name) of every ``importlib.import_module(...)``, ``import_module(...)`` or
    ``__import__(...)`` in ``tree`` whose name is written in the call: a string, or an f-string's
    leading text (``f"rbmcap.cli.{name}"`` imports a module of ``rbmcap.cli``)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called not in ("import_module", "__import__"):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            yield node, arg.value
        elif isinstance(arg, ast.JoinedStr) and arg.values:
            head = arg.values[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                name = head.value.rstrip(".")
                if name:
                    yield node, name


@cache
def _imports() -> tuple[Import, ...]:
    found = []
    for module, tree in _trees().items():
        for call, name in _dynamic_imports(tree):
            target = _deepest_module(name) if name.split(".")[0] == ROOT else name
            found.append(Import(_path(module), call.lineno, target, "dynamic", call))
        for node, where in _statements(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _absolute(module, node)
                targets = [_resolve(base, alias.name) for alias in node.names]
            for target in dict.fromkeys(targets):
                if target.split(".")[0] == ROOT:
                    target = _deepest_module(target)
                found.append(Import(_path(module), node.lineno, target, where, node))
    return tuple(found)


def _own(name: str) -> bool:
    return name.split(".")[0] == ROOT


def _module_of(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _graph() -> dict[str, dict[str, Import]]:
    """Importing module -> imported module -> the first import that makes the edge."""
    edges: dict[str, dict[str, Import]] = {module: {} for module in _sources()}
    for imp in _imports():
        source = _module_of(imp.path)
        if _own(imp.target) and imp.target != source:
            edges[source].setdefault(imp.target, imp)
    return edges


# ------------------------------------------------------------------------------------ cycles
def _strongly_connected(edges: dict[str, dict[str, Import]]) -> list[list[str]]:
    """Tarjan's strongly connected components of the graph, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _cycle_through(component: list[str], edges: dict[str, dict[str, Import]]) -> list[str]:
    """The shortest cycle from the component's first module back to itself."""
    start = component[0]
    members = set(component)
    previous = {start: ""}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in edges[node]:
                if child == start:
                    path = [node]
                    while previous[path[-1]]:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child in members and child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return component


def _describe_cycle(cycle: list[str], edges: dict[str, dict[str, Import]]) -> str:
    steps = [
        f"  {edges[a][b].path}:{edges[a][b].line} ({edges[a][b].where}) -> {b}"
        for a, b in pairwise(cycle)
    ]
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


def test_no_cycle_between_files():
    edges = _graph()
    cycles = [
        _describe_cycle(_cycle_through(component, edges), edges)
        for component in _strongly_connected(edges)
        if len(component) > 1
    ]
    assert not cycles, "modules that import each other, directly or round a loop:\n" + "\n".join(
        cycles
    )


# ------------------------------------------------------------------------------------ layers
def _unit(module: str) -> str:
    """The top-level module or package of ``rbmcap`` that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def test_every_top_level_module_and_package_has_a_layer():
    declared = [unit for layer in LAYERS for unit in layer]
    present = {_unit(module) for module in _sources()}
    assert len(declared) == len(set(declared)), "a unit is in two layers"
    assert set(declared) == present, (
        f"undeclared: {sorted(present - set(declared))}; gone: {sorted(set(declared) - present)}"
    )


def test_imports_made_through_importlib_are_in_the_graph():
    """``importlib.import_module`` and ``__import__`` of a name written in the call are edges of
    the graph like import statements: an upward import written that way is caught."""
    tree = ast.parse(
        "import importlib\n"
        "def f(name):\n"
        "    importlib.import_module('rbmcap.cli.main')\n"
        "    importlib.import_module(f'rbmcap.bench.{name}')\n"
        "    __import__('rbmcap.live')\n"
        "    importlib.import_module(name)\n"
    )
    assert [n for _, n in _dynamic_imports(tree)] == [
        "rbmcap.cli.main",
        "rbmcap.bench",
        "rbmcap.live",
    ]
    dynamic = [imp for imp in _imports() if imp.where == "dynamic"]
    assert any(imp.target == "rbmcap.cli" and imp.path == "rbmcap/cli/main.py" for imp in dynamic)


def test_no_import_runs_upward():
    rank = {unit: level for level, layer in enumerate(LAYERS) for unit in layer}
    upward = [
        f"{imp.path}:{imp.line} ({imp.where}) {_unit(source)} -> {_unit(target)}: imports {target}"
        for source, targets in _graph().items()
        for target, imp in targets.items()
        if _unit(source) != _unit(target) and rank[_unit(target)] >= rank[_unit(source)]
    ]
    assert not upward, (
        "imports that run upward or sideways against the layers (lowest first: "
        + " < ".join("/".join(layer) for layer in LAYERS)
        + "):\n"
        + "\n".join(upward)
    )


# ----------------------------------------------------------------------- function-level imports
def _comment_lines(text: str) -> set[int]:
    """The lines of ``text`` that hold a comment."""
    return {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    }


def _function_level() -> list[Import]:
    """One entry per import statement written inside a function, of the package's own modules or
    of third-party packages (the standard library is left out)."""
    seen = set()
    found = []
    for imp in _imports():
        if imp.where != "function" or id(imp.statement) in seen:
            continue
        top = imp.target.split(".")[0]
        if top in sys.stdlib_module_names or top == "__future__":
            continue
        seen.add(id(imp.statement))
        found.append(imp)
    return found


def _has_reason(imp: Import, comments: set[int], text: str) -> bool:
    """A comment at the end of one of the import's lines, or on the line above it or above the
    run of import lines it belongs to (one comment for a group of imports)."""
    lines = text.splitlines()
    above = imp.line - 1
    while above in _import_lines(imp.path):
        above -= 1
    return (above in comments and lines[above - 1].lstrip().startswith("#")) or any(
        line in comments for line in range(imp.line, imp.statement.end_lineno + 1)
    )


@cache
def _import_lines(path: str) -> frozenset[int]:
    """The lines of ``path`` that import statements occupy."""
    return frozenset(
        line
        for imp in _imports()
        if imp.path == path
        for line in range(imp.line, imp.statement.end_lineno + 1)
    )


def test_function_level_imports_are_few_and_say_why():
    found = _function_level()
    comments = {name: _comment_lines(text) for name, text in _sources().items()}
    silent = [
        f"{imp.path}:{imp.line} imports {imp.target}"
        for imp in found
        if not _has_reason(imp, comments[_module_of(imp.path)], _sources()[_module_of(imp.path)])
    ]
    assert not silent, (
        "imports inside functions without a reason (a comment at the end of the line, or above "
        "it or its group of imports, e.g. '# optional extra: viser'); move them to the top of "
        "the module or say why:\n" + "\n".join(silent)
    )
    assert len(found) <= MAX_FUNCTION_LEVEL_IMPORTS, (
        f"{len(found)} imports inside functions, more than {MAX_FUNCTION_LEVEL_IMPORTS}:\n"
        + "\n".join(f"{imp.path}:{imp.line} imports {imp.target}" for imp in found)
    )
