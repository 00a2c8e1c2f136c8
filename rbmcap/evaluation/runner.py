"""Run every configured method on a dataset split and collect per-sequence metrics and timings.

:func:`evaluate` opens the checkpoint and the data (:class:`EvalSetup`), builds the methods
(:func:`build_methods`, see :mod:`rbmcap.evaluation.methods`) and scores each in turn
(:func:`score`), with every plate seen and then once per occlusion condition
(:mod:`rbmcap.evaluation.occlusion`). Times are wall-clock milliseconds per frame in this process.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cached_property

from rbmcap.baseline import Solver, default_pose_prior, load_pose_prior
from rbmcap.body import load_body_model
from rbmcap.body.model import BodyModel
from rbmcap.dataset import RBMDataset
from rbmcap.errors import ConfigError, DataError
from rbmcap.evaluation.methods import (
    BaselineMethod,
    BudgetPlan,
    HybridMethod,
    Method,
    NetworkMethod,
    OracleStartMethod,
    RefineMethod,
    SolverRun,
)
from rbmcap.evaluation.occlusion import Condition, conditions
from rbmcap.evaluation.options import EvalOptions
from rbmcap.evaluation.results import MethodResult, Scorer
from rbmcap.evaluation.sequences import CounterpartSplit, Split
from rbmcap.inference import Predictor

log = logging.getLogger("rbmcap.eval")


def evaluate(opts: EvalOptions) -> dict:
    """Run the configured methods; returns the data the report is written from: ``options``,
    ``dataset`` (what was evaluated), ``methods`` (key → :class:`MethodResult`, every plate
    seen) and ``occlusions`` (per condition of ``opts.occlude``: ``occluded`` plates,
    ``near_joints`` and its own ``methods``)."""
    opts.validate()
    setup = EvalSetup.open(opts)
    seen, *hidden = setup.conditions
    methods = run_condition(setup, seen)
    occlusions = [{**c.describe(), "methods": run_condition(setup, c)} for c in hidden]
    return {
        "options": opts.as_dict(),
        "dataset": setup.describe(),
        "methods": methods,
        "occlusions": occlusions,
        "observed": setup.observed(),
    }


def run_condition(setup: EvalSetup, condition: Condition) -> dict[str, MethodResult]:
    """Every configured method on the split with ``condition``'s plates hidden."""
    if condition.plates:
        log.info("occluded for whole sequences: %s", condition.label)
    split = setup.split(condition.indices)
    results: dict[str, MethodResult] = {}
    for method in build_methods(setup, points=not condition.plates):
        results[method.key] = score(method, split, setup.scorer, results)
    return results


def score(method: Method, split: Split, scorer: Scorer, done: dict) -> MethodResult:
    """One method over the split: prepared with the results ``done`` before it, run on each
    sequence and scored."""
    log.info("%s", method.label)
    method.prepare(split, done)
    result = MethodResult(method.key, method.label)
    for seq in method.sequences(split):
        log.info("  %s (%d frames)", seq.name, seq.frames)
        params, seconds = method.run(seq)
        scorer.record(result, seq, params, seconds)
    method.finish(result)
    return result.finished()


