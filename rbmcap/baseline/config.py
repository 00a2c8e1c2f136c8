"""Solver configuration: the dataclasses say what each key means and are the schema; YAML says
what each value is.

One source of truth: ``rbmcap/conf/baseline/default.yaml`` holds every default (how its scales
were chosen: docs/history.md#how-the-settings-were-chosen); the dataclasses below have no
defaults. Every other configuration
(``hybrid``, ``points``, or a user's own YAML path) starts with ``defaults: [default, _self_]``
and sets only what it changes; ``overrides`` (nested or dotted keys) come last. Loading goes
through :func:`rbmcap.config.compose.load_config` (OmegaConf checks keys and types);
:data:`_CHECKS` states each key's range or choices, checked whenever a :class:`SolverConfig` is
built. A bad key or value raises :class:`~rbmcap.errors.ConfigError` naming the file (or
``overrides``) and the dotted key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rbmcap.config.compose import ConfigValueError, build_config, load_config
from rbmcap.config.packaged import conf_names

INITS = ("kinematic", "rest")
DTYPES = ("float32", "float64")


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
        joints_sigma_mm: joint centre residuals (the body's joints against the centres a
            calibration measured from the plates' motion) are divided by this (mm).
        hinge_sigma_deg: the turn of a calibrated hinge (a knee or elbow that turned about one
            axis in the calibration's takes) off its axis is divided by this (deg); 0: hinges
            are free ball joints.
    """

    position_sigma_mm: float
    rotation_sigma_deg: float
    prior: float
    pose_l2: float
    accel_sigma: float
    betas: float
    joints_sigma_mm: float
    hinge_sigma_deg: float


@dataclass(frozen=True)
class OptimiserConfig:
    """How the objective is minimised: sweeps of Levenberg–Marquardt over the whole sequence
    (:mod:`rbmcap.baseline.sequence`).

    Attributes:
        iterations: sweeps at most (a sweep is one LM step of every frame, and of the betas
            unless they are held).
        tolerance: converged: a sweep that lowers the objective by less than this much per
            frame ends the solve (0: always run ``iterations`` sweeps, e.g. a fixed count).
        chunk: frames per batched evaluation (76 poses each in a step; bounds memory, not the
            answer).
    """

    iterations: int
    tolerance: float
    chunk: int


@dataclass(frozen=True)
class SolverConfig:
    """Everything the solver needs besides the body, the markers and the prior. Build it with
    :func:`load_solver_config` (the defaults live in ``default.yaml``), or derive one with
    :meth:`merged` or :func:`dataclasses.replace`.

    Attributes:
        optimiser, weights: see the classes.
        init: where a solve without a given start begins: 'kinematic' (each segment's rotation
            read off its plates, :mod:`rbmcap.baseline.init`) or 'rest' (the rest pose, rigidly
            aligned).
        record: sweep counts at which the convergence record samples the objective (and
            MPJPE when the truth is given), sorted, each once; the final iteration is always
            recorded.
        dtype: 'float32' or 'float64'.
    """

    optimiser: OptimiserConfig
    weights: WeightsConfig
    init: str
    record: tuple[int, ...]
    dtype: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "record", tuple(sorted(set(self.record))))
        _check_values(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (for reports and JSON)."""
        d = dataclasses.asdict(self)
        d["record"] = list(self.record)
        return d

    def merged(self, overrides: dict[str, Any]) -> SolverConfig:
        """A copy with ``overrides`` (nested dict, or dotted keys like 'optimiser.iterations')."""
        return build_config(SolverConfig, [(self.to_dict(), "config"), (overrides, "overrides")])


def available_configs() -> list[str]:
    """Names of the configurations shipped under ``rbmcap/conf/baseline/``."""
    return conf_names("baseline")


def load_solver_config(
    name_or_path: str | Path = "default", overrides: dict[str, Any] | None = None
) -> SolverConfig:
    """Load a solver configuration by name (``default``, ``hybrid``, ``points``) or YAML path.

    A file other than ``default.yaml`` composes it through ``defaults: [default, _self_]``:
    keys it does not set keep the defaults there. ``overrides`` (nested or dotted keys) are
    applied last.

    Raises:
        ConfigError: unknown name or missing file; an unknown key, a wrong type, a missing key
            or an out-of-range value (the message names the file or 'overrides' and the key).
    """
    return load_config(name_or_path, "baseline", SolverConfig, "baseline config", overrides)


# ----------------------------------------------------------------------------- validation
def _positive(v) -> bool:
    return v > 0


def _non_negative(v) -> bool:
    return v >= 0


_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "optimiser.iterations": (_non_negative, "must be ≥ 0"),
    "optimiser.tolerance": (_non_negative, "must be ≥ 0 (0: run every sweep)"),
    "optimiser.chunk": (lambda v: v >= 1, "must be ≥ 1"),
    "weights.position_sigma_mm": (_positive, "must be > 0"),
    "weights.rotation_sigma_deg": (_positive, "must be > 0"),
    "weights.prior": (_non_negative, "must be ≥ 0"),
    "weights.pose_l2": (_non_negative, "must be ≥ 0"),
    "weights.accel_sigma": (_non_negative, "must be ≥ 0 (0: no smoothness term)"),
    "weights.betas": (_non_negative, "must be ≥ 0"),
    "weights.joints_sigma_mm": (_positive, "must be > 0"),
    "weights.hinge_sigma_deg": (_non_negative, "must be ≥ 0 (0: hinges free)"),
    "init": (lambda v: v in INITS, f"expected one of {INITS}"),
    "record": (lambda v: all(r >= 0 for r in v), "sweep counts must be ≥ 0"),
    "dtype": (lambda v: v in DTYPES, f"expected one of {DTYPES}"),
}
"""Range and choice of every key (the one place they are stated)."""


def _check_values(config: SolverConfig) -> None:
    """Ranges and choices (:data:`_CHECKS`); ConfigValueError naming the first bad key."""
    for key, (ok, message) in _CHECKS.items():
        value = config
        for part in key.split("."):
            value = getattr(value, part)
        try:
            good = ok(value)
        except TypeError:  # only a dataclass built in code can hold a wrong type here
            raise ConfigValueError(key, value, "has the wrong type") from None
        if not good:
            raise ConfigValueError(key, value, message)
