"""The code base's structure: short functions, geometry that stays pure maths, posing without
training, one definition of each shared piece of geometry, configuration found inside the
installed package, and tests laid out like the package (the import graph as a whole: the
neighbouring ``test_imports.py``).

Every rule reads source with :mod:`ast` (not by importing it), so a violation names the file and
line it is on.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from helpers.shared import REPO

import rbmcap
from rbmcap.config.packaged import conf_dir

PACKAGE = Path(rbmcap.__file__).resolve().parent
TESTS = REPO / "tests"
TEST_FOLDERS_OF_THEIR_OWN = {
    "fuzz": "every reader's fuzz tests",
    "project": "the repository as a whole: layout, docs, install, notebooks, interruption",
    "helpers": "what several test modules share (no tests)",
}
"""Folders of ``tests/`` that mirror no ``rbmcap`` package, and what each holds."""
MAX_FUNCTION_LINES = 60
JUSTIFIED = "Long because"

GEOMETRY_MAY_IMPORT = ("rbmcap.geometry", "rbmcap.errors", "rbmcap.skeleton")
"""Geometry is pure maths: besides itself, only the exception family and the SMPL tree's
constants (both in the lowest layer of ``tests/project/test_imports.py``, which imports nothing
from rbmcap)."""


# ------------------------------------------------------------------------------------ reading
@cache
def _modules() -> dict[str, ast.Module]:
    """Every module of the package by its path relative to the package's parent."""
    root = PACKAGE.parent
    return {
        p.relative_to(root).as_posix(): ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def _in(folder: str) -> dict[str, ast.Module]:
    prefix = f"rbmcap/{folder}/" if folder else "rbmcap/"
    return {path: tree for path, tree in _modules().items() if path.startswith(prefix)}


def _module_name(path: str) -> str:
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: str, tree: ast.Module) -> list[tuple[int, str]]:
    """(line, absolute module name) of each import; ``from a import b`` gives ``a`` and
    ``a.b`` (``b`` may be a submodule), relative imports resolved against ``path``."""
    package = _module_name(path).split(".")
    if not path.endswith("__init__.py"):
        package = package[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def _under(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _functions(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _definitions(kind: type, name_test) -> list[str]:
    """``path:line name`` of every definition of ``kind`` whose name passes ``name_test``."""
    return [
        f"{path}:{node.lineno} {node.name}"
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, kind) and name_test(node.name)
    ]


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _calls(name_test) -> list[str]:
    return [
        f"{path}:{node.lineno} {_called_name(node)}"
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and name_test(_called_name(node))
    ]


# ------------------------------------------------------------------------------ short functions
def test_every_function_is_short_or_says_why_it_is_long():
    long = []
    for path, tree in _modules().items():
        for node in _functions(tree):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES and JUSTIFIED not in (ast.get_docstring(node) or ""):
                long.append(f"{path}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, (
        f"functions over {MAX_FUNCTION_LINES} lines (def to end) whose docstring does not say "
        f"'{JUSTIFIED} …': split them or give the reason:\n" + "\n".join(long)
    )


# -------------------------------------------------------------------------------- dependencies
POSING = ("model", "inference", "live", "evaluation", "baseline", "calibrate", "io")
"""The folders that pose frames with a model (or sit below them): none trains."""


def test_posing_a_frame_imports_neither_lightning_nor_training():
    """The model, checkpoints and everything that runs a trained model are built without
    Lightning or :mod:`rbmcap.training`, at module level or inside a function."""
    trees = {path: tree for folder in POSING for path, tree in _in(folder).items()}
    trees["rbmcap/checkpoint.py"] = _modules()["rbmcap/checkpoint.py"]
    found = [
        f"{path}:{line} imports {name}"
        for path, tree in trees.items()
        for line, name in _imports(path, tree)
        if _under(name, ("lightning", "pytorch_lightning", "rbmcap.training"))
    ]
    assert not found, "training imported where frames are posed:\n" + "\n".join(found)


def test_geometry_imports_nothing_else_from_rbmcap():
    foreign = [
        f"{path}:{line} imports {name}"
        for path, tree in _in("geometry").items()
        for line, name in _imports(path, tree)
        if _under(name, ("rbmcap",)) and not _under(name, GEOMETRY_MAY_IMPORT)
    ]
    assert not foreign, "rbmcap.geometry must stay pure maths:\n" + "\n".join(foreign)


# --------------------------------------------------------------------------- one definition each
def test_one_rotation_between():
    found = _definitions(ast.FunctionDef, lambda n: n == "rotation_between")
    assert len(found) == 1, found


def test_one_slerp():
    """Every slerp lives in one module, and only one of them does the arithmetic: the others
    convert and call it."""
    defs = [
        (path, node)
        for path, tree in _modules().items()
        for node in _functions(tree)
        if "slerp" in node.name
    ]
    assert {path for path, _ in defs} == {"rbmcap/geometry/rotations.py"}, [
        f"{path}:{node.lineno} {node.name}" for path, node in defs
    ]
    own = [
        node.name
        for _, node in defs
        if not any(isinstance(c, ast.Call) and "slerp" in _called_name(c) for c in ast.walk(node))
    ]
    assert len(own) == 1, f"slerp implemented more than once: {own}"


def test_one_kabsch():
    """The rigid fit is roma's, called in one place; no SVD anywhere writes another."""
    assert len(_calls(lambda n: n == "rigid_points_registration")) == 1, _calls(
        lambda n: n == "rigid_points_registration"
    )
    assert not _calls(lambda n: n == "svd"), _calls(lambda n: n == "svd")


def test_one_kinematic_prior():
    found = _definitions(ast.ClassDef, lambda n: n == "KinematicPrior")
    assert len(found) == 1, found


def test_one_torso_chain():
    found = [
        f"{path}:{node.lineno}"
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id == "TORSO_CHAIN"
    ]
    assert len(found) == 1, found


def test_one_geodesic_angle():
    """The angle between rotations is :func:`rbmcap.geometry.rotmat_geodesic_angle`, under that
    name only: no second definition, no wrapper, no import under another name."""
    found = _definitions(ast.FunctionDef, lambda n: "geodesic" in n and not n.endswith("_loss"))
    assert [f.split(":")[0] + " " + f.split()[-1] for f in found] == [
        "rbmcap/geometry/rotations.py rotmat_geodesic_angle"
    ], found
    others = _definitions(ast.FunctionDef, lambda n: n in ("rotation_angle", "geodesic_angle"))
    assert not others, others


def test_geometry_is_imported_under_its_own_names():
    renamed = [
        f"{path}:{node.lineno} {alias.name} as {alias.asname}"
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and _under(node.module or "", ("rbmcap.geometry",))
        for alias in node.names
        if alias.asname not in (None, alias.name)
    ]
    assert not renamed, "one name per function:\n" + "\n".join(renamed)


def _only_reexports(tree: ast.Module) -> bool:
    """True when a module's body is nothing but imports, ``__all__`` and names bound to names."""
    body = [n for n in tree.body if not _is_docstring(n)]
    return bool(body) and all(
        isinstance(n, (ast.Import, ast.ImportFrom))
        or (isinstance(n, ast.Assign) and (isinstance(n.value, ast.Name) or _binds(n, "__all__")))
        for n in body
    )


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _binds(node: ast.Assign, name: str) -> bool:
    return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)


def test_no_module_only_re_exports():
    """Besides package ``__init__`` files, every module defines something: callers import a name
    from the module that defines it."""
    aliases = [
        path
        for path, tree in _modules().items()
        if not path.endswith("__init__.py") and _only_reexports(tree)
    ]
    assert not aliases, "modules that only re-export other modules' names:\n" + "\n".join(aliases)


def _quotes_an_exception(node: ast.FunctionDef) -> bool:
    """Takes an exception and returns text, or reads a message's first line and falls back on the
    exception's class name."""
    typed = (
        any(
            isinstance(a.annotation, ast.Name) and a.annotation.id in ("BaseException", "Exception")
            for a in node.args.args
        )
        and isinstance(node.returns, ast.Name)
        and node.returns.id == "str"
    )
    attrs = {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    return typed or {"splitlines", "__name__"} <= attrs


def test_one_first_line_of_an_exception():
    found = [
        f"{path} {node.name}"
        for path, tree in _modules().items()
        for node in _functions(tree)
        if _quotes_an_exception(node)
    ]
    assert found == ["rbmcap/errors.py first_line"], found


def test_one_gru_stack():
    """``BiGRU`` and ``CausalGRU`` share one constructor: ``nn.GRU`` is built in one place."""
    found = _calls(lambda n: n == "GRU")
    assert len(found) == 1, found


def test_global_to_local_rotations_are_computed_in_geometry():
    """Parent indices (``max(p, 0) for p in parents``, the root its own parent) are built only by
    :mod:`rbmcap.geometry.kinematics`; everyone else calls its ``global_to_local``."""
    found = [
        f"{path}:{node.lineno}"
        for path, tree in _modules().items()
        if path != "rbmcap/geometry/kinematics.py"
        for node in ast.walk(tree)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp))
        and isinstance(node.elt, ast.Call)
        and _called_name(node.elt) == "max"
        and any(isinstance(a, ast.Constant) and a.value == 0 for a in node.elt.args)
    ]
    assert not found, found
    assert len(_definitions(ast.FunctionDef, lambda n: n == "global_to_local")) == 1


