"""One window of the solver: T frames optimised together from a start, recorded at checkpoints.

The optimiser works on the unknowns divided by their scales (:mod:`rbmcap.baseline.scaling`):
a correction ω (T, 3) of the starting global orientation, the body axis-angle (T, 23, 3), the
translation (T, 3) and, when free, the betas (B,). :func:`fit_window` runs the optimiser
(:mod:`rbmcap.baseline.optimisers`) up to each checkpoint iteration count in turn and notes a
:class:`RecordEntry` there (and, when asked, a :class:`Snapshot` of the answer).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import roma
import torch

from rbmcap.baseline.config import WeightsConfig
from rbmcap.baseline.objective import (
    WindowObservations,
    compose_rotmats,
    objective_terms,
    predict_markers,
)
from rbmcap.baseline.optimisers import OptimiserConfig, StopRule, make_stepper
from rbmcap.baseline.prior import GaussianMixturePrior
from rbmcap.body.model import BodyModel
from rbmcap.markers.plates import PlateTopology


@dataclass
class Start:
    """Starting point of a window: local rotations (T, 24, 3, 3), trans (T, 3) m, betas (B,)."""

    rotmats: torch.Tensor
    trans: torch.Tensor
    betas: torch.Tensor


class Snapshot(NamedTuple):
    """A window's answer at a recorded iteration count: local rotations (T, 24, 3, 3),
    translation (T, 3) m, betas (B,), detached, on the solver's device."""

    rotmats: torch.Tensor
    trans: torch.Tensor
    betas: torch.Tensor


class RecordEntry(NamedTuple):
    """A window's state at a recorded iteration count.

    Attributes:
        iterations: optimiser iterations asked for up to here (the checkpoint).
        evaluations: objective evaluations so far.
        objective: the window's total objective.
        seconds: optimiser wall time so far (excluding the recording).
        mpjpe_sum_mm: per-frame MPJPE (mm) summed over the window's frames (NaN without truth);
            summed, so windows add up before dividing by all frames.
    """

    iterations: int
    evaluations: int
    objective: float
    seconds: float
    mpjpe_sum_mm: float


@dataclass
class WindowResult:
    """A solved window: rotmats (T, 24, 3, 3), trans (T, 3), betas (B,), the predicted plate
    positions (T, N, 3) (the next window's smoothness context), one record (and snapshot, when
    kept) per checkpoint, iterations run and objective evaluations."""

    rotmats: torch.Tensor
    trans: torch.Tensor
    betas: torch.Tensor
    pred_pos: torch.Tensor
    records: list[RecordEntry]
    iterations: int
    evaluations: int
    snapshots: list[Snapshot] | None = None


@dataclass(frozen=True)
class Problem:
    """What a window's objective needs besides the unknowns: the body, the plate topology, the
    observations, the weights, the pose prior, and the predicted positions (C ≤ 2, N, 3) of the
    frames solved just before (held fixed, for the smoothness term) or None."""

    body: BodyModel
    topology: PlateTopology
    obs: WindowObservations
    weights: WeightsConfig
    prior: GaussianMixturePrior | None
    context: torch.Tensor | None