@dataclass
class EvalSetup:
    """What every method shares: the options, the network's predictor, the data, its body,
    frame rate (Hz) and the evaluated conditions (every plate seen first, then each occlusion).
    Open with :meth:`open`."""

    opts: EvalOptions
    predictor: Predictor
    data: RBMDataset
    body: BodyModel
    fps: float
    conditions: tuple[Condition, ...] = (Condition(),)

    @classmethod
    def open(cls, opts: EvalOptions) -> EvalSetup:
        """Load the checkpoint and the split; checks they belong together and that the occluded
        plates are the data's."""
        smoothing = {} if opts.smoothing is None else {"smoothing": opts.smoothing}
        predictor = Predictor.from_checkpoint(
            opts.ckpt, device=opts.device, precision=opts.precision, **smoothing
        )
        data = RBMDataset(opts.data, opts.split)
        if len(data) == 0:
            raise DataError(f"{opts.data}: split {opts.split!r} is empty")
        if opts.sequences and not any(
            fnmatch.fnmatchcase(e.name, opts.sequences) for e in data.sequences
        ):
            raise DataError(
                f"{opts.data}: no sequence of split {opts.split!r} matches {opts.sequences!r}"
            )
        if data.manifest.marker_set != predictor.marker_set:
            raise ConfigError(
                f"{opts.ckpt} was trained on marker set {predictor.marker_set!r} but {opts.data} "
                f"holds {data.manifest.marker_set!r}"
            )
        body = _body(data, opts.body)
        if body.identity != predictor.body_id:
            log.warning(
                "checkpoint body %s differs from the data's %s", predictor.body_id, body.identity
            )
        fps = float(data.manifest.config.get("fps", 60.0))
        markers = data.manifest.config["markers"]["markers"]
        conds = conditions(opts.occlude, markers, data.manifest.marker_set)
        return cls(opts, predictor, data, body, fps, conds)

    @property
    def marker_set(self) -> str:
        return self.data.manifest.marker_set

    def split(self, hidden: tuple[int, ...] = ()) -> Split:
        """The evaluated split with the plates ``hidden`` (indices) invalid in every frame."""
        o = self.opts
        return Split(self.data, o.max_frames, o.frames_per_sequence, hidden, o.sequences)

    @property
    def scorer(self) -> Scorer:
        return Scorer(self.body, self.fps, self.opts.vertices, self.opts.angles)

    @cached_property
    def prior(self):
        """The solvers' pose prior: the given file, else the one shipped with rbmcap."""
        return _prior(self.opts)

    def solver_run(self, config: str, marker_set: str | None = None) -> SolverRun:
        """A solver with ``config`` (a ``conf/baseline`` name or YAML path) for ``marker_set``
        (default the data's), the data's frame rate and the options' iterations."""
        marker_set = marker_set or self.marker_set
        solver = Solver(self.body, marker_set, config, self.prior, self.opts.device)
        return SolverRun(solver, self.fps, iterations=self.opts.solver_iterations)

    def observed(self) -> dict:
        """What a saved sequence needs beside the answers (:mod:`rbmcap.evaluation.saved`):
        ``plate_names``, ``body``, ``gender``, ``fps`` and per evaluated sequence (every plate
        seen) its name, observations and truth."""
        markers = self.data.manifest.config["markers"]["markers"]
        return {
            "plate_names": [m["name"] for m in markers],
            "body": self.body.identity,
            "gender": getattr(self.body, "gender", "neutral"),
            "fps": self.fps,
            "sequences": [(s.name, s.observations, s.truth) for s in self.split()],
        }

    def describe(self) -> dict:
        """The evaluated data, JSON-ready."""
        return {
            "path": str(self.opts.data),
            "split": self.opts.split,
            "marker_set": self.marker_set,
            "realism": self.data.manifest.realism,
            "body": self.body.identity,
            "fps": self.fps,
        }


def build_methods(setup: EvalSetup, points: bool = True) -> Iterator[Method]:
    """The configured methods in the order they run (later ones use earlier results); built
    lazily, so a solver is made only when its turn comes. ``points``: include the point-marker
    baseline if configured (not under occlusion: its data has no plates to hide)."""
    opts = setup.opts
    name = setup.predictor.model.config.network["name"]
    network = NetworkMethod(setup.predictor, f"network ({name}, {setup.marker_set})")
    yield network
    if opts.baseline:
        label = f"optimisation ({setup.marker_set}, 6-DoF)"
        yield BaselineMethod("baseline_6dof", label, setup.solver_run(opts.solver_config))
    if opts.hybrid:
        hybrid = setup.solver_run(opts.hybrid_config)
        plan = BudgetPlan(opts.hybrid_fraction, opts.hybrid_margin)
        yield HybridMethod(hybrid, network, plan)
        for f in opts.start_errors:
            yield OracleStartMethod(hybrid, network, plan, f)
    if opts.refine is not None:
        run = setup.solver_run(opts.refine_config)
        sweeps = opts.refine if opts.refine > 0 else run.solver.config.optimiser.iterations
        yield RefineMethod(replace(run, iterations=sweeps), network)
    if opts.point_data is not None and points:
        yield _point_baseline(setup)


def _point_baseline(setup: EvalSetup) -> BaselineMethod:
    """The solver on the point-marker dataset, on the sequences the network was evaluated on."""
    opts = setup.opts
    pdata = RBMDataset(opts.point_data, opts.split)
    if pdata.manifest.config.get("markers", {}).get("kind") != "point":
        raise ConfigError(
            f"{opts.point_data}: --point-data must hold a point-marker dataset "
            f"(e.g. moshpp53), it holds {pdata.manifest.marker_set!r}"
        )
    run = replace(
        setup.solver_run(opts.point_config, pdata.manifest.marker_set), orientations=False
    )
    label = f"optimisation ({pdata.manifest.marker_set}, points)"
    return BaselineMethod(
        "baseline_points", label, run, sequences=lambda split: CounterpartSplit(pdata, split)
    )


def _body(data, spec: str | None):
    """The body the dataset was made with: the stand-in by its id, else the user's model path."""
    ident = data.manifest.body_model
    gender = ident.rsplit("/", 1)[-1] if "/" in ident else "neutral"
    if spec is None:
        if not ident.startswith("standin"):
            raise ConfigError(f"{data.path} was made with body {ident!r}: pass --body MODEL_PATH")
        spec = "standin"
    body = load_body_model(
        spec, gender=gender if gender in ("neutral", "male", "female") else "neutral"
    )
    if body.identity != ident:
        log.warning("the data was made with body %s, evaluating with %s", ident, body.identity)
    return body


def _prior(opts: EvalOptions):
    """The pose prior: a given file, else the one shipped with rbmcap."""
    if opts.prior is not None:
        return load_pose_prior(opts.prior)
    return default_pose_prior()
