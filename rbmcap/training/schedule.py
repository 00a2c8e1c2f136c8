"""The learning-rate schedule: a linear warm-up, then step decay (``conf/scheduler``).

:func:`warmup_step_decay` is the ``_target_`` of the ``scheduler`` group; the module calls the
partial Hydra builds with its optimiser and the run's number of optimiser steps.
"""

from __future__ import annotations

from functools import partial

import torch


def lr_factor(step: int, total: int, warmup: float, decay: float, decay_every: float) -> float:
    """The learning rate at optimiser step ``step`` of ``total``, as a multiple of the base rate:
    a linear ramp from 1/n to 1 over the first n = ``warmup`` × total steps, then ×``decay``
    every ``decay_every`` × total steps (counted from the start)."""
    ramp_steps = round(total * warmup)
    every = max(1, round(total * decay_every))
    ramp = min(1.0, (step + 1) / ramp_steps) if ramp_steps > 0 else 1.0
    return ramp * decay ** (step // every)


def warmup_step_decay(
    optimizer: torch.optim.Optimizer,
    total_steps: int,
    *,
    warmup: float,
    decay: float,
    decay_every: float,
) -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule of :func:`lr_factor` over ``total_steps`` optimiser steps, stepped once per
    optimiser step. ``warmup`` and ``decay_every`` are fractions of ``total_steps``; ``decay`` is
    the factor applied at each decay step."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        partial(lr_factor, total=total_steps, warmup=warmup, decay=decay, decay_every=decay_every),
    )
