"""Building blocks of procedural motion: pose tracks, timing curves, and putting a body on the
floor with planted feet.

Angles in the generators are anatomical and in degrees (flexion, abduction...). The sign
conventions of SMPL's canonical axes (x to the subject's left, y up, z forward) are kept here, in
:class:`PoseTrack`'s named helpers, so the generators read like descriptions of movement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import roma
import torch

from rbmcap.geometry.rotations import axis_rotmat
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.skeleton import SMPL_JOINT_NAMES

J = {name: i for i, name in enumerate(SMPL_JOINT_NAMES)}
SIDES = ("left", "right")
_MIRROR = {"left": 1.0, "right": -1.0}


class PoseTrack:
    """Local joint rotations over T frames, composed from single-axis turns (degrees).

    ``turn`` composes in the joint's own frame (R ← R·A), ``pre_turn`` in its parent's frame
    (R ← A·R). Angles are arrays of shape (T,) or scalars.
    """

    def __init__(self, num_frames: int) -> None:
        self.num_frames = num_frames
        eye = torch.eye(3, dtype=torch.float64)
        self.rot = eye.expand(num_frames, 24, 3, 3).clone()

    def _axis(self, axis: str, deg) -> torch.Tensor:
        angle = np.radians(np.asarray(deg, dtype=np.float64))
        angle = np.array(np.broadcast_to(angle, (self.num_frames,)))
        return axis_rotmat(axis, torch.from_numpy(angle))

    def turn(self, joint: str, axis: str, deg) -> PoseTrack:
        j = J[joint]
        self.rot[:, j] = self.rot[:, j] @ self._axis(axis, deg)
        return self

    def pre_turn(self, joint: str, axis: str, deg) -> PoseTrack:
        j = J[joint]
        self.rot[:, j] = self._axis(axis, deg) @ self.rot[:, j]
        return self

    # ---------------------------------------------------------------- anatomical helpers
    def hip(self, side: str, flexion=0.0, abduction=0.0, rotation=0.0) -> PoseTrack:
        """Thigh forward (flexion), outward (abduction), turned about its axis (rotation)."""
        m = _MIRROR[side]
        joint = f"{side}_hip"
        return (
            self.turn(joint, "z", m * abduction)
            .turn(joint, "x", -flexion)
            .turn(joint, "y", m * rotation)
        )

    def knee(self, side: str, flexion) -> PoseTrack:
        return self.turn(f"{side}_knee", "x", flexion)

    def ankle(self, side: str, dorsiflexion=0.0, eversion=0.0) -> PoseTrack:
        """Toes up (dorsiflexion) and sole turned outward (eversion)."""
        return self.turn(f"{side}_ankle", "x", -dorsiflexion).turn(
            f"{side}_ankle", "z", _MIRROR[side] * eversion
        )

    def toes(self, side: str, extension) -> PoseTrack:
        return self.turn(f"{side}_foot", "x", -extension)

    def spine(self, flexion=0.0, twist=0.0, side_bend=0.0, shares=(0.4, 0.35, 0.25)) -> PoseTrack:
        """Bend the trunk forward (flexion), twist it to the left, bend it to the left; the
        total is shared between spine1..3."""
        for joint, share in zip(("spine1", "spine2", "spine3"), shares, strict=True):
            flex, tw, sb = (np.asarray(a) * share for a in (flexion, twist, side_bend))
            self.turn(joint, "x", flex).turn(joint, "y", tw).turn(joint, "z", -sb)
        return self

    def neck(self, flexion=0.0, twist=0.0) -> PoseTrack:
        for joint, share in (("neck", 0.6), ("head", 0.4)):
            self.turn(joint, "x", np.asarray(flexion) * share).turn(
                joint, "y", np.asarray(twist) * share
            )
        return self

    def shoulder(self, side: str, lowered=80.0, forward=0.0, twist=0.0, collar=0.0) -> PoseTrack:
        """Arm lowered from the T-pose by ``lowered`` (90 hangs it), then swung forward about
        the body's left-right axis (negative swings back); ``collar`` lifts the shoulder girdle."""
        m = _MIRROR[side]
        joint = f"{side}_shoulder"
        self.turn(joint, "x", m * twist).pre_turn(joint, "z", -m * np.asarray(lowered))
        self.pre_turn(joint, "x", -np.asarray(forward))
        return self.turn(f"{side}_collar", "z", m * np.asarray(collar))

    def elbow(self, side: str, flexion) -> PoseTrack:
        return self.turn(f"{side}_elbow", "y", -_MIRROR[side] * np.asarray(flexion))

    def wrist(self, side: str, flexion=0.0) -> PoseTrack:
        return self.turn(f"{side}_wrist", "z", -_MIRROR[side] * np.asarray(flexion))

    def root(self, heading=0.0, pitch=0.0, roll=0.0, twist=0.0) -> PoseTrack:
        """Global orientation: the pelvis tilted forward (pitch), to the left (roll), turned
        (twist) in the body frame, stood upright in the Z-up world and turned to ``heading``
        degrees about world Z (0 faces -Y). Call once, last."""
        self.turn("pelvis", "y", twist).turn("pelvis", "x", pitch).turn("pelvis", "z", -roll)
        self.pre_turn("pelvis", "x", 90.0)
        return self.pre_turn("pelvis", "z", heading)

    def rotvecs(self) -> np.ndarray:
        """(T, 24, 3) axis-angle poses."""
        return roma.rotmat_to_rotvec(self.rot).numpy()


