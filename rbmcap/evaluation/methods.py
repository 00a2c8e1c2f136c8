"""The evaluated methods, each a small object with one ``run(sequence)``.

Every method answers one :class:`~rbmcap.evaluation.sequences.Sequence` with
``(SMPLParams, seconds)``. The evaluation calls, in order, :meth:`Method.prepare` (with the
results of the methods before it), ``run`` on each of :meth:`Method.sequences`, then
:meth:`Method.finish` (its convergence curve, for solvers).

Every method pays its one-off start-up (the network's first call, the solver's first solve: lazy
imports, allocations, kernel choice) in :meth:`Method.prepare`, untimed, so its times are what
each further sequence costs, whatever the number of sequences.

- :class:`NetworkMethod`: the trained checkpoint through :class:`rbmcap.inference.Predictor`.
- :class:`BaselineMethod`: the optimisation solver, 6-DoF on the RBM data or on a point-marker
  dataset of the same motions, each sequence solved until it converged by the solver's own rule
  (a sweep that lowers the objective by less than the configuration's tolerance).
- :class:`HybridMethod`: the solver started from the network's answer, with the iterations that
  fit in a fraction of the baseline's converged time, network pass included, measured on its
  own solves (:meth:`HybridMethod.calibrate`); its times and its curve include that pass.
- :class:`RefineMethod`: the network's answer, then a fixed number of solver sweeps; its times
  and its curve include the network pass.
- :class:`OracleStartMethod`: the hybrid, same budget, from the truth moved a fraction of the way
  to the network's answer (:mod:`rbmcap.evaluation.oracle`): what network the claim needs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rbmcap.body.params import SMPLParams
from rbmcap.evaluation.oracle import scaled_error_start
from rbmcap.evaluation.results import MethodResult, aggregate_records
from rbmcap.evaluation.sequences import Sequence

if TYPE_CHECKING:
    from rbmcap.baseline.solver import Solver

log = logging.getLogger("rbmcap.eval")

ORACLE_PREFIX = "hybrid_start_"
"""Method keys of the hybrid from oracle starts: this prefix and the fraction."""


def oracle_key(fraction: float) -> str:
    """The method key of the hybrid from an oracle start with ``fraction`` × the network's
    error."""
    return f"{ORACLE_PREFIX}{fraction:g}"


class Method:
    """One evaluated method: ``key`` (its name in the report) and ``label`` (its caption)."""

    key: str
    label: str

    def sequences(self, split: Iterable[Sequence]) -> Iterable[Sequence]:
        """What it runs on: the split itself unless it reads another dataset."""
        return split

    def prepare(self, split: Iterable[Sequence], done: Mapping[str, MethodResult]) -> None:
        """Work before the per-sequence runs, given the results of the methods run before."""

    def run(self, seq: Sequence) -> tuple[SMPLParams, float]:
        """Its answer for ``seq`` and the wall-clock seconds it took."""
        raise NotImplementedError

    def finish(self, result: MethodResult) -> None:
        """Fill what is known only after every sequence (a solver's convergence curve)."""


WARM_UP_FRAMES = 16
"""Frames of a solver's untimed warm-up solve (:meth:`SolverRun.warm_up`)."""

WARM_UP_ITERATIONS = 2
"""Optimiser iterations of a solver's untimed warm-up solve."""


class NetworkMethod(Method):
    """The network; keeps each answer and its time for the hybrid that starts from it. Its first
    call (the start-up) is made in :meth:`prepare`, on the split's first sequence, untimed."""

    key = "network"

    def __init__(self, predictor, label: str) -> None:
        self.predictor, self.label = predictor, label
        self.answers: dict[str, tuple[SMPLParams, float]] = {}

    def prepare(self, split, done) -> None:
        first = next(iter(split), None)
        if first is not None:
            self.predictor.predict(*first.observations)

    def run(self, seq: Sequence) -> tuple[SMPLParams, float]:
        t0 = time.perf_counter()
        params = self.predictor.predict(*seq.observations)
        seconds = time.perf_counter() - t0
        self.answers[seq.name] = (params, seconds)
        return params, seconds


@dataclass(frozen=True)
class SolverRun:
    """How a method calls the solver: the :class:`rbmcap.baseline.Solver`, the data's frame
    rate (Hz), whether the markers have orientations (6-DoF) and the optimiser iterations when
    no budget is planned (None: the solver config's)."""

    solver: Solver
    fps: float
    orientations: bool = True
    iterations: int | None = None

    def solve(self, seq: Sequence, **kwargs):
        """The solver's :class:`~rbmcap.baseline.Solution` for ``seq`` (MPJPE recorded)."""
        pos, rot, valid = seq.observations
        rot = rot if self.orientations else None
        kwargs.setdefault("iterations", self.iterations)
        return self.solver.solve(pos, rot, valid, fps=self.fps, truth_joints=seq.joints, **kwargs)

    def warm_up(self, seqs: Iterable[Sequence]) -> None:
        """An untimed solve of the first :data:`WARM_UP_FRAMES` frames of the first of ``seqs``
        for :data:`WARM_UP_ITERATIONS` iterations: the solver's one-off start-up is paid here,
        not by the first timed solve."""
        first = next(iter(seqs), None)
        if first is None:
            return
        pos, rot, valid = (None if x is None else x[:WARM_UP_FRAMES] for x in first.observations)
        rot = rot if self.orientations else None
        self.solver.solve(pos, rot, valid, fps=self.fps, iterations=WARM_UP_ITERATIONS)


class BaselineMethod(Method):
    """The solver, each sequence until it converged (the solver configuration's tolerance).

    :meth:`prepare` solves every sequence; :meth:`run` returns its answer and time.
    ``sequences`` maps the split to what it solves (e.g.
    :class:`~rbmcap.evaluation.sequences.CounterpartSplit` for a point-marker dataset of the
    same motions); None: the split itself.
    """

    def __init__(self, key: str, label: str, solve: SolverRun, sequences=None) -> None:
        self.key, self.label, self.solve = key, label, solve
        self._sequences = sequences
        self._solutions: dict = {}
        self.iterations: int | None = None  # the most sweeps a sequence took, after prepare
        self.curve = None  # rbmcap.baseline.ConvergenceRecord of the split, after prepare

    def sequences(self, split):
        return split if self._sequences is None else self._sequences(split)

    def prepare(self, split, done) -> None:
        self.solve.warm_up(self.sequences(split))
        for seq in self.sequences(split):
            log.info("  solving %s (%d frames)", seq.name, seq.frames)
            self._solutions[seq.name] = self.solve.solve(seq)
        sols = list(self._solutions.values())
        self.curve = aggregate_records([s.record.to_dict() for s in sols])
        self.iterations = max((s.iterations for s in sols), default=None)
        unconverged = [name for name, s in self._solutions.items() if not s.converged]
        if unconverged:
            log.warning("  not converged in its sweeps: %s", ", ".join(unconverged))

    def run(self, seq: Sequence) -> tuple[SMPLParams, float]:
        sol = self._solutions.pop(seq.name)
        return sol.params, sol.seconds

    def finish(self, result: MethodResult) -> None:
        result.iterations = self.iterations
        result.convergence = [self.curve.to_dict()]


@dataclass(frozen=True)
class BudgetPlan:
    """The hybrid's time budget: with the 6-DoF baseline run and a ``fraction`` of its converged
    time (network pass included), ``margin`` of that time planned for; else None (the solver's
    own iterations)."""

    fraction: float | None
    margin: float
    baseline_key: str = "baseline_6dof"

    def ms_per_frame(self, done: Mapping[str, MethodResult]) -> float | None:
        """The planned time (ms per frame, network pass included), or None without a budget."""
        if not self.fraction or self.baseline_key not in done:
            return None
        return self.margin * self.fraction * done[self.baseline_key].ms_per_frame

    def iterations(self, done: Mapping[str, MethodResult]) -> int | None:
        """The iterations estimated at the baseline's cost per iteration
        (:func:`hybrid_budget`), or None without a budget."""
        if self.ms_per_frame(done) is None:
            return None
        return hybrid_budget(done[self.baseline_key], done["network"], self.fraction, self.margin)


CALIBRATION_FRAMES = 500
"""Frames of the split (whole sequences from its start, at least one) on which the hybrid
measures its own cost per iteration before its budget is fixed."""


class HybridMethod(Method):
    """The solver from the network's answer, on the planned budget; its time is the whole
    solve plus the network pass that starts it, and so is every time of its curve (how the
    accuracy moves away from the start).

    With a budget (:class:`BudgetPlan`), :meth:`prepare` fixes its iterations from its own
    measured cost: a solve from the network's answer on the split's first
    :data:`CALIBRATION_FRAMES` frames to twice the estimate at the baseline's cost
    (:func:`hybrid_budget`; from its start the line searches take more or fewer evaluations than
    the baseline's) gives its time per frame against iterations; the budget is the most
    iterations within the planned time. The timed solves then run that many iterations."""

    key = "hybrid"
    label = "hybrid (network + optimisation)"

    def __init__(self, solve: SolverRun, network: NetworkMethod, plan: BudgetPlan) -> None:
        self.solve, self.network, self.plan = solve, network, plan
        self.budget: int | None = None
        self.records: list[dict] = []

    def start(self, seq: Sequence) -> SMPLParams:
        """Where the solver starts for ``seq``."""
        return self.network.answers[seq.name][0]

    def prepare(self, split, done) -> None:
        self.solve.warm_up(split)
        planned = self.plan.ms_per_frame(done)
        if planned is None:
            return
        estimate = self.plan.iterations(done)
        self.budget = self.calibrate(split, planned, 2 * estimate + 10)
        log.info(
            "%s budget: %d iterations, measured to fit %.2g ms/frame (%g %% of %.2g of the "
            "baseline's time; %d at the baseline's cost per iteration)",
            self.key,
            self.budget,
            planned,
            100 * self.plan.margin,
            self.plan.fraction,
            estimate,
        )

    def calibrate(self, split, planned_ms: float, most: int) -> int:
        """The most iterations (at least 1, at most ``most``) whose time per frame, network pass
        included, is within ``planned_ms``: a solve to ``most`` on the split's first
        :data:`CALIBRATION_FRAMES` frames, its curve interpolated between its recorded counts
        (the solver's own, so the timed solves stop at the same points and pay the same)."""
        records, frames = [], 0
        for seq in split:
            log.info(
                "  measuring its cost on %s (%d frames, %d iterations)", seq.name, seq.frames, most
            )
            sol = self.solve.solve(seq, init=self.start(seq), iterations=most)
            records.append(self._record(seq, sol))
            frames += seq.frames
            if frames >= CALIBRATION_FRAMES:
                break
        curve = aggregate_records(records)
        if curve is None:
            return 1
        iters = np.asarray(curve.iterations, dtype=float)
        ms = np.maximum.accumulate(np.asarray(curve.ms_per_frame, dtype=float))
        over = np.flatnonzero(ms > planned_ms)
        if not len(over):
            return max(1, most)
        j = int(over[0])
        if j == 0:
            return 1
        share = (planned_ms - ms[j - 1]) / max(ms[j] - ms[j - 1], 1e-12)
        return max(1, int(iters[j - 1] + share * (iters[j] - iters[j - 1])))

    def run(self, seq: Sequence) -> tuple[SMPLParams, float]:
        iterations = self.budget or self.solve.iterations
        sol = self.solve.solve(seq, init=self.start(seq), iterations=iterations)
        self.records.append(self._record(seq, sol))
        return sol.params, sol.seconds + self.network.answers[seq.name][1]

    def _record(self, seq: Sequence, sol) -> dict:
        """``sol``'s convergence record (a dict) with the network pass for ``seq`` added to
        every time."""
        network_seconds = self.network.answers[seq.name][1]
        record = sol.record.to_dict()
        record["seconds"] = [s + network_seconds for s in record["seconds"]]
        record["ms_per_frame"] = [1e3 * s / max(seq.frames, 1) for s in record["seconds"]]
        return record

    def finish(self, result: MethodResult) -> None:
        total = aggregate_records(self.records)
        result.iterations = None if total is None else total.iterations[-1]
        result.convergence = [] if total is None else [total.to_dict()]


class RefineMethod(Method):
    """Refinement: the network's answer, then ``solve.iterations`` sweeps (a fixed count, every
    sequence the same), the shape prior centred on the network's betas; its time and every time
    of its curve include the network pass."""

    key = "refine"

    def __init__(self, solve: SolverRun, network: NetworkMethod) -> None:
        self.solve, self.network = solve, network
        self.label = f"refined (network + {solve.iterations} sweeps)"
        self.records: list[dict] = []

    def prepare(self, split, done) -> None:
        self.solve.warm_up(split)

    def run(self, seq: Sequence) -> tuple[SMPLParams, float]:
        start, network_seconds = self.network.answers[seq.name]
        sol = self.solve.solve(seq, init=start, tolerance=0)
        record = sol.record.to_dict()
        record["seconds"] = [s + network_seconds for s in record["seconds"]]
        record["ms_per_frame"] = [1e3 * s / max(seq.frames, 1) for s in record["seconds"]]
        self.records.append(record)
        return sol.params, sol.seconds + network_seconds

    def finish(self, result: MethodResult) -> None:
        result.iterations = self.solve.iterations
        total = aggregate_records(self.records)
        result.convergence = [] if total is None else [total.to_dict()]


class OracleStartMethod(HybridMethod):
    """The hybrid from the truth moved ``fraction`` of the way to the network's answer."""

    def __init__(self, solve: SolverRun, network: NetworkMethod, plan: BudgetPlan, fraction):
        super().__init__(solve, network, plan)
        self.fraction = float(fraction)
        self.key = oracle_key(self.fraction)
        self.label = f"hybrid from {self.fraction:g} × the network's error (oracle start)"

    def start(self, seq: Sequence) -> SMPLParams:
        return scaled_error_start(super().start(seq), seq.truth_params, self.fraction)

    def prepare(self, split, done) -> None:
        """The hybrid's iterations (its result in ``done``), else the plan's estimate."""
        self.solve.warm_up(split)
        hybrid = done.get(HybridMethod.key)
        self.budget = hybrid.iterations if hybrid is not None else self.plan.iterations(done)


def hybrid_budget(
    baseline: MethodResult, network: MethodResult, fraction: float, margin: float
) -> int:
    """Solver iterations that fit the hybrid in ``fraction`` of the baseline's converged time.

    The network's pass that starts the hybrid is paid first; ``margin`` of the rest
    (:attr:`EvalOptions.hybrid_margin`) is planned for, at the baseline's measured cost per
    iteration (from its record, less its setup; early iterations cost more, their line searches
    take more evaluations). The record's first iteration also carries the solver's one-off
    set-up (building the problem, the first evaluations), which a solve from the network's
    answer pays in its own, much smaller, way: what that iteration costs beyond the rate of the
    iterations after it is left out. At least one iteration.
    """
    rec = baseline.convergence[0]
    iters = np.asarray(rec["iterations"], dtype=float)
    spent = np.asarray(rec["ms_per_frame"], dtype=float) - rec["ms_per_frame"][0]
    spare = margin * fraction * baseline.ms_per_frame - network.ms_per_frame
    if len(iters) < 2 or spare <= 0:
        return 1
    if len(iters) >= 3 and iters[1] > iters[0]:
        rate = (spent[2] - spent[1]) / max(iters[2] - iters[1], 1.0)
        setup = max(0.0, spent[1] - rate * (iters[1] - iters[0]))
        spent[1:] -= setup
    if spare >= spent[-1]:  # beyond the record: its last cost per iteration
        rate = (spent[-1] - spent[-2]) / max(iters[-1] - iters[-2], 1.0)
        return max(1, int(iters[-1] + (spare - spent[-1]) / max(rate, 1e-9)))
    return max(1, int(np.interp(spare, spent, iters)))
