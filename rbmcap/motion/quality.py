"""Physical plausibility of a motion on a body: foot skate and ground penetration.

Definitions (the floor is z = 0, world frame, metres in, millimetres out):

* ``foot_skate_mm``: over the frames where the body's lowest point is on a foot and within
  ``contact_height`` (5 cm) of the floor, the mean horizontal distance that foot's joint (SMPL
  ``left_foot``/``right_foot``, the ball of the foot) travels to the next frame — its horizontal
  speed times the frame time. Planted feet give ~0; NaN when no frame is in contact.
* ``ground_penetration_mm``: the mean over frames of how far the lowest point (mesh vertex or
  joint) lies below the floor (0 for frames above it).
"""

from __future__ import annotations

import math

import numpy as np

from rbmcap.motion.kinematics import FOOT_JOINTS, MotionKinematics, standin_body
from rbmcap.motion.smpl_motion import SMPLMotion

CONTACT_HEIGHT_M = 0.05


def foot_skate_mm(
    motion: SMPLMotion,
    kin: MotionKinematics | None = None,
    contact_height: float = CONTACT_HEIGHT_M,
) -> float:
    """Mean per-frame horizontal slide (mm) of the foot the body stands on (module docstring)."""
    kin = kin or MotionKinematics(standin_body(), motion.betas)
    if motion.num_frames < 2:
        return math.nan
    z, vertex = kin.lowest_candidates(motion.poses, motion.trans)
    side = kin.vertex_side_foot(vertex)
    joints, _ = kin.pose(motion.poses, motion.trans)
    feet = joints[:, list(FOOT_JOINTS), :2]
    contact = (side >= 0) & (z < contact_height)
    contact[-1] = False
    frames = np.nonzero(contact)[0]
    if len(frames) == 0:
        return math.nan
    step = feet[frames + 1, side[frames]] - feet[frames, side[frames]]
    return float(np.linalg.norm(step, axis=-1).mean() * 1000.0)


def ground_penetration_mm(motion: SMPLMotion, kin: MotionKinematics | None = None) -> float:
    """Mean depth (mm) of the lowest mesh vertex or joint below the floor (module docstring)."""
    kin = kin or MotionKinematics(standin_body(), motion.betas)
    lowest = kin.lowest_vertex_heights(motion.poses, motion.trans)
    joints, _ = kin.pose(motion.poses, motion.trans)
    lowest = np.minimum(lowest, joints[..., 2].min(-1))
    return float(np.maximum(-lowest, 0.0).mean() * 1000.0)


def motion_info(motion: SMPLMotion, body=None) -> dict:
    """Summary of a motion for ``rbmcap motion info`` (quality measured on ``body``, default the
    stand-in, at the motion's betas and joint offsets)."""
    body = (body if body is not None else standin_body()).with_joint_offsets(motion.joint_offsets)
    kin = MotionKinematics(body, motion.betas)
    skate = foot_skate_mm(motion, kin)
    return {
        "name": motion.name,
        "frames": motion.num_frames,
        "fps": motion.fps,
        "duration_s": motion.duration_s,
        "num_joints": int(motion.poses.shape[1]),
        "betas": [float(b) for b in motion.betas],
        "gender": motion.gender,
        "foot_skate_mm": None if math.isnan(skate) else skate,
        "ground_penetration_mm": ground_penetration_mm(motion, kin),
    }
