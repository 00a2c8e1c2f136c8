"""What an evaluation collects per method: per-sequence metrics, timings, joint errors and the
solvers' convergence curves, and how they are aggregated over the split."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from rbmcap.baseline import ConvergenceRecord
from rbmcap.body.params import SMPLParams
from rbmcap.evaluation.angles import AngleErrors, motion_angles
from rbmcap.evaluation.sequences import Sequence
from rbmcap.metrics import evaluate_sequence
from rbmcap.skeleton import SMPL_JOINT_NAMES

if TYPE_CHECKING:
    from rbmcap.body.model import BodyModel


@dataclass
class MethodResult:
    """One method over the split: per-sequence metrics, timing and joint errors."""

    name: str
    label: str
    sequences: list[dict] = field(default_factory=list)  # name, frames, metrics means, ms/frame
    per_frame: list[dict[str, np.ndarray]] = field(default_factory=list)
    per_joint_mm: np.ndarray | None = None  # (24,) summed joint error until finished, then mean
    seconds: float = 0.0
    frames: int = 0
    convergence: list[dict] = field(default_factory=list)  # the split's curve (solvers)
    converged_ms_per_frame: float | None = None
    iterations: int | None = None
    answers: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # sequence → params
    angles: AngleErrors | None = None  # clinical angles against the truth's, when scored

    @property
    def ms_per_frame(self) -> float:
        if self.converged_ms_per_frame is not None:
            return self.converged_ms_per_frame
        return 1e3 * self.seconds / max(self.frames, 1)

    def averages(self) -> dict[str, float]:
        """Per-frame averages over all sequences (every frame counts once)."""
        keys = self.per_frame[0].keys() if self.per_frame else []
        out = {}
        for k in keys:
            values = np.concatenate([pf[k] for pf in self.per_frame])
            values = values[np.isfinite(values)]
            out[k] = float(values.mean()) if values.size else float("nan")
        out["ms_per_frame"] = self.ms_per_frame
        return out

    def joint_error_mm(self, joints) -> float | None:
        """Mean per-frame error (mm) over the SMPL ``joints`` (names); None without joints or
        per-joint errors."""
        if self.per_joint_mm is None or not joints:
            return None
        return float(np.mean([self.per_joint_mm[SMPL_JOINT_NAMES.index(j)] for j in joints]))

    def finished(self) -> MethodResult:
        """Itself, the joint errors summed so far turned into their mean per frame."""
        if self.per_joint_mm is not None:
            self.per_joint_mm = self.per_joint_mm / max(self.frames, 1)
        return self


@dataclass(frozen=True)
class Scorer:
    """Scores a method's answer for one sequence against its truth (docs/metrics.md).

    Attributes:
        body: the body both answer and truth are posed with.
        fps: frame rate (Hz) of the data.
        vertices: compute V2V (a full mesh forward per frame).
        angles: compare the answer's clinical joint angles with the truth's
            (:mod:`rbmcap.evaluation.angles`).
    """

    body: BodyModel
    fps: float
    vertices: bool = True
    angles: bool = False
    truth_angles: dict = field(default_factory=dict, repr=False, compare=False)
    """The truth's angles per sequence name, computed for the first method scored on it."""

    def record(self, result: MethodResult, seq: Sequence, params: SMPLParams, seconds: float):
        """Add ``params`` (the answer for ``seq``, found in ``seconds``) to ``result``."""
        m = evaluate_sequence(
            self.body, params.numpy(), seq.truth, self.fps, vertices=self.vertices
        )
        with torch.no_grad():
            pj, _ = self.body.pose_joints(params.poses, params.betas, params.trans)
        err = 1e3 * (pj - torch.from_numpy(np.array(seq.joints))).norm(dim=-1).sum(0).numpy()
        result.per_joint_mm = err if result.per_joint_mm is None else result.per_joint_mm + err
        result.per_frame.append(m.per_frame)
        result.answers[seq.name] = {k: np.asarray(v) for k, v in params.numpy().items()}
        if self.angles:
            self.record_angles(result, seq, result.answers[seq.name])
        result.sequences.append(
            {
                "sequence": seq.name,
                "frames": seq.frames,
                "ms_per_frame": 1e3 * seconds / seq.frames,
                **m.mean,
            }
        )
        result.seconds += seconds
        result.frames += seq.frames

    def record_angles(self, result: MethodResult, seq: Sequence, answer: dict) -> None:
        """Add the clinical angles of ``answer`` (``poses``/``betas``/``trans`` arrays) against
        those of ``seq``'s truth to ``result.angles``."""
        if result.angles is None:
            result.angles = AngleErrors()
        if seq.name not in self.truth_angles:
            self.truth_angles[seq.name] = motion_angles(self.body, seq.truth, self.fps)
        truth = self.truth_angles[seq.name]
        answer_angles = motion_angles(self.body, answer, self.fps, truth.progression)
        result.angles.add(answer_angles, truth, seq.name)


def methods_json(methods: dict[str, MethodResult]) -> dict[str, dict]:
    """Each method as ``metrics.json`` holds it: label, frames, sequences, iterations, its time
    over the network's, ``metrics`` (:meth:`MethodResult.averages`), per-joint errors and the
    convergence curve."""
    averages = {k: m.averages() for k, m in methods.items()}
    net_ms = averages["network"]["ms_per_frame"] if "network" in averages else None
    return {
        k: {
            "label": m.label,
            "frames": m.frames,
            "sequences": len(m.sequences),
            "iterations": m.iterations,
            "time_ratio_to_network": averages[k]["ms_per_frame"] / net_ms if net_ms else None,
            "metrics": averages[k],
            "per_joint_mm": None if m.per_joint_mm is None else m.per_joint_mm.tolist(),
            "angles": None if m.angles is None else m.angles.to_dict(),
            "convergence": m.convergence,
        }
        for k, m in methods.items()
    }


def aggregate_records(records: list[dict]):
    """The solver's convergence records (``ConvergenceRecord.to_dict()``) of all sequences as
    one :class:`~rbmcap.baseline.ConvergenceRecord`: frames, evaluations, objectives and seconds
    summed, MPJPE averaged over frames, at every sweep count any record has. A solve that
    stopped (converged) before a count is counted there as it stopped; between two of its own
    records, at its earlier one. None without records."""
    if not records:
        return None
    iters = sorted({it for c in records for it in c["iterations"]})
    frames = sum(c["frames"] for c in records)

    def at(c, it):
        """Index of record ``c``'s entry at sweep count ``it``."""
        return max(k for k, own in enumerate(c["iterations"]) if own <= it)

    index = [[at(c, it) for it in iters] for c in records]

    def total(key):
        return [sum(c[key][ix[k]] for c, ix in zip(records, index)) for k in range(len(iters))]

    has_mpjpe = all(c.get("mpjpe_mm") is not None for c in records)
    return ConvergenceRecord(
        iterations=iters,
        evaluations=total("evaluations"),
        objective=total("objective"),
        seconds=total("seconds"),
        mpjpe_mm=[
            sum(c["mpjpe_mm"][ix[k]] * c["frames"] for c, ix in zip(records, index)) / frames
            for k in range(len(iters))
        ]
        if has_mpjpe
        else None,
        frames=frames,
    )
