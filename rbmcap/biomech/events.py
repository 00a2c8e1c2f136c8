"""Gait events (foot strikes and foot offs) from kinematics: the heel and toe of each foot.

The two events come from two established kinematic methods, each chosen for the event it marks
best on a real walk (``docs/gait_events.md`` has the comparison):

* **Foot Strike** — the end of the heel's descent, by heel height and velocity thresholds
  (the family of Hreljac & Marshall 2000 and Ghoussayni et al. 2004): after each swing, the first
  frame where the heel is within :data:`STRIKE_BAND_M` of its contact height, has slowed below
  :data:`STRIKE_SPEED_M_S` and no longer descends faster than :data:`STRIKE_DESCENT_M_S`. The
  speed gate keeps a heel skimming low over the floor late in swing from counting; the contact
  height is a low percentile of the heel's height over the take, so a body that floats or sinks
  by centimetres is handled. Zeni's heel criterion (the heel furthest ahead of the pelvis) fires
  while the heel is still in the air, several frames early.
* **Foot Off** — Zeni et al. (2008), the coordinate-based method: the toe at its most posterior
  position relative to the pelvis along the walking direction. It needs no floor height, so it
  reads the same on markers and on a body that floats, and it marks the toe leaving the ground
  where height thresholds fire early (the toe marker rises as the heel lifts).

The walking direction is found from the data: per frame, the horizontal velocity of the pelvis
smoothed over :data:`DIRECTION_SMOOTH_S` (so curved walks and walks in any direction work).
Events need the body to walk: turning on the spot or standing gives no foot offs.

A strike whose heel is still descending in the contact band at the last frame is reported at the
last frame (the contact happens there or after it: the take ends on it).

All positions are metres in the world frame, Z up; frames are 0-based indices into the motion,
times are ``frame / fps`` seconds from its first frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.ndimage import gaussian_filter1d
from scipy.signal import find_peaks

from rbmcap.markers.markerset import load_marker_set
from rbmcap.motion.kinematics import standin_body

SIDES = ("Left", "Right")
KINDS = ("Foot Strike", "Foot Off")
FOOT_MARKERS = "plug-in-gait"
"""The marker set whose ``LHEE``/``LTOE``/``RHEE``/``RTOE`` mark heel and toe on the body."""
HEEL_TOE = (("LHEE", "LTOE"), ("RHEE", "RTOE"))
PELVIS_JOINT = 0

STRIKE_SPEED_M_S = 1.0
"""The heel has landed once its speed falls below this (m/s)…"""
STRIKE_DESCENT_M_S = 0.1
"""…and its downward speed below this (m/s)."""
STRIKE_BAND_M = 0.025
"""…while it is within this height (m) of its contact height."""
SWING_RISE_M = 0.04
"""The heel is in swing once it rises this far (m) above its contact height."""
CONTACT_PERCENTILE = 5.0
"""The heel's contact height: this percentile of its height over the take."""
DIRECTION_SMOOTH_S = 0.25
"""Gaussian sigma (s) of the pelvis velocity that gives the walking direction."""
MIN_WALK_SPEED_M_S = 0.15
"""Slower than this (pelvis, horizontal), the body is not walking: no foot off is looked for."""
TOE_PROMINENCE_M = 0.1
"""A foot off's toe must lie this much (m) behind the toe's positions on both sides of it."""


@dataclass(frozen=True)
class GaitEvent:
    """One gait event.

    Attributes:
        side: ``'Left'`` or ``'Right'`` (C3D ``EVENT:CONTEXTS``).
        kind: ``'Foot Strike'`` or ``'Foot Off'`` (C3D ``EVENT:LABELS``).
        frame: 0-based frame index into the motion or capture.
        time: seconds from the first frame (``frame / fps`` for detected events).
    """

    side: str
    kind: str
    frame: int
    time: float


