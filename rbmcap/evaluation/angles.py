"""Clinical joint angles of each method's answer against the truth's (``rbmcap eval --angles``).

The answer and the truth of a sequence each become an SMPL motion (its own poses, translation
and betas) on the evaluation's body, and both go through the same
:func:`rbmcap.biomech.angles.clinical_angles` (Plug-in Gait). Per angle set (``LHipAngles``, ...)
and component (flexion, adduction, ...), the difference answer − truth is wrapped to
[−180°, 180°), squared and summed over every frame of every sequence; the RMS is
``sqrt(sum / frames)`` in degrees. Both are measured in the truth's lab frame (its direction of
progression): Plug-in Gait snaps that direction to the nearest lab axis, and on a walk near a
diagonal an answer's own could snap to the other axis and turn every angle measured from it
(pelvis, foot progression, thorax) by 90°. Where each is measured from its own
(:func:`saved_angle_errors` with ``shared_progression=False``), the sequences whose two directions
differ are listed.

A set's components are its planes in order: sagittal, frontal, transverse (elbow: sagittal only).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from rbmcap.biomech.angles import AngleTable, clinical_angles
from rbmcap.evaluation.saved import TRUTH, load_sequences
from rbmcap.motion.smpl_motion import SMPLMotion

CONVENTION = "plug-in-gait"
"""The convention the evaluation's angles follow."""

PLANES = ("sagittal", "frontal", "transverse")
"""The plane of each component of an angle set, in order."""

GOAL_DEG = {"sagittal": 3.0, "frontal": 6.0, "transverse": 6.0}
"""The accuracy asked of the best method: the RMS of every angle set, per plane (degrees)."""


@dataclass
class AngleErrors:
    """Squared angle differences of one method summed over the evaluated frames.

    Attributes:
        components: ``{set name: component names}`` in the convention's order.
        sum_sq: ``{set name: (K,)}`` summed squared differences (deg²).
        frames: ``{set name: (K,)}`` frames counted (those where both angles are finite).
        progression_differs: sequences whose answer and truth progress along different
            directions.
    """

    components: dict[str, tuple[str, ...]] = field(default_factory=dict)
    sum_sq: dict[str, np.ndarray] = field(default_factory=dict)
    frames: dict[str, np.ndarray] = field(default_factory=dict)
    progression_differs: list[str] = field(default_factory=list)

    def add(self, answer: AngleTable, truth: AngleTable, sequence: str = "") -> None:
        """Add one sequence's angles (``answer`` and ``truth`` of the same frames)."""
        for name, comps in truth.components.items():
            diff = angle_difference(answer.angles[name], truth.angles[name])
            ok = np.isfinite(diff)
            sq = np.where(ok, diff, 0.0) ** 2
            self.components.setdefault(name, comps)
            self.sum_sq[name] = self.sum_sq.get(name, 0.0) + sq.sum(axis=0)
            self.frames[name] = self.frames.get(name, 0) + ok.sum(axis=0)
        if not np.allclose(answer.progression, truth.progression, atol=1e-6):
            self.progression_differs.append(sequence)

    def rms(self) -> dict[str, dict[str, float]]:
        """``{set name: {component: RMS (deg)}}``; NaN where no frame counted."""
        out = {}
        for name, comps in self.components.items():
            n = np.asarray(self.frames[name], dtype=float)
            values = np.sqrt(self.sum_sq[name] / np.where(n > 0, n, np.nan))
            out[name] = {c: float(v) for c, v in zip(comps, values, strict=True)}
        return out

    def by_plane(self) -> dict[str, dict[str, float]]:
        """``{set name: {plane: RMS (deg)}}``, the components named by :data:`PLANES`."""
        return {
            name: dict(zip(PLANES, values.values(), strict=False))
            for name, values in self.rms().items()
        }

    def worst(self) -> dict[str, tuple[float, str]]:
        """Per plane, the largest RMS over the angle sets and the set it belongs to."""
        out: dict[str, tuple[float, str]] = {}
        for name, planes in self.by_plane().items():
            for plane, value in planes.items():
                if plane not in out or value > out[plane][0]:
                    out[plane] = (value, name)
        return out

    def meets_goal(self) -> bool:
        """Whether every angle set is within :data:`GOAL_DEG` in every plane."""
        return all(value <= GOAL_DEG[plane] for plane, (value, _) in self.worst().items())

    def to_dict(self) -> dict:
        """JSON-ready: ``rms_deg`` per set and component, ``worst_deg`` per plane
        (``[value, set]``), ``meets_goal`` and ``progression_differs``."""
        return {
            "rms_deg": self.rms(),
            "worst_deg": {p: list(v) for p, v in self.worst().items()},
            "meets_goal": self.meets_goal(),
            "progression_differs": list(self.progression_differs),
        }