# ----------------------------------------------------------------------- packaged configuration
def test_the_packaged_configuration_is_inside_the_installed_package():
    conf = conf_dir().resolve()
    assert conf.is_relative_to(PACKAGE), f"{conf} lies outside the package {PACKAGE}"
    assert sorted((conf / "markers").glob("*.yaml")), f"{conf}/markers holds no marker sets"


def test_no_module_walks_up_from_its_file_to_find_files():
    """Files are found through ``importlib.resources`` (``rbmcap.config.packaged``), never by
    ``Path(__file__).parents[k] / "conf"``, which breaks in a wheel."""
    found = []
    for path, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "__file__":
                found.append(f"{path}:{node.lineno} uses __file__")
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "parents"
                and any(isinstance(n, ast.Call) for n in ast.walk(node.value.value))
            ):
                found.append(f"{path}:{node.lineno} indexes a path's parents[]")
            elif (
                isinstance(node, ast.Constant)
                and node.value == "conf"
                and path != "rbmcap/config/packaged.py"
            ):
                found.append(f"{path}:{node.lineno} names the 'conf' folder itself")
    assert not found, "use rbmcap.config.packaged to find packaged files:\n" + "\n".join(found)


# ---------------------------------------------------------------------------------- the tests
def _test_sources() -> dict[str, ast.Module]:
    """Every Python file under ``tests/`` by its path relative to ``tests/``."""
    return {
        p.relative_to(TESTS).as_posix(): ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        for p in sorted(TESTS.rglob("*.py"))
    }


