"""Foot locking: keep every foot that rests on the floor from sliding, by leg IK.

:func:`ground_and_plant` pins the one lowest point of the body; a second foot on the floor at the
same time (double support, squats, landings) may still slide if the joint curves are not exactly
consistent. Here each foot's contact point is held where it touched down: the foot's horizontal
drift is accumulated over its contact and removed by re-aiming that leg's hip and knee (two-bone
IK) while the foot keeps its world orientation; after lift-off the correction fades out.
"""

from __future__ import annotations

import numpy as np
import roma
import torch

from rbmcap.geometry.rotations import rotation_between
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.motion.procedural.base import J, ease

CONTACT_M = 0.012  # a foot whose lowest sole vertex is this close to the floor is on it
FADE_S = 0.25  # the correction fades out over this long after lift-off


def foot_drift(soles: np.ndarray, side: np.ndarray, fps: float) -> np.ndarray:
    """(T, 2, 2) horizontal correction per foot (left, right) that cancels its sliding.

    Args:
        soles: (T, K, 3) world sole vertices (the body already on the floor).
        side: (K,) foot of each sole vertex.
        fps: frame rate (for the fade-out).
    """
    t_len = len(soles)
    out = np.zeros((t_len, 2, 2))
    fade = max(1, round(FADE_S * fps))
    for f in (0, 1):
        pts = soles[:, side == f]
        pivot = pts[..., 2].argmin(-1)
        on_floor = pts[np.arange(t_len), pivot, 2] < CONTACT_M
        drift = np.zeros(2)
        since_contact = fade
        for t in range(1, t_len):
            if on_floor[t] and on_floor[t - 1]:
                p = pivot[t - 1]
                drift = drift + pts[t, p, :2] - pts[t - 1, p, :2]
                since_contact = 0
                out[t, f] = -drift
            elif on_floor[t]:  # touch-down: start holding here
                drift = np.zeros(2)
                since_contact = 0
            else:
                since_contact += 1
                out[t, f] = -drift * (1.0 - ease(np.array(since_contact / fade)))
                if since_contact >= fade:
                    drift = np.zeros(2)
    return out


def lock_feet(
    poses: np.ndarray, trans: np.ndarray, kin: MotionKinematics, fps: float
) -> np.ndarray:
    """Poses (T, 24, 3) whose feet on the floor do not slide (see module docstring)."""
    soles = kin.soles(poses, trans)
    correction = foot_drift(soles, kin.sole_side, fps)
    if np.abs(correction).max() < 1e-6:
        return poses
    rot = roma.rotvec_to_rotmat(torch.from_numpy(poses))
    joints, grot = kin.pose(poses, trans)
    joints, grot = torch.from_numpy(joints), torch.from_numpy(grot)
    rest = torch.from_numpy(kin.rest_joints)
    for f, side in enumerate(("left", "right")):
        hip, knee, ankle = J[f"{side}_hip"], J[f"{side}_knee"], J[f"{side}_ankle"]
        target = joints[:, ankle].clone()
        target[:, :2] += torch.from_numpy(correction[:, f])
        g_hip, g_knee = _two_bone_ik(
            joints[:, hip],
            joints[:, knee],
            joints[:, ankle],
            target,
            grot[:, hip],
            grot[:, knee],
            rest[knee] - rest[hip],
            rest[ankle] - rest[knee],
        )
        g_pelvis, g_ankle = grot[:, J["pelvis"]], grot[:, ankle]
        rot[:, hip] = g_pelvis.transpose(-1, -2) @ g_hip
        rot[:, knee] = g_hip.transpose(-1, -2) @ g_knee
        rot[:, ankle] = g_knee.transpose(-1, -2) @ g_ankle
    return roma.rotmat_to_rotvec(rot).numpy()


def _two_bone_ik(a, b, c, target, g_a, g_b, rest_ab, rest_bc):
    """Turn the bones a→b (global g_a) and b→c (g_b) so that c reaches ``target``.

    The knee bends in its current plane (law of cosines), then the whole leg swings about the
    hip onto the target. Unreachable targets are approached as closely as the lengths allow.
    Returns the new global rotations of a and b, (T, 3, 3) each.
    """
    l_ab, l_bc = (b - a).norm(dim=-1), (c - b).norm(dim=-1)
    l_at = (target - a).norm(dim=-1).clamp((l_ab - l_bc).abs() + 1e-4, l_ab + l_bc - 1e-4)

    def angle(u, v):
        cos = (u * v).sum(-1) / (u.norm(dim=-1) * v.norm(dim=-1)).clamp_min(1e-12)
        return torch.arccos(cos.clamp(-1.0, 1.0))

    hip_now, knee_now = angle(c - a, b - a), angle(a - b, c - b)
    hip_goal = torch.arccos(((l_ab**2 + l_at**2 - l_bc**2) / (2 * l_ab * l_at)).clamp(-1, 1))
    knee_goal = torch.arccos(((l_ab**2 + l_bc**2 - l_at**2) / (2 * l_ab * l_bc)).clamp(-1, 1))
    axis = torch.cross(c - a, b - a, dim=-1)
    hinge = -g_b[..., :, 0]  # a straight knee has no plane: use its hinge (local x) axis
    axis = torch.where(axis.norm(dim=-1, keepdim=True) > 1e-6, axis, hinge)
    axis = axis / axis.norm(dim=-1, keepdim=True)
    r_hip = roma.rotvec_to_rotmat(axis * (hip_goal - hip_now)[..., None])
    r_knee = roma.rotvec_to_rotmat(axis * (knee_goal - knee_now)[..., None])
    g_a1 = r_hip @ g_a
    g_b1 = r_hip @ r_knee @ g_b
    c1 = a + (g_a1 @ rest_ab[..., None])[..., 0] + (g_b1 @ rest_bc[..., None])[..., 0]
    swing = rotation_between(c1 - a, target - a)
    return swing @ g_a1, swing @ g_b1
