"""Clinical joint angles of a motion: anatomical frames, a progression frame, a convention.

``clinical_angles(motion)`` poses the motion's body (:mod:`rbmcap.biomech.frames`), finds the
direction of progression and decomposes each joint's rotation as its convention says
(:mod:`rbmcap.biomech.conventions`). ``joint_angles(segments)`` does the last step on any
segment frames, e.g. those a Plug-in Gait C3D carries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.atomic import write_text_atomic
from rbmcap.biomech.conventions import AngleSet, convention
from rbmcap.biomech.frames import Landmarks, segment_rotations
from rbmcap.body import load_body_model
from rbmcap.errors import DataError

SIDES = (("L", "left"), ("R", "right"))
MIN_WALK_M = 0.5
"""Below this much horizontal travel of the pelvis the progression follows the pelvis's facing."""


@dataclass
class AngleTable:
    """Joint angles over a take.

    Attributes:
        angles: ``{set name: (T, K) degrees}``, e.g. ``LHipAngles``; K components.
        components: ``{set name: component names}``.
        fps: frames per second.
        convention: the convention's name.
        progression: (3,) unit world direction of progression.
    """

    angles: dict[str, np.ndarray]
    components: dict[str, tuple[str, ...]]
    fps: float
    convention: str
    progression: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0]))

    @property
    def num_frames(self) -> int:
        return len(next(iter(self.angles.values())))

    def columns(self) -> list[str]:
        """CSV column names after frame and time: ``LHipAngles.flexion`` and so on."""
        return [f"{n}.{c}" for n, comps in self.components.items() for c in comps]

    def to_csv(self, path: str | Path) -> Path:
        """Write one row per frame: frame, time (s), then :meth:`columns` (degrees)."""
        values = np.concatenate([self.angles[n] for n in self.components], axis=1)
        rows = [",".join(["frame", "time_s", *self.columns()])]
        for t, row in enumerate(values):
            cells = ",".join("" if not np.isfinite(v) else f"{v:.4f}" for v in row)
            rows.append(f"{t},{t / self.fps:.6f},{cells}")
        return write_text_atomic(Path(path), "\n".join(rows) + "\n")


def clinical_angles(
    motion,
    body=None,
    convention_name: str = "plug-in-gait",
    progression: np.ndarray | None = None,
    landmarks: Landmarks | None = None,
) -> AngleTable:
    """Every angle set of ``convention_name`` for an SMPL motion on ``body`` (default: the
    stand-in of the motion's gender), shaped by the motion's betas, measured from the (3,)
    direction of ``progression`` (default: found from the motion, :func:`progression_direction`;
    give another motion's to measure two motions of one walk in one lab frame). ``landmarks``:
    the subject's own from a static trial (:mod:`rbmcap.biomech.landmarks`) instead of the
    body's."""
    if body is None:
        body = load_body_model("standin", gender=motion.gender)
    body = body.with_joint_offsets(motion.joint_offsets)
    segments = segment_rotations(body, motion.poses, motion.betas, landmarks)
    if progression is None:
        joints, _ = body.pose_joints(
            torch.as_tensor(motion.poses, dtype=torch.float32),
            betas=torch.as_tensor(np.asarray(motion.betas), dtype=torch.float32),
            trans=torch.as_tensor(motion.trans, dtype=torch.float32),
        )
        pelvis = joints[:, 0].double().numpy()
        snap = convention_name == "plug-in-gait"
        progression = progression_direction(pelvis, segments["pelvis"], snap_to_axes=snap)
    table = joint_angles(segments, convention_name, progression)
    table.fps = float(motion.fps)
    return table


def joint_angles(
    segments: Mapping[str, np.ndarray], convention_name: str, progression: np.ndarray
) -> AngleTable:
    """The angle sets of ``convention_name`` from world-from-segment rotations
    ``{name: (T, 3, 3)}`` (:data:`rbmcap.biomech.frames.SEGMENTS` names, Plug-in Gait's axes)
    and a (3,) direction of progression."""
    frames = dict(segments)
    frames["progression"] = np.broadcast_to(
        progression_frame(progression), next(iter(segments.values())).shape
    )
    angles, components = {}, {}
    for definition in convention(convention_name):
        for letter, side in SIDES:
            name = letter + definition.name
            angles[name] = _angle_set(definition, side, frames)
            components[name] = definition.components
    return AngleTable(angles, components, 0.0, convention_name, np.asarray(progression))


def progression_direction(
    pelvis_positions: np.ndarray, pelvis_rotations: np.ndarray, snap_to_axes: bool
) -> np.ndarray:
    """The (3,) horizontal unit direction of progression: the pelvis's travel from first to
    last frame (T, 3), or its mean facing (the X of its frames (T, 3, 3)) when it travels less
    than :data:`MIN_WALK_M`; snapped to the nearest of ±X, ±Y where ``snap_to_axes`` (as Plug-in
    Gait does)."""
    travel = pelvis_positions[-1] - pelvis_positions[0]
    travel[2] = 0.0
    if np.linalg.norm(travel) < MIN_WALK_M:
        travel = pelvis_rotations[:, :, 0].mean(axis=0)
        travel[2] = 0.0
    if np.linalg.norm(travel) < 1e-9:
        raise DataError("no direction of progression: the pelvis faces straight up or down")
    if snap_to_axes:
        k = int(np.argmax(np.abs(travel[:2])))
        travel = np.sign(travel[k]) * np.eye(3)[k]
    return travel / np.linalg.norm(travel)


def progression_frame(direction: np.ndarray) -> np.ndarray:
    """The world-from-progression rotation (3, 3): X along ``direction``, Z up, Y to the left."""
    x = np.asarray(direction, dtype=np.float64)
    z = np.array([0.0, 0.0, 1.0])
    return np.stack([x, np.cross(z, x), z], axis=-1)


def _angle_set(definition: AngleSet, side: str, frames: Mapping[str, np.ndarray]) -> np.ndarray:
    """(T, K) degrees of one angle set on one side."""
    proximal = frames[definition.proximal.format(side=side)] @ definition.proximal_axes
    distal = frames[definition.distal.format(side=side)] @ definition.distal_axes
    relative = torch.as_tensor(np.swapaxes(proximal, -1, -2) @ distal)
    euler = roma.rotmat_to_euler(definition.sequence, relative, degrees=True).numpy()
    signs = np.asarray(definition.left if side == "left" else definition.right)
    if definition.sequence[0] == definition.sequence[2] and signs[definition.order.index(1)] < 0:
        # proper Euler angles (Y-X-Y): the middle one comes in [0°, 180°]; where its sign turns
        # it negative (the right side's mirror), read the same rotation's other triple
        # (a + 180°, −b, c + 180°), so that the angle reported (elevation) is positive
        euler = euler * [1.0, -1.0, 1.0] + [180.0, 0.0, 180.0]
    offset = np.asarray(definition.offset[: len(definition.order)])
    values = signs * euler[:, list(definition.order)] + offset
    return (values + 180.0) % 360.0 - 180.0