@dataclass
class Built:
    """What a generator returns: the poses, the flight profile and its parameters."""

    track: PoseTrack
    flight: np.ndarray | None = None
    """(T,) height of the lowest point above the floor (0 = standing on it); None: always 0."""
    params: dict[str, Any] = field(default_factory=dict)
    trans: np.ndarray | None = None
    """(T, 3) root translation when the generator places the body itself (footstep-planned
    gaits); None: :func:`ground_and_plant` stands it on the floor."""
    stance: np.ndarray | None = None
    """(T, 2) whether each foot is planted, with ``trans``."""


# ------------------------------------------------------------------------ timing curves
def bump(phase: np.ndarray, centre: float, sharpness: float) -> np.ndarray:
    """Periodic bump in a cycle phase (period 1), 1 at ``centre``, narrower for larger
    ``sharpness`` (a von Mises shape)."""
    return np.exp(sharpness * (np.cos(2 * np.pi * (phase - centre)) - 1.0))


def ease(x: np.ndarray) -> np.ndarray:
    """Smooth 0→1 step on [0, 1] (zero slope at both ends), clamped outside."""
    x = np.clip(x, 0.0, 1.0)
    return x * x * x * (x * (6 * x - 15) + 10)


def repetitions(
    t: np.ndarray, starts: np.ndarray, rise: float, hold: float, fall: float
) -> np.ndarray:
    """Sum of smooth 0→1→0 pulses, one starting at each time in ``starts``."""
    out = np.zeros_like(t)
    for s in starts:
        out += ease((t - s) / rise) * ease((s + rise + hold + fall - t) / fall)
    return np.clip(out, 0.0, 1.0)


def smooth_noise(rng: np.random.Generator, t: np.ndarray, amplitude: float, period: float):
    """Smooth random wobble: three sinusoids with random phases and periods near ``period``."""
    out = np.zeros_like(t)
    for _ in range(3):
        f = 1.0 / (period * rng.uniform(0.6, 1.6))
        out += np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
    return amplitude * out / 3.0


# ----------------------------------------------------------------------- on the floor
def ground_and_plant(
    poses: np.ndarray, kin: MotionKinematics, flight: np.ndarray | None, fps: float
) -> np.ndarray:
    """Root translation (T, 3) that stands the posed body on the floor with planted feet.

    Height: each frame's lowest mesh point sits at ``flight`` (0 for standing frames). Ground
    path: while on the floor, the lowest sole vertex of the previous frame keeps its horizontal
    position (the stance foot is planted, the body moves over it); in the air the horizontal
    velocity blends linearly from take-off to landing. The pelvis starts above the origin.
    """
    t = len(poses)
    flight = np.zeros(t) if flight is None else np.asarray(flight, dtype=np.float64)
    lowest, _, soles = kin.contact_points(poses)
    z = -lowest + flight
    grounded = flight <= 1e-9
    step = np.full((t, 2), np.nan)
    step[0] = 0.0
    for i in range(1, t):
        if grounded[i - 1] and grounded[i]:
            a = int(np.argmin(soles[i - 1, :, 2]))
            step[i] = soles[i - 1, a, :2] - soles[i, a, :2]
    missing = np.isnan(step[:, 0])
    if missing.any() and (~missing).any():
        known = np.nonzero(~missing)[0]
        for c in range(2):
            step[missing, c] = np.interp(np.nonzero(missing)[0], known, step[known, c])
    xy = np.cumsum(np.nan_to_num(step), axis=0)
    trans = np.concatenate([xy, z[:, None]], axis=1)
    trans[:, :2] -= trans[0, :2] + kin.rest_joints[0, :2]
    return trans


def settle_height(
    poses: np.ndarray, trans: np.ndarray, kin: MotionKinematics, stance: np.ndarray
) -> np.ndarray:
    """Fine-tune a planned body's height so the mesh touches the floor exactly while a foot is
    planted (the plan uses joint geometry; the mesh sole differs by millimetres), blending the
    correction across flight, and never lets it sink below the floor."""
    lowest, _ = kin.lowest_candidates(poses, trans)
    down = np.asarray(stance).any(1)
    frames = np.arange(len(poses))
    if down.any():
        shift = np.interp(frames, frames[down], -lowest[down])
    else:
        shift = np.zeros(len(poses))
    shift = np.maximum(shift, -(lowest))  # lowest + shift >= 0
    out = trans.copy()
    out[:, 2] += shift
    return out
