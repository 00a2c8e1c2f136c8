"""``EvalOptions``: what an evaluation does, its defaults and their checks, in one place.

The ``rbmcap eval`` CLI builds its argument defaults from these fields, and ``rbmcap demo`` and
library callers construct the same dataclass, so every caller gets the same defaults and the same
:class:`~rbmcap.errors.ConfigError` for a bad value (checked on construction).

Kept free of heavy imports: the CLI reads it when it builds its parser.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rbmcap.errors import ConfigError
from rbmcap.evaluation.occlusion import check_groups, occlusion_groups

PRECISIONS = ("float32", "bfloat16", "int8")
""":data:`rbmcap.inference.narrow.PRECISIONS`, written out so that the command line reads it
without importing torch (a test keeps the two equal)."""

REFINE_DEFAULT = -1
""":attr:`EvalOptions.refine` that takes the sweep count of ``refine_config`` (``--refine``
without a number)."""

HYBRID_CLAIM_FRACTION = 0.2
"""The hybrid claim: the 6-DoF baseline's accuracy in at most this fraction of its
converged time. The default hybrid budget and the claim the report judges."""


@dataclass
class EvalOptions:
    """What ``rbmcap eval`` does.

    Attributes:
        ckpt: checkpoint written by ``train.py``.
        data: dataset folder (``rbmcap synth``).
        split: the split evaluated.
        baseline: also run the 6-DoF optimisation baseline.
        hybrid: also run the solver started from the network's answer.
        refine: also run refinement: the network's answer, then this many Levenberg–Marquardt
            sweeps (a count; :data:`REFINE_DEFAULT` takes the ``refine_config``'s); None: not.
        point_data: a point-marker dataset (e.g. moshpp53) of the same motions: also run the
            point-marker optimisation on it.
        prior: pose prior ``.npz`` of every solving method (None: the prior shipped with
            rbmcap, :func:`rbmcap.baseline.prior.default_pose_prior`).
        max_frames: frames to evaluate at most, over all sequences (None: all).
        frames_per_sequence: evaluate only each sequence's first N frames (None: all).
        sequences: evaluate only the sequences whose names match this glob (``fnmatch``, case
            sensitive; e.g. ``"cmu-iclone/*"`` for the real clips of a mixed dataset), or all.
        solver_config, hybrid_config, refine_config, point_config: ``conf/baseline`` names or
            YAML paths of the 6-DoF baseline, the hybrid, refinement and the point-marker
            baseline.
        solver_iterations: optimiser iterations of every solve without a planned budget
            (None: each solver config's own); a quick look, not a converged baseline.
        hybrid_fraction: with the baseline, the hybrid gets the iterations that fit in this
            fraction of the baseline's converged time (0 or None: the hybrid config's).
        hybrid_margin: share of that budget planned for (see the field's comment).
        start_errors: with the hybrid, also run it from oracle starts with F times the
            network's error (:mod:`rbmcap.evaluation.oracle`); duplicates are dropped.
        occlude: occlusion conditions (:mod:`rbmcap.evaluation.occlusion`), each a group of
            plate names hidden for whole sequences (``valid`` False in every frame, before any
            method sees the data); the evaluation runs with every plate seen, then once per
            group. A string is one group with its plates separated by commas
            (``"left_foot,right_foot"``); normalised to a tuple of name tuples on construction.
            Names are checked against the data's marker set when it is opened.
        smoothing: σ (frames) of the zero-phase Gaussian over the network's whole-sequence
            answer (:mod:`rbmcap.inference.smoothing`; 0: its raw answer; None: the
            predictor's default). The hybrid starts from the smoothed answer.
        precision: the type the network's weights are held in
            (:data:`rbmcap.inference.narrow.PRECISIONS`; ``bfloat16``/``int8``: a causal GRU
            as a live stream would run it, :mod:`rbmcap.inference.narrow`).
        device: torch device of the network and the solvers.
        vertices: compute V2V (a full mesh forward per frame).
        angles: also compare every answer's clinical joint angles (Plug-in Gait) with the
            truth's (:mod:`rbmcap.evaluation.angles`).
        body: body model path (None: the data's stand-in).
    """

    ckpt: str | Path
    data: str | Path
    split: str = "test"
    baseline: bool = False
    hybrid: bool = False
    refine: int | None = None
    point_data: str | Path | None = None
    prior: str | Path | None = None
    max_frames: int | None = None
    frames_per_sequence: int | None = None
    sequences: str | None = None
    solver_config: str = "default"
    hybrid_config: str = "default"
    refine_config: str = "refine"
    point_config: str = "points"
    solver_iterations: int | None = None
    hybrid_fraction: float | None = HYBRID_CLAIM_FRACTION
    # Timings vary from run to run and the hybrid's iterations cost a little more than the
    # baseline's, so the budget is planned on this share of the time it may take.
    hybrid_margin: float = 0.85
    start_errors: tuple[float, ...] = ()
    occlude: tuple[tuple[str, ...], ...] = ()
    smoothing: float | None = None
    precision: str = "float32"
    device: str = "cpu"
    vertices: bool = True
    angles: bool = False
    body: str | None = None

    def __post_init__(self) -> None:
        self.start_errors = tuple(dict.fromkeys(float(f) for f in self.start_errors))
        self.occlude = occlusion_groups(self.occlude)
        self.validate()

    def validate(self) -> None:
        """Check every value; raises :class:`ConfigError` naming the field."""
        for name in ("max_frames", "frames_per_sequence", "solver_iterations"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or int(value) != value or value <= 0):
                raise ConfigError(f"eval option {name} = {value}: must be a positive integer")
        r = self.refine
        if r is not None and (
            isinstance(r, bool) or int(r) != r or (r <= 0 and r != REFINE_DEFAULT)
        ):
            raise ConfigError(f"eval option refine = {r}: expected a number of sweeps ≥ 1")
        if self.hybrid_fraction is not None and not 0 <= self.hybrid_fraction <= 1:
            raise ConfigError(
                f"eval option hybrid_fraction = {self.hybrid_fraction}: expected 0 … 1"
            )
        if not 0 < self.hybrid_margin <= 1:
            raise ConfigError(f"eval option hybrid_margin = {self.hybrid_margin}: expected (0, 1]")
        if self.start_errors and not self.hybrid:
            raise ConfigError(f"eval option start_errors = {list(self.start_errors)}: needs hybrid")
        if any(f < 0 for f in self.start_errors):
            raise ConfigError(f"eval option start_errors = {list(self.start_errors)}: must be ≥ 0")
        if self.smoothing is not None and not (
            math.isfinite(self.smoothing) and self.smoothing >= 0
        ):
            raise ConfigError(f"eval option smoothing = {self.smoothing}: expected frames ≥ 0")
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"eval option precision = {self.precision!r}: expected one of "
                f"{', '.join(PRECISIONS)}"
            )
        if not self.split:
            raise ConfigError("eval option split is empty")
        if self.sequences is not None and not self.sequences:
            raise ConfigError("eval option sequences is empty (a glob such as 'cmu-iclone/*')")
        check_groups(self.occlude)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready values (paths as strings, tuples as lists)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = str(v) if isinstance(v, Path) else _listed(v)
        return out


def _listed(value):
    """Tuples (nested too) as lists, for JSON."""
    return [_listed(v) for v in value] if isinstance(value, tuple) else value


def defaults() -> dict[str, Any]:
    """Each optional field's default (what the CLI's arguments default to)."""
    return {
        f.name: f.default
        for f in dataclasses.fields(EvalOptions)
        if f.default is not dataclasses.MISSING
    }
