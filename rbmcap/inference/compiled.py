"""A stream's frame step compiled ahead of time into native code, cached on disk.

On one CPU thread a traced frame step pays the TorchScript interpreter for each of its many
small operations (features, the GRU step, decoding, the plate fit): most of a frame's time,
however small the network. ``torch.export`` captures the same step
(:class:`~rbmcap.inference.stream.FrameStep`, the same operations on the same values) and
AOTInductor compiles it into one shared library whose generated C++ fuses the elementwise work
and calls the matrix products directly, with no interpreter and no Python between operations.
Figures: docs/benchmarks.md#rbmcap-bench-infer.

Compiling is slow and needs a C++ compiler (what ``torch.compile`` uses on the
CPU), so the package is cached under :func:`rbmcap.paths.cache_dir` (``stream/KEY.pt2``), keyed
by the exported program (its graph, weights and constants), the torch version and the machine:
the same model streams again at once, and a change to the model or to rbmcap's code that
changes the step compiles anew.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import platform
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from rbmcap.atomic import atomic_path
from rbmcap.errors import ModelError, first_line
from rbmcap.paths import cache_dir

log = logging.getLogger("rbmcap.stream")


@contextlib.contextmanager
def frozen(model) -> Iterator[None]:
    """Parameters not requiring grad inside the block (a trace or an export then records them as
    constants), restored after."""
    grads = [p.requires_grad for p in model.parameters()]
    try:
        model.requires_grad_(False)
        yield
    finally:
        for p, g in zip(model.parameters(), grads):
            p.requires_grad_(g)


def compiled_step(
    step: torch.nn.Module, model, example: tuple, what: str = "the stream step"
) -> Callable:
    """``step`` (a :class:`~rbmcap.inference.stream.FrameStep` of ``model``, or another module
    of tensors in and out) compiled for inputs shaped as ``example`` (its call's tensors),
    loaded from the cache or compiled into it; ``what`` names it in messages.

    Returns a callable taking the same tensors and returning the step's outputs (a list).
    Raises :class:`ModelError` when the step cannot be exported or compiled (no C++ compiler).
    """
    example = tuple(t.contiguous() for t in example)
    try:
        with torch.inference_mode(False), torch.no_grad(), frozen(model):
            program = torch.export.export(step, example, strict=False)
    except Exception as exc:  # export's failures have no common base class
        message = f"{what} cannot be exported for compiling: {first_line(exc)}"
        raise ModelError(message) from exc
    path = package_path(program)
    if not path.exists():
        _compile(program, path, what)
    try:
        package = torch._inductor.aoti_load_package(str(path))
    except Exception as exc:
        message = f"{path}: the compiled {what.removeprefix('the ')} cannot be loaded: "
        message += first_line(exc)
        raise ModelError(message) from exc
    loader = getattr(package, "loader", None)
    if loader is None:
        return package
    # The step's inputs and outputs are flat tensors, so the package's own call (which flattens
    # and rebuilds them as trees on every call) is skipped for its loader's. The loader reads
    # each input's memory as laid out contiguously: a transposed view (QTM's column-major
    # rotations) would be read as its transpose.
    return lambda *tensors: loader.run([t.contiguous() for t in tensors])


def package_path(program) -> Path:
    """Where the compiled package of an exported ``program`` is cached."""
    digest = hashlib.sha256()
    for text in (torch.__version__, platform.machine(), str(program.graph_module.code)):
        digest.update(text.encode())
    tensors = {**program.state_dict, **program.constants}
    for name in sorted(tensors):
        value = tensors[name]
        digest.update(name.encode())
        if isinstance(value, torch.Tensor):
            digest.update(str((value.dtype, tuple(value.shape))).encode())
            value = value.detach().contiguous().cpu()
            if value.dtype == torch.bfloat16:  # numpy has no bfloat16: hash its bits
                value = value.view(torch.int16)
            digest.update(value.numpy().tobytes())
    return cache_dir() / "stream" / f"{digest.hexdigest()[:32]}.pt2"


def _compile(program, path: Path, what: str) -> None:
    """Compile ``program`` (``what``, for messages) into ``path`` (atomically: a killed compile
    leaves no package)."""
    log.warning("compiling %s ahead of time (about a minute, once per model)", what)
    try:
        with atomic_path(path) as tmp, _quiet("torch._inductor"):
            torch._inductor.aoti_compile_and_package(program, package_path=str(tmp))
    except Exception as exc:  # the compiler's failures (none installed, …) have no common base
        raise ModelError(
            f"compiling {what} into {path} failed (it needs a C++ compiler and a "
            f"writable cache, see RBMCAP_CACHE): {first_line(exc)}"
        ) from exc


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Logger ``name`` (and its children) silent below errors, and torch's deprecation warnings
    off, inside the block: the compiler warns about library calls it leaves to the runtime and
    about its own internals, which says nothing to the user."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        logger.setLevel(level)
