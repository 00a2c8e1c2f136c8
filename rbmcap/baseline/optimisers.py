"""How the solver steps: one small strategy per optimiser, and the early-stopping rule.

A strategy wraps a ``torch.optim`` optimiser over the solver's unknowns and a closure (zero the
gradients, evaluate the objective, back-propagate, return it) and offers one operation,
``run(count)``: up to ``count`` iterations, answering a :class:`Steps`. The solver's loop is the
same for every optimiser:

>>> stepper = make_stepper(config.optimiser, params, closure)
>>> rule = StopRule(config.optimiser.tolerance)
>>> while done < target and not stopped:
...     steps = stepper.run(rule.chunk(target - done))
...     done += steps.ran
...     stopped = steps.stuck or rule.should_stop(steps.start_objective)

Add an optimiser by writing a class with ``__init__(params, closure, config)`` and ``run`` and
naming it in :data:`STEPPERS` (the configuration accepts exactly these names).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch

Closure = Callable[[], torch.Tensor]


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


class Steps(NamedTuple):
    """What one ``run`` did.

    Attributes:
        ran: iterations run (≤ the count asked for).
        stuck: the optimiser stopped by itself before the count (it cannot move: a failed line
            search, a zero gradient); running it again would not help.
        start_objective: the objective where the run started (before its first step).
    """

    ran: int
    stuck: bool
    start_objective: float


class Stepper(Protocol):
    """An optimiser strategy: ``run(count)`` iterations over the unknowns."""

    def run(self, count: int) -> Steps: ...


class LBFGSStepper:
    """torch's L-BFGS with a strong-Wolfe line search, ``count`` iterations per ``opt.step``.

    One iteration is a direction and its line search: usually 1–2 objective evaluations, at most
    25 (``max_eval``). The built-in tolerances are off: stopping is :class:`StopRule`'s job.
    """

    def __init__(self, params: Sequence[torch.Tensor], closure: Closure, config: OptimiserConfig):
        self.closure = closure
        self.opt = torch.optim.LBFGS(
            params,
            lr=config.lr,
            max_iter=1,
            history_size=config.history,
            line_search_fn="strong_wolfe",
            tolerance_grad=0.0,
            tolerance_change=0.0,
        )

    def run(self, count: int) -> Steps:
        group = self.opt.param_groups[0]
        group["max_iter"] = count
        group["max_eval"] = 25 * count + 1
        state = self.opt.state[group["params"][0]]
        before = state.get("n_iter", 0)
        start = float(self.opt.step(self.closure).detach())
        ran = state.get("n_iter", 0) - before
        # L-BFGS returns early only when it cannot move (a failed line search, zero gradient).
        return Steps(ran, ran < count, start)


class AdamStepper:
    """Adam: one objective evaluation and one step per iteration (``lr`` in radians and metres
    of the unknowns per step)."""

    def __init__(self, params: Sequence[torch.Tensor], closure: Closure, config: OptimiserConfig):
        self.closure = closure
        self.opt = torch.optim.Adam(params, lr=config.lr)

    def run(self, count: int) -> Steps:
        start = None
        for _ in range(count):
            loss = float(self.closure().detach())
            self.opt.step()
            start = loss if start is None else start
        return Steps(count, False, float("nan") if start is None else start)


STEPPERS: dict[str, type] = {"lbfgs": LBFGSStepper, "adam": AdamStepper}
"""Optimiser name (``optimiser.name`` in the configuration) → strategy class."""


def make_stepper(
    config: OptimiserConfig, params: Sequence[torch.Tensor], closure: Closure
) -> Stepper:
    """The strategy ``config.name`` names, over ``params`` (leaf tensors) and ``closure``."""
    return STEPPERS[config.name](params, closure, config)


class StopRule:
    """Stop a window early when an iteration lowers the objective by at most ``tolerance`` times
    its value: E_before − E_after ≤ tolerance · |E_before| (a rise stops too). With
    ``tolerance`` 0 it never stops, and a strategy may run many iterations per call.

    Each call of :meth:`should_stop` gives the objective before the latest iteration; the
    decrease is measured against the previous call's value.
    """

    def __init__(self, tolerance: float) -> None:
        self.tolerance = float(tolerance)
        self.last: float | None = None

    def chunk(self, remaining: int) -> int:
        """Iterations to run before the next test: one while the rule is active, else all."""
        return 1 if self.tolerance > 0 else remaining

    def should_stop(self, objective: float) -> bool:
        """Whether the decrease since the previous call is too small; remembers ``objective``."""
        last, self.last = self.last, objective
        if self.tolerance <= 0 or last is None:
            return False
        return last - objective <= self.tolerance * abs(last)