def _is_test_module(name: str) -> bool:
    return any(part.startswith("test_") or part == "conftest" for part in name.split("."))


def test_no_test_module_imports_another():
    """Tests share code through ``tests/helpers/`` (or fixtures in ``conftest.py``), never by
    importing a test module: each module can then move, or run alone, without breaking another."""
    found = [
        f"tests/{path}:{line} imports {name}"
        for path, tree in _test_sources().items()
        for line, name in _imports(path, tree)
        if _is_test_module(name)
    ]
    assert not found, "import it from tests/helpers/ instead:\n" + "\n".join(found)


def test_the_tests_are_laid_out_like_the_package():
    """A test module lives in the folder of the ``rbmcap`` package it tests (``tests/motion/`` for
    ``rbmcap/motion/``), at the top of ``tests/`` when it tests a top-level module
    (``tests/test_checkpoint.py`` for ``rbmcap/checkpoint.py``), or in one of
    :data:`TEST_FOLDERS_OF_THEIR_OWN`."""
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    misplaced = []
    for path in _test_sources():
        folder, _, name = path.rpartition("/")
        if not name.startswith("test_"):
            continue
        if folder and folder.split("/")[0] not in packages | set(TEST_FOLDERS_OF_THEIR_OWN):
            misplaced.append(f"tests/{path}: no rbmcap/{folder.split('/')[0]}/")
        elif not folder and name.removeprefix("test_").removesuffix(".py") not in modules:
            misplaced.append(f"tests/{path}: no rbmcap/{name.removeprefix('test_')}")
    assert not misplaced, "test modules outside the package's layout:\n" + "\n".join(misplaced)