def angle_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a − b`` of angles in degrees (any matching shapes), wrapped to [−180, 180)."""
    return (np.asarray(a) - np.asarray(b) + 180.0) % 360.0 - 180.0


def motion_angles(
    body, params: Mapping[str, np.ndarray], fps: float, progression: np.ndarray | None = None
) -> AngleTable:
    """The :data:`CONVENTION` angles of SMPL ``params`` (``poses`` (T, 24, 3) axis-angle,
    ``trans`` (T, 3) m, ``betas`` (B,)) posed on ``body`` at ``fps`` Hz, measured from the
    motion's own direction of progression or from ``progression`` (3,) where given."""
    motion = SMPLMotion(
        poses=np.asarray(params["poses"]),
        trans=np.asarray(params["trans"]),
        betas=np.asarray(params["betas"]),
        fps=fps,
    )
    return clinical_angles(motion, body, CONVENTION, progression)


def saved_angle_errors(folder, body, shared_progression: bool = True) -> dict[str, AngleErrors]:
    """Each method's :class:`AngleErrors` over a saved evaluation (``folder``: its output or its
    ``sequences/``, :mod:`rbmcap.evaluation.saved`), posed on ``body``. ``shared_progression``
    (default): the answers measured from the truth's direction of progression, else their own."""
    errors: dict[str, AngleErrors] = {}
    for seq in load_sequences(folder):
        truth = motion_angles(body, seq.params[TRUTH], seq.fps)
        along = truth.progression if shared_progression else None
        for key in (k for k in seq.methods if k != TRUTH):
            answer = motion_angles(body, seq.params[key], seq.fps, along)
            errors.setdefault(key, AngleErrors()).add(answer, truth, seq.name)
    return errors


def angles_markdown(errors: Mapping[str, AngleErrors], labels: Mapping[str, str]) -> list[str]:
    """The report's section: per method (``errors`` by key, ``labels`` their captions) the RMS
    of every angle set per plane, then each method's worst per plane against the goal."""
    if not errors:
        return []
    keys = list(errors)
    head = " | ".join(f"{k} {p[:4]}." for k in keys for p in PLANES)
    lines = [
        "",
        f"**Clinical angles against the truth's** ({CONVENTION}, RMS deg over frames; "
        "sagittal, frontal, transverse):",
        "",
        f"| angle set | {head} |",
        "|---|" + "---|" * (len(keys) * len(PLANES)),
    ]
    planes = {k: e.by_plane() for k, e in errors.items()}
    for name in next(iter(errors.values())).components:
        cells = [_deg(planes[k][name].get(p)) for k in keys for p in PLANES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    goal = ", ".join(f"{p} ≤ {v:g}°" for p, v in GOAL_DEG.items())
    for k, e in errors.items():
        worst = ", ".join(f"{p} {_deg(v)} ({n})" for p, (v, n) in e.worst().items())
        verdict = "holds" if e.meets_goal() else "does not hold"
        lines.append(f"- {labels[k]}: worst {worst}; goal {goal}: **{verdict}**")
        if e.progression_differs:
            lines.append(f"  (progression differs on {', '.join(e.progression_differs)})")
    return lines


def _deg(v: float | None) -> str:
    return "–" if v is None or not np.isfinite(v) else f"{v:.2f}"
