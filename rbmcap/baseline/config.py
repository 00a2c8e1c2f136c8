"""Solver configuration: the dataclasses say what each key means; YAML says what it is.

One source of truth: ``rbmcap/conf/baseline/default.yaml`` holds every default, each number with
the measurement that chose it; the dataclasses below have no defaults. Every other configuration
(``hybrid``, ``points``, or a user's own YAML path) and every ``overrides`` mapping is a layer on
top of ``default.yaml`` that sets only what it changes:

    default.yaml  →  the named file or path  →  overrides (nested or dotted keys)

Validation happens in one place (:func:`_check_layer` for keys and types as each layer is read,
:func:`_check_values` for ranges and choices of the merged result, which
:class:`SolverConfig` also runs when built directly): an unknown key, a wrong type or an
out-of-range value raises :class:`rbmcap.errors.ConfigError` naming the file (or ``overrides``)
and the dotted key.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rbmcap.baseline.optimisers import STEPPERS
from rbmcap.configfiles import conf_file, conf_names, load_yaml_mapping, named_yaml
from rbmcap.errors import ConfigError

OPTIMISERS = tuple(STEPPERS)
INITS = ("kinematic", "rest")
DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class OptimiserConfig:
    """How to minimise.

    Attributes:
        name: 'lbfgs' (torch's L-BFGS with strong-Wolfe line search) or 'adam'.
        iterations: optimiser iterations per window (an L-BFGS iteration is one direction and
            its line search, usually 1–2 objective evaluations; an Adam iteration is one).
        lr: step size (L-BFGS: initial step of each line search, 1 is natural; Adam: radians
            and metres per step).
        history: L-BFGS memory (pairs of vectors).
        tolerance: stop a window early when an iteration lowers the objective by less than this
            fraction of its value (0: always run all iterations, for predictable timing).
        precondition: optimise every unknown divided by its scale 1/√curvature
            (:mod:`rbmcap.baseline.scaling`), so L-BFGS's scaled-identity Hessian guess fits
            all of them; off, the stiff translation and the soft toes and fingers slow it down.
            L-BFGS only: Adam already scales each unknown by its own gradient history.
    """

    name: str
    iterations: int
    lr: float
    history: int
    tolerance: float
    precondition: bool


@dataclass(frozen=True)
class WeightsConfig:
    """The objective (per frame, summed over frames; see :mod:`rbmcap.baseline.objective`).

    Attributes:
        position_sigma_mm: marker position residuals are divided by this (mm).
        rotation_sigma_deg: plate orientation (geodesic) residuals are divided by this (deg).
        prior: weight of the pose prior's negative log-likelihood (nats) per frame.
        pose_l2: weight of ‖θ_body‖² (rad²) per frame, a fallback when there is no prior.
        accel_sigma: predicted marker accelerations are divided by this (m/s²); 0 disables the
            temporal smoothness term.
        betas: weight of ‖β‖² (the shape prior), once per sequence.
    """

    position_sigma_mm: float
    rotation_sigma_deg: float
    prior: float
    pose_l2: float
    accel_sigma: float
    betas: float


@dataclass(frozen=True)
class ScheduleConfig:
    """Which frames are solved together and where they start.

    Attributes:
        window: frames per batched solve; 0 solves the whole sequence at once (betas then are
            free in the same solve). With windows, betas are first fitted on ``shape_frames``
            evenly spread frames (``shape_iterations``) and then held.
        warm_start: start each window (after the first) from the previous window's last solved
            frame (frame-to-frame tracking when ``window`` is 1) instead of from ``init``.
        init: where to start without a given initialisation: 'kinematic' (each segment's
            rotation read off its markers) or 'rest' (rest pose, rigidly aligned).
        shape_frames, shape_iterations: the shape stage (windows only).
    """

    window: int
    warm_start: bool
    init: str
    shape_frames: int
    shape_iterations: int


@dataclass(frozen=True)
class SolverConfig:
    """Everything the solver needs besides the body, the markers and the prior. Build it with
    :func:`load_solver_config` (the defaults live in ``default.yaml``), or derive one with
    :meth:`merged` or :func:`dataclasses.replace`.

    Attributes:
        optimiser, weights, schedule: see the classes.
        record: iteration counts at which the convergence record samples the objective (and
            MPJPE when the truth is given); the final iteration is always recorded.
        dtype: 'float32' or 'float64'.
    """

    optimiser: OptimiserConfig
    weights: WeightsConfig
    schedule: ScheduleConfig
    record: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        _check_values(_flatten(self.to_dict()), {})

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for reports and JSON)."""
        d = dataclasses.asdict(self)
        d["record"] = list(self.record)
        return d

    def merged(self, overrides: dict[str, Any]) -> SolverConfig:
        """A copy with ``overrides`` (nested dict, or dotted keys like 'optimiser.iterations')."""
        return _build([(self.to_dict(), "config"), (overrides, "overrides")])


def available_configs() -> list[str]:
    """Names of the configurations shipped under ``rbmcap/conf/baseline/``."""
    return conf_names("baseline")


def load_solver_config(
    name_or_path: str | Path = "default", overrides: dict[str, Any] | None = None
) -> SolverConfig:
    """Load a solver configuration by name (``default``, ``hybrid``, ``points``) or YAML path.

    The file is a layer over ``default.yaml``: keys it does not set keep the defaults there.
    ``overrides`` (nested or dotted keys) are applied last.

    Raises:
        ConfigError: unknown name or missing file; an unknown key, a wrong type or an
            out-of-range value (the message names the file or 'overrides' and the key).
    """
    default = conf_file("baseline", "default.yaml")
    layers = [(load_yaml_mapping(default), str(default))]
    path = named_yaml(name_or_path, "baseline", "baseline config")
    if path.resolve() != default.resolve():
        layers.append((load_yaml_mapping(path), str(path)))
    if overrides:
        layers.append((overrides, "overrides"))
    return _build(layers)


# ----------------------------------------------------------------------------- validation
_SECTIONS: dict[str, type] = {
    "optimiser": OptimiserConfig,
    "weights": WeightsConfig,
    "schedule": ScheduleConfig,
}


def _types() -> dict[str, Any]:
    """Dotted key → its annotated type, for every key of a complete configuration."""
    out = {}
    for section, cls in _SECTIONS.items():
        for key, hint in typing.get_type_hints(cls).items():
            out[f"{section}.{key}"] = hint
    hints = typing.get_type_hints(SolverConfig)
    out.update({k: hints[k] for k in ("record", "dtype")})
    return out


def _positive(v) -> bool:
    return v > 0


def _non_negative(v) -> bool:
    return v >= 0


_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "optimiser.name": (lambda v: v in OPTIMISERS, f"expected one of {OPTIMISERS}"),
    "optimiser.iterations": (_non_negative, "must be ≥ 0"),
    "optimiser.lr": (_positive, "must be > 0"),
    "optimiser.history": (lambda v: v >= 1, "must be ≥ 1"),
    "optimiser.tolerance": (_non_negative, "must be ≥ 0"),
    "weights.position_sigma_mm": (_positive, "must be > 0"),
    "weights.rotation_sigma_deg": (_positive, "must be > 0"),
    "weights.prior": (_non_negative, "must be ≥ 0"),
    "weights.pose_l2": (_non_negative, "must be ≥ 0"),
    "weights.accel_sigma": (_non_negative, "must be ≥ 0 (0: no smoothness term)"),
    "weights.betas": (_non_negative, "must be ≥ 0"),
    "schedule.window": (_non_negative, "must be ≥ 0 (0: the whole sequence)"),
    "schedule.init": (lambda v: v in INITS, f"expected one of {INITS}"),
    "schedule.shape_frames": (lambda v: v >= 1, "must be ≥ 1"),
    "schedule.shape_iterations": (_non_negative, "must be ≥ 0"),
    "record": (lambda v: all(r >= 0 for r in v), "iteration counts must be ≥ 0"),
    "dtype": (lambda v: v in DTYPES, f"expected one of {DTYPES}"),
}
"""Range and choice of every key (the one place they are stated)."""


