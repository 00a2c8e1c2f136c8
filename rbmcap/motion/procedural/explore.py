"""Smooth random exploration of the joint space inside the declared joint limits."""

from __future__ import annotations

import numpy as np
import roma
import torch
from scipy.interpolate import PchipInterpolator

from rbmcap.motion.limits import JointLimits
from rbmcap.motion.procedural.base import Built, J, PoseTrack, smooth_noise

# How far from rest towards its limits each joint may explore: the legs little (the body keeps
# standing), the spine and neck moderately, the arms most of the way.
_SPAN = {
    "hip": 0.3,
    "knee": 0.3,
    "ankle": 0.3,
    "foot": 0.3,
    "spine": 0.45,
    "neck": 0.5,
    "head": 0.5,
    "collar": 0.5,
    "shoulder": 0.75,
    "elbow": 0.8,
    "wrist": 0.6,
    "hand": 0.6,
}


_REST = {
    "left_shoulder": np.radians([0.0, 0.0, -75.0]),
    "right_shoulder": np.radians([0.0, 0.0, 75.0]),
}


def _span(joint: str) -> float:
    return next(v for k, v in _SPAN.items() if k in joint)


def explore(rng: np.random.Generator, fps: float, kin) -> Built:
    """Every joint drifts through random key poses inside its limits (monotone cubic between
    keys, so nothing overshoots), 0.6-1.5 s apart, while the body stands and turns slowly. Keys
    are drawn between the rest pose and a fraction of the way to each limit."""
    limits = JointLimits.load()
    duration = rng.uniform(5.0, 10.0)
    t = np.arange(round(duration * fps)) / fps
    track = PoseTrack(len(t))
    poses = np.zeros((len(t), 24, 3))
    for name, j in J.items():
        if name == "pelvis":
            continue
        rest = np.clip(_REST.get(name, np.zeros(3)), limits.lower[j], limits.upper[j])
        lo = rest + _span(name) * (limits.lower[j] - rest)
        hi = rest + _span(name) * (limits.upper[j] - rest)
        # Start and end at the rest pose (arms lowered) so clips join up with standing.
        keys_t = np.concatenate([[0.0], np.cumsum(rng.uniform(0.6, 1.5, 20))])
        keys_t = keys_t[keys_t < duration - 0.4]
        keys_t = np.append(keys_t, duration)
        keys = rng.uniform(lo, hi, (len(keys_t), 3))
        keys[0] = keys[-1] = rest
        poses[:, j] = PchipInterpolator(keys_t, keys, axis=0)(t)
    # Keep the soles roughly flat and the body upright: legs mirror-symmetric half of the time.
    if rng.uniform() < 0.5:
        for a, b in (
            ("left_hip", "right_hip"),
            ("left_knee", "right_knee"),
            ("left_ankle", "right_ankle"),
        ):
            poses[:, J[b]] = poses[:, J[a]] * np.array([1.0, -1.0, -1.0])
    track.rot[:] = roma.rotvec_to_rotmat(torch.from_numpy(poses))
    heading = rng.uniform(0, 360) + np.cumsum(smooth_noise(rng, t, 25, 4)) / fps
    track.root(heading, pitch=4 + smooth_noise(rng, t, 6, 3), roll=smooth_noise(rng, t, 4, 3))
    return Built(track, None, {"duration_s": duration})
