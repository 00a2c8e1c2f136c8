"""What a solve returns: the fitted parameters (:class:`SMPLParams`) and the convergence record.

Public API (what evaluation and inference rely on): ``Solution.params``, ``Solution.at(it) ->
(SMPLParams, seconds)``, ``Solution.record`` (a :class:`ConvergenceRecord`), ``Solution.seconds``,
``Solution.ms_per_frame``, ``Solution.summary()``; ``poses``/``betas``/``trans`` read through
to ``params``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from rbmcap.body.params import SMPLParams
from rbmcap.errors import DataError

CONVERGED_RTOL = 0.02
CONVERGED_ATOL_MM = 0.1
"""Accuracy has converged at the first recorded iteration count after which MPJPE improves by at
most max(``CONVERGED_ATOL_MM``, ``CONVERGED_RTOL`` × best) (:meth:`ConvergenceRecord.converged_at`;
the evaluation reads each baseline off its curve there)."""


@dataclass
class ConvergenceRecord:
    """Objective (and accuracy, given the truth) against the optimiser iteration count.

    Each list has one entry per recorded sweep count (:mod:`rbmcap.baseline.sequence`: a sweep
    is one Levenberg–Marquardt step of every frame).

    Attributes:
        iterations: sweeps at each record.
        evaluations: Jacobian evaluations of every frame up to there (one per sweep).
        objective: total objective (see :mod:`rbmcap.baseline.objective`).
        seconds: solver wall time up to there, including the start, excluding the recording
            itself.
        mpjpe_mm: MPJPE (mm, no alignment) against the true joints, or None without truth.
        frames: frames solved.
    """

    iterations: list[int] = field(default_factory=list)
    evaluations: list[int] = field(default_factory=list)
    objective: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    mpjpe_mm: list[float] | None = None
    frames: int = 0

    @property
    def ms_per_frame(self) -> list[float]:
        """Milliseconds of solver time per frame at each record."""
        return [1e3 * s / max(self.frames, 1) for s in self.seconds]

    def converged_at(
        self, key: str = "mpjpe_mm", rtol: float = CONVERGED_RTOL, atol: float = CONVERGED_ATOL_MM
    ) -> int:
        """The first recorded iteration count after which ``key`` ('mpjpe_mm' or 'objective')
        improves by at most max(atol, rtol · best) any more: where accuracy has converged."""
        values = self.mpjpe_mm if key == "mpjpe_mm" else self.objective
        if not values:
            return self.iterations[-1] if self.iterations else 0
        for k, v in enumerate(values):
            best_after = min(values[k:])
            if v - best_after <= max(atol, rtol * abs(best_after)):
                return self.iterations[k]
        return self.iterations[-1]

    def to_dict(self) -> dict:
        """Plain lists (JSON-ready)."""
        return {
            "iterations": list(self.iterations),
            "evaluations": list(self.evaluations),
            "objective": [float(x) for x in self.objective],
            "seconds": [float(x) for x in self.seconds],
            "ms_per_frame": self.ms_per_frame,
            "mpjpe_mm": None if self.mpjpe_mm is None else [float(x) for x in self.mpjpe_mm],
            "frames": self.frames,
        }


@dataclass
class Solution:
    """A solved sequence (CPU tensors, float32).

    The answer is :attr:`params` (an :class:`SMPLParams`, the result type every method returns);
    ``poses``, ``betas`` and ``trans`` read through to it.

    Attributes:
        params: the fitted SMPL parameters: poses (T, 24, 3) axis-angle local rotations (joint 0
            global, world Z up), betas (B,) shared by the sequence, trans (T, 3) in metres.
        rotmats: (T, 24, 3, 3) the solver's local rotation matrices (the poses before their
            conversion to axis-angle).
        joints: (T, 24, 3) posed joints (m).
        record: the convergence record.
        seconds: solver wall time (the start included, recording excluded).
        iterations: sweeps run; evaluations: Jacobian evaluations of every frame (one a sweep).
        config: the solver configuration used (plain dict).
        snapshots: with ``solve(..., snapshots=True)``, the answer at each recorded sweep
            count; see :meth:`at`.
        converged: the solve stopped on the tolerance (False: it ran its sweeps).
        unseen: frames with no plate seen, held at the start.
    """

    params: SMPLParams
    rotmats: torch.Tensor
    joints: torch.Tensor
    record: ConvergenceRecord
    seconds: float
    iterations: int
    evaluations: int
    config: dict = field(default_factory=dict)
    snapshots: dict[int, SMPLParams] | None = None
    converged: bool = False
    unseen: int = 0

    @property
    def poses(self) -> torch.Tensor:
        """(T, 24, 3) axis-angle local rotations (``params.poses``)."""
        return self.params.poses

    @property
    def betas(self) -> torch.Tensor:
        """(B,) shape (``params.betas``)."""
        return self.params.betas

    @property
    def trans(self) -> torch.Tensor:
        """(T, 3) translation in metres (``params.trans``)."""
        return self.params.trans

    @property
    def frames(self) -> int:
        return self.params.frames

    @property
    def ms_per_frame(self) -> float:
        return 1e3 * self.seconds / max(self.frames, 1)

    def at(self, iterations: int) -> tuple[SMPLParams, float]:
        """The answer a solve stopped at ``iterations`` (a recorded count) returns, and the
        seconds it took to get there: (:class:`SMPLParams`, seconds).

        Raises:
            DataError: the solve kept no snapshots, or none at that count.
        """
        if not self.snapshots or iterations not in self.snapshots:
            kept = sorted(self.snapshots or ())
            raise DataError(
                f"no snapshot at {iterations} iterations (kept: {kept or 'none'}; solve with "
                "snapshots=True and a recorded count)"
            )
        k = self.record.iterations.index(iterations)
        return self.snapshots[iterations], self.record.seconds[k]

    def summary(self) -> dict:
        """Scalars (JSON-ready): frames, iterations, evaluations, seconds, ms/frame, final MPJPE."""
        mp = self.record.mpjpe_mm
        return {
            "frames": self.frames,
            "iterations": self.iterations,
            "evaluations": self.evaluations,
            "seconds": self.seconds,
            "ms_per_frame": self.ms_per_frame,
            "mpjpe_mm": float(mp[-1]) if mp else math.nan,
            "converged": self.converged,
            "unseen_frames": self.unseen,
        }