def _build(layers: list[tuple[dict[str, Any], str]]) -> SolverConfig:
    """Merge ``(mapping, where)`` layers in order, check them, and build the dataclasses."""
    types = _types()
    flat: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for data, where in layers:
        for key, value in _check_layer(data, where, types).items():
            flat[key], sources[key] = value, where
    missing = sorted(set(types) - set(flat))
    if missing:
        raise ConfigError(f"{layers[0][1]}: baseline config misses keys {missing}")
    _check_values(flat, sources)
    sections = {
        name: cls(**{k.split(".", 1)[1]: v for k, v in flat.items() if k.startswith(name + ".")})
        for name, cls in _SECTIONS.items()
    }
    return SolverConfig(**sections, record=flat["record"], dtype=flat["dtype"])


def _check_layer(data: dict[str, Any], where: str, types: dict[str, Any]) -> dict[str, Any]:
    """One layer as {dotted key: value of the right type}; unknown keys and wrong types raise."""
    data = dict(data)
    data.pop("name", None)  # a file's own label
    flat = _flatten(data, where)
    unknown = sorted(set(flat) - set(types))
    if unknown:
        section = unknown[0].split(".")[0]
        if section in _SECTIONS:
            known = sorted(k for k in types if k.startswith(section + "."))
        else:
            known = sorted({k.split(".")[0] for k in types})
        raise ConfigError(f"{where}: unknown baseline config keys {unknown}; known: {known}")
    return {key: _coerce(value, types[key], key, where) for key, value in flat.items()}