def walking_direction(pelvis: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame horizontal walking direction from the pelvis.

    Args:
        pelvis: (T, 3) pelvis positions (m, Z up).
        fps: frame rate.

    Returns:
        (T, 2) unit horizontal directions (x, y) and (T,) horizontal speeds (m/s) of the smoothed
        pelvis velocity; frames slower than :data:`MIN_WALK_SPEED_M_S` take the direction of the
        nearest walking frame (all zero when no frame walks).
    """
    sigma = max(DIRECTION_SMOOTH_S * fps, 1.0)
    xy = gaussian_filter1d(
        np.asarray(pelvis, dtype=np.float64)[:, :2], sigma, axis=0, mode="nearest"
    )
    vel = np.gradient(xy, axis=0) * fps if len(xy) > 1 else np.zeros_like(xy)
    speed = np.linalg.norm(vel, axis=1)
    walking = np.flatnonzero(speed >= MIN_WALK_SPEED_M_S)
    if not len(walking):
        return np.zeros_like(xy), speed
    nearest = walking[np.abs(np.arange(len(xy))[:, None] - walking[None]).argmin(1)]
    return vel[nearest] / speed[nearest, None], speed


def foot_strikes(heel: np.ndarray, fps: float) -> list[int]:
    """Foot strike frames of one foot from its heel (see the module docstring).

    Args:
        heel: (T, 3) heel positions (m, Z up).
        fps: frame rate.

    Returns:
        Frame indices, ascending.
    """
    heel = np.asarray(heel, dtype=np.float64)
    if len(heel) < 3:
        return []
    z = heel[:, 2]
    vel = np.gradient(heel, axis=0) * fps
    contact = float(np.percentile(z, CONTACT_PERCENTILE))
    landed = (np.linalg.norm(vel, axis=1) < STRIKE_SPEED_M_S) & (vel[:, 2] >= -STRIKE_DESCENT_M_S)
    low = z <= contact + STRIKE_BAND_M
    swing = bool(z[0] > contact + SWING_RISE_M or vel[0, 2] < -STRIKE_DESCENT_M_S)
    out = []
    for i in range(len(z)):
        if not swing:
            swing = bool(z[i] > contact + SWING_RISE_M)
        elif low[i] and (landed[i] or i == len(z) - 1):
            out.append(i)
            swing = False
    return out


def foot_offs(toe: np.ndarray, pelvis: np.ndarray, fps: float) -> list[int]:
    """Foot off frames of one foot by Zeni et al. (2008): the toe's most posterior positions
    relative to the pelvis along the walking direction.

    Args:
        toe: (T, 3) toe positions (m, Z up).
        pelvis: (T, 3) pelvis positions (m).
        fps: frame rate.

    Returns:
        Frame indices, ascending; none at the first or last frame (an extreme there is cut off).
    """
    toe, pelvis = np.asarray(toe, dtype=np.float64), np.asarray(pelvis, dtype=np.float64)
    direction, speed = walking_direction(pelvis, fps)
    ahead = np.einsum("tc,tc->t", toe[:, :2] - pelvis[:, :2], direction)
    peaks, _ = find_peaks(-ahead, prominence=TOE_PROMINENCE_M)
    return [int(i) for i in peaks if speed[i] >= MIN_WALK_SPEED_M_S]


def detect_events_from_points(
    heel: np.ndarray, toe: np.ndarray, pelvis: np.ndarray, fps: float
) -> list[GaitEvent]:
    """Foot strikes and foot offs of both feet from heel, toe and pelvis trajectories.

    Args:
        heel: (T, 2, 3) heel of the left and right foot (m, Z up).
        toe: (T, 2, 3) toe of the left and right foot (m).
        pelvis: (T, 3) pelvis (m): a pelvis joint or the mean of the pelvis markers.
        fps: frame rate.

    Returns:
        Events sorted by frame, then side and kind.
    """
    events = []
    for s, side in enumerate(SIDES):
        for f in foot_strikes(heel[:, s], fps):
            events.append(GaitEvent(side, KINDS[0], f, f / fps))
        for f in foot_offs(toe[:, s], pelvis, fps):
            events.append(GaitEvent(side, KINDS[1], f, f / fps))
    return sorted(events, key=lambda e: (e.frame, SIDES.index(e.side), KINDS.index(e.kind)))


def foot_points(motion, body=None, markers: str = FOOT_MARKERS):
    """Heel, toe and pelvis of an SMPL motion posed on ``body``.

    Args:
        motion: an :class:`rbmcap.motion.SMPLMotion`.
        body: the body model (default the stand-in).
        markers: a point marker set naming ``LHEE``, ``LTOE``, ``RHEE``, ``RTOE``.

    Returns:
        heel (T, 2, 3), toe (T, 2, 3) and pelvis joint (T, 3), metres, world frame.
    """
    body = (body if body is not None else standin_body(motion.gender)).with_joint_offsets(
        motion.joint_offsets
    )
    mset = load_marker_set(markers)
    names = [n for pair in HEEL_TOE for n in pair]
    ids = mset.resolve(body)[[mset.index(n) for n in names]]
    poses = torch.as_tensor(motion.poses, dtype=torch.float32)
    betas = torch.as_tensor(motion.betas[: body.num_betas], dtype=torch.float32)
    with torch.no_grad():
        verts, joints = body.skin_vertices_and_joints(ids, poses, betas)
    verts = verts.double().numpy() + motion.trans[:, None]
    pelvis = joints[:, PELVIS_JOINT].double().numpy() + motion.trans
    return verts[:, [0, 2]], verts[:, [1, 3]], pelvis


def detect_gait_events(motion, body=None, markers: str = FOOT_MARKERS) -> list[GaitEvent]:
    """Foot strikes and foot offs of an SMPL motion (see the module docstring for the method).

    Args:
        motion: an :class:`rbmcap.motion.SMPLMotion` (world frame, Z up).
        body: the body model to pose it on (default the stand-in at the motion's gender).
        markers: the point marker set giving heel and toe (:data:`FOOT_MARKERS`).

    Returns:
        Events sorted by frame; ``time`` is seconds from the motion's first frame.
    """
    heel, toe, pelvis = foot_points(motion, body, markers)
    return detect_events_from_points(heel, toe, pelvis, motion.fps)
