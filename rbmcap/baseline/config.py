"""Solver configuration: YAML under ``conf/baseline/`` (``default``, ``hybrid``, ``points``, or a
path).

A file sets any subset of the keys of ``conf/baseline/default.yaml``; the rest keep their
defaults. Unknown keys and out-of-range values raise :class:`rbmcap.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rbmcap.configfiles import conf_names, load_yaml_mapping, named_yaml
from rbmcap.errors import ConfigError

OPTIMISERS = ("lbfgs", "adam")
INITS = ("kinematic", "rest")


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

    name: str = "lbfgs"
    iterations: int = 1000
    lr: float = 1.0
    history: int = 50
    tolerance: float = 0.0
    precondition: bool = True


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

    position_sigma_mm: float = 40.0
    rotation_sigma_deg: float = 20.0
    prior: float = 0.1
    pose_l2: float = 0.0
    accel_sigma: float = 300.0
    betas: float = 1.0


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

    window: int = 0
    warm_start: bool = True
    init: str = "kinematic"
    shape_frames: int = 32
    shape_iterations: int = 100


@dataclass(frozen=True)
class SolverConfig:
    """Everything the solver needs besides the body, the markers and the prior.

    Attributes:
        optimiser, weights, schedule: see the classes.
        record: iteration counts at which the convergence record samples the objective (and
            MPJPE when the truth is given); the final iteration is always recorded.
        dtype: 'float32' or 'float64'.
    """

    optimiser: OptimiserConfig = field(default_factory=OptimiserConfig)
    weights: WeightsConfig = field(default_factory=WeightsConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    record: tuple[int, ...] = (0, 1, 2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000)
    dtype: str = "float32"

    def __post_init__(self) -> None:
        o, w, s = self.optimiser, self.weights, self.schedule
        checks = [
            (o.name in OPTIMISERS, f"optimiser.name {o.name!r}: expected one of {OPTIMISERS}"),
            (o.iterations >= 0, "optimiser.iterations must be ≥ 0"),
            (o.lr > 0, "optimiser.lr must be > 0"),
            (o.history >= 1, "optimiser.history must be ≥ 1"),
            (o.tolerance >= 0, "optimiser.tolerance must be ≥ 0"),
            (w.position_sigma_mm > 0, "weights.position_sigma_mm must be > 0"),
            (w.rotation_sigma_deg > 0, "weights.rotation_sigma_deg must be > 0"),
            (min(w.prior, w.pose_l2, w.accel_sigma, w.betas) >= 0, "weights must be ≥ 0"),
            (s.window >= 0, "schedule.window must be ≥ 0"),
            (s.init in INITS, f"schedule.init {s.init!r}: expected one of {INITS}"),
            (s.shape_frames >= 1, "schedule.shape_frames must be ≥ 1"),
            (s.shape_iterations >= 0, "schedule.shape_iterations must be ≥ 0"),
            (all(r >= 0 for r in self.record), "record: iteration counts must be ≥ 0"),
            (self.dtype in ("float32", "float64"), f"dtype {self.dtype!r}: float32 or float64"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(f"baseline config: {message}")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for reports and JSON)."""
        d = dataclasses.asdict(self)
        d["record"] = list(self.record)
        return d

    def merged(self, overrides: dict[str, Any]) -> SolverConfig:
        """A copy with ``overrides`` (nested dict, or dotted keys like 'optimiser.iterations')."""
        return _from_dict({**_deep_merge(self.to_dict(), _undot(overrides))}, "overrides")


def available_configs() -> list[str]:
    """Names of the configurations shipped under ``conf/baseline/``."""
    return conf_names("baseline")


def load_solver_config(
    name_or_path: str | Path = "default", overrides: dict[str, Any] | None = None
) -> SolverConfig:
    """Load a solver configuration by name (``default``, ``hybrid``, ``points``) or YAML path.

    Keys the file does not set keep the dataclass defaults (which ``default.yaml`` mirrors).
    ``overrides`` (nested or dotted keys) are applied last.
    """
    path = named_yaml(name_or_path, "baseline", "baseline config")
    data = load_yaml_mapping(path)
    data.pop("name", None)
    cfg = _from_dict(data, str(path))
    return cfg.merged(overrides) if overrides else cfg


_SECTIONS = {"optimiser": OptimiserConfig, "weights": WeightsConfig, "schedule": ScheduleConfig}


def _from_dict(data: dict[str, Any], where: str) -> SolverConfig:
    top = {f.name for f in dataclasses.fields(SolverConfig)}
    unknown = set(data) - top
    if unknown:
        raise ConfigError(
            f"{where}: unknown baseline config keys {sorted(unknown)}; expected {sorted(top)}"
        )
    kwargs: dict[str, Any] = {}
    for key, cls in _SECTIONS.items():
        section = data.get(key) or {}
        if not isinstance(section, dict):
            raise ConfigError(f"{where}: {key} must be a mapping")
        names = {f.name: f.type for f in dataclasses.fields(cls)}
        bad = set(section) - set(names)
        if bad:
            raise ConfigError(
                f"{where}: unknown keys {sorted(bad)} in {key}; expected {sorted(names)}"
            )
        kwargs[key] = cls(**{k: _coerce(v, cls, k, where) for k, v in section.items()})
    if "record" in data:
        rec = data["record"]
        if not isinstance(rec, list | tuple) or not all(isinstance(r, int) for r in rec):
            raise ConfigError(f"{where}: record must be a list of iteration counts")
        kwargs["record"] = tuple(sorted(set(rec)))
    if "dtype" in data:
        kwargs["dtype"] = str(data["dtype"])
    return SolverConfig(**kwargs)


def _coerce(value: Any, cls, key: str, where: str) -> Any:
    default = getattr(cls(), key)
    try:
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise TypeError
            return value
        if isinstance(default, int):
            if isinstance(value, bool) or int(value) != value:
                raise TypeError
            return int(value)
        if isinstance(default, float):
            if isinstance(value, bool):
                raise TypeError
            return float(value)
        return str(value)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{where}: {cls.__name__}.{key} = {value!r} has the wrong type "
            f"(expected {type(default).__name__})"
        ) from None


def _undot(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        parts = str(key).split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = (
            _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        )
    return out