def _check_values(flat: dict[str, Any], sources: dict[str, str]) -> None:
    """Ranges and choices (:data:`_CHECKS`); the error names the layer that set the key."""
    for key, (ok, message) in _CHECKS.items():
        if key not in flat:
            continue
        where = sources.get(key, "baseline config")
        try:
            good = ok(flat[key])
        except TypeError:  # only a dataclass built in code can hold a wrong type here
            raise ConfigError(f"{where}: {key} = {flat[key]!r} has the wrong type") from None
        if not good:
            raise ConfigError(f"{where}: {key} = {flat[key]!r}: {message}")


def _flatten(data: dict[str, Any], where: str = "baseline config") -> dict[str, Any]:
    """Nested and dotted keys alike as dotted keys: {'a': {'b': 1}, 'c.d': 2} → a.b, c.d."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        key = str(key)
        if key in _SECTIONS and not isinstance(value, dict):
            raise ConfigError(f"{where}: {key} must be a mapping, got {value!r}")
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in _flatten(value, where).items()})
        else:
            out[key] = value
    return out


def _coerce(value: Any, hint: Any, key: str, where: str) -> Any:
    """``value`` as type ``hint`` (bool, int, float, str or tuple[int, ...]), strictly."""
    try:
        if hint is bool:
            if not isinstance(value, bool):
                raise TypeError
            return value
        if hint is int:
            if isinstance(value, bool) or int(value) != value:
                raise TypeError
            return int(value)
        if hint is float:
            if isinstance(value, bool):
                raise TypeError
            return float(value)  # YAML reads 1e-2 (no dot) as text
        if hint is str:
            if not isinstance(value, str):
                raise TypeError
            return value
        if not isinstance(value, list | tuple) or not all(
            isinstance(r, int) and not isinstance(r, bool) for r in value
        ):
            raise TypeError
        return tuple(sorted(set(value)))
    except (TypeError, ValueError):
        expected = hint.__name__ if hint in (bool, int, float, str) else "a list of integers"
        raise ConfigError(
            f"{where}: {key} = {value!r} has the wrong type (expected {expected})"
        ) from None