class ScaledUnknowns:
    """The optimiser's variables (leaf tensors, each unknown divided by its scale) and the
    unknowns they stand for.

    Args:
        start: the starting point.
        scales: per-unknown scales ``root`` (3,), ``body`` (23, 3), ``trans`` (3,), ``betas``
            (B,) (ones without preconditioning).
        betas_free: whether the betas are optimised (else held at the start's).
    """

    def __init__(self, start: Start, scales: dict[str, torch.Tensor], betas_free: bool):
        num = start.trans.shape[0]
        ref = start.trans
        self.scales = scales
        self.omega = torch.zeros(num, 3, dtype=ref.dtype, device=ref.device).requires_grad_(True)
        self.pose = (roma.rotmat_to_rotvec(start.rotmats[:, 1:]) / scales["body"]).detach()
        self.pose.requires_grad_(True)
        self.trans = (start.trans / scales["trans"]).detach().requires_grad_(True)
        self.betas = (start.betas / scales["betas"]).detach().requires_grad_(betas_free)
        self.root_base = start.rotmats[:, 0].detach()
        self.params = [self.omega, self.pose, self.trans] + ([self.betas] if betas_free else [])

    def values(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(ω (T, 3), body axis-angle (T, 23, 3), trans (T, 3), betas (B,)) in their units."""
        sc = self.scales
        return (
            self.omega * sc["root"],
            self.pose * sc["body"],
            self.trans * sc["trans"],
            self.betas * sc["betas"],
        )

    @torch.no_grad()
    def answer(self) -> Snapshot:
        """The current answer, detached."""
        omega, body_pose, trans, betas = self.values()
        rotmats = compose_rotmats(omega, self.root_base, body_pose).detach()
        return Snapshot(rotmats, trans.detach(), betas.detach())


class WindowFit:
    """The optimisation of one window: the objective, its closure, the optimiser strategy and
    the stopping rule, advanced checkpoint by checkpoint.

    Args:
        problem: the objective's fixed inputs.
        start: the starting point.
        scales: per-unknown scales (see :class:`ScaledUnknowns`).
        optimiser: which optimiser and how (:mod:`rbmcap.baseline.optimisers`).
        betas_free: whether the betas are optimised.
        sync: waits for the device (so wall times are honest on a GPU).
    """

    def __init__(
        self,
        problem: Problem,
        start: Start,
        scales: dict[str, torch.Tensor],
        optimiser: OptimiserConfig,
        betas_free: bool,
        sync: Callable[[], None],
    ):
        self.problem = problem
        self.unknowns = ScaledUnknowns(start, scales, betas_free)
        self.stepper = make_stepper(optimiser, self.unknowns.params, self._closure)
        self.rule = StopRule(optimiser.tolerance)
        self.sync = sync
        self.evaluations = 0
        self.done = 0
        self.stopped = False
        self.seconds = 0.0

    def objective(self) -> torch.Tensor:
        """The window's objective E (a scalar; see :mod:`rbmcap.baseline.objective`)."""
        p = self.problem
        omega, body_pose, trans, betas = self.unknowns.values()
        rotmats = compose_rotmats(omega, self.unknowns.root_base, body_pose)
        pp, pr = predict_markers(p.body, p.topology, rotmats, betas, trans)
        terms = objective_terms(pp, pr, p.obs, body_pose, betas, p.weights, p.prior, p.context)
        return sum(terms.values())

    def _closure(self) -> torch.Tensor:
        for t in self.unknowns.params:
            t.grad = None
        loss = self.objective()
        loss.backward()
        self.evaluations += 1
        return loss

    def advance(self, target: int) -> None:
        """Run the optimiser until ``target`` iterations (or until it stops), timed."""
        self.sync()
        t = time.perf_counter()
        while self.done < target and not self.stopped:
            steps = self.stepper.run(self.rule.chunk(target - self.done))
            self.done += steps.ran
            self.stopped = steps.stuck or self.rule.should_stop(steps.start_objective)
        self.sync()
        self.seconds += time.perf_counter() - t

    @torch.no_grad()
    def record(self, target: int, truth: torch.Tensor | None) -> RecordEntry:
        """The record at checkpoint ``target``; ``truth``: the window's (T, 24, 3) true joints."""
        f = float(self.objective())
        mp = float("nan")
        if truth is not None:
            ans = self.unknowns.answer()
            joints, _ = self.problem.body.pose_joints(ans.rotmats, ans.betas, ans.trans)
            mp = float(1e3 * (joints - truth).norm(dim=-1).mean(-1).sum())
        return RecordEntry(target, self.evaluations, f, self.seconds, mp)

    @torch.no_grad()
    def result(self, records: list[RecordEntry], snapshots: list[Snapshot] | None):
        """The solved window."""
        ans = self.unknowns.answer()
        p = self.problem
        pred_pos, _ = predict_markers(p.body, p.topology, ans.rotmats, ans.betas, ans.trans)
        return WindowResult(
            ans.rotmats,
            ans.trans,
            ans.betas,
            pred_pos.detach(),
            records,
            self.done,
            self.evaluations,
            snapshots,
        )


def fit_window(
    fit: WindowFit,
    checkpoints: Sequence[int],
    truth: torch.Tensor | None,
    keep: bool = False,
) -> WindowResult:
    """Advance ``fit`` to each checkpoint (ascending iteration counts) in turn, recording there
    (and keeping a snapshot of the answer when ``keep``)."""
    records: list[RecordEntry] = []
    kept: list[Snapshot] | None = [] if keep else None
    for target in checkpoints:
        fit.advance(target)
        records.append(fit.record(target, truth))
        if kept is not None:
            kept.append(fit.unknowns.answer())
    return fit.result(records, kept)
