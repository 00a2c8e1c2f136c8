"""What a comparison shows: one panel per method (the reference first) and the observed plates.

A :class:`Comparison` holds posed joints, not pictures: every panel's joints (T, 24, 3) m on the
same frames, each panel's per-frame MPJPE against the first panel (the truth when it comes from
an evaluation), and the plates the methods saw. Build one from a saved evaluation sequence
(:func:`comparison_from_sequence`) or from plain motions (:func:`comparison_from_motions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rbmcap.errors import DataError
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.motion.smpl_motion import SMPLMotion

if TYPE_CHECKING:
    from rbmcap.body.model import BodyModel


@dataclass(frozen=True)
class Plates:
    """Observed plate poses: pos (T, N, 3) m, rot (T, N, 3, 3) world-from-plate or None (point
    markers), valid (T, N) bool, names (N,)."""

    pos: np.ndarray
    rot: np.ndarray | None
    valid: np.ndarray
    names: tuple[str, ...]


@dataclass(frozen=True)
class Panel:
    """One method: its key, its label, its motion and the motion's joints (T, 24, 3) m."""

    key: str
    label: str
    motion: SMPLMotion
    joints: np.ndarray


@dataclass(frozen=True)
class Comparison:
    """Panels on the same frames (the first is the reference), the plates (or None) and the body
    model that posed them."""

    name: str
    fps: float
    panels: tuple[Panel, ...]
    plates: Plates | None
    body: BodyModel

    @property
    def frames(self) -> int:
        return len(self.panels[0].joints)

    def mpjpe_mm(self, panel: int) -> np.ndarray:
        """(T,) mean joint distance (mm, no alignment) of panel ``panel`` to the first panel."""
        diff = self.panels[panel].joints - self.panels[0].joints
        return 1000.0 * np.linalg.norm(diff, axis=-1).mean(-1)

    def check_frame(self, frame: int) -> int:
        """``frame`` if it exists; DataError naming the valid range otherwise."""
        if not 0 <= frame < self.frames:
            raise DataError(
                f"frame {frame} is out of range: {self.name!r} has {self.frames} "
                f"frames (0 … {self.frames - 1})"
            )
        return frame


def pose_panel(key: str, label: str, motion: SMPLMotion, body) -> Panel:
    """A panel of ``motion`` posed on ``body`` at the motion's shape."""
    body = body.with_joint_offsets(motion.joint_offsets)
    joints, _ = MotionKinematics(body, motion.betas).pose(motion.poses, motion.trans)
    return Panel(key, label, motion, joints)


def comparison_from_sequence(seq, body, methods: list[str] | None = None) -> Comparison:
    """A saved evaluation sequence (:class:`rbmcap.evaluation.saved.SavedSequence`) as a
    comparison: the truth, then each method in ``methods`` (default all it has, in order)."""
    keys = seq.methods if methods is None else ["truth", *(k for k in methods if k != "truth")]
    unknown = [k for k in keys if k not in seq.labels]
    if unknown:
        raise DataError(
            f"sequence {seq.name!r} has no method {', '.join(map(repr, unknown))} "
            f"(it has {', '.join(seq.methods)})"
        )
    panels = tuple(pose_panel(k, seq.labels[k], seq.motion(k), body) for k in keys)
    plates = Plates(seq.pos, seq.rot, seq.valid, seq.plate_names)
    return Comparison(seq.name, seq.fps, panels, plates, body)


def comparison_from_motions(motions: list[SMPLMotion], body) -> Comparison:
    """Plain motions side by side (no plates), cut to the shortest; the first is the reference
    the others' MPJPE is measured against. Their frame rates must agree."""
    if not motions:
        raise DataError("no motion to render")
    rates = {round(m.fps, 6) for m in motions}
    if len(rates) > 1:
        raise DataError(
            f"motions have different frame rates ({', '.join(map(str, rates))} Hz): "
            "resample them first (rbmcap motion ...)"
        )
    frames = min(m.num_frames for m in motions)
    panels = tuple(
        pose_panel(f"m{i}", m.name or f"motion {i}", m[:frames], body)
        for i, m in enumerate(motions)
    )
    return Comparison(panels[0].label, motions[0].fps, panels, None, body)
