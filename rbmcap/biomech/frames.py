"""Anatomical segment frames on an SMPL-family body, in Plug-in Gait's axis conventions.

Each segment's frame is built once on the subject's shaped body in its rest pose, from joint
centres (the body's joint regressor) and virtual markers on the mesh (the ``plug-in-gait`` marker
set: ASIS, PSIS, heel, toe, C7, T10, clavicle, sternum), and then carried
by the rotation of the SMPL bone it rides on. An SMPL joint centre rides rigidly on its parent
bone, so this equals building the frames every frame from the posed joint centres, without the
skin's blending moving the markers.

Axes follow Plug-in Gait's segments (checked against the segment frames a Plug-in Gait C3D
carries), for both sides alike:

| segment | Z | X | Y |
|---|---|---|---|
| pelvis | up: X × Y | mid-PSIS → mid-ASIS, ⟂ Y | RASI → LASI (left) |
| femur | knee → hip | Y × Z (anterior) | left: the body's flexion axis at rest, ⟂ Z |
| tibia | ankle → knee | Y × Z | left: as the femur |
| foot | toe → heel, level at rest (flat foot) | Y × Z (up) | left |
| thorax | down: mid(C7, CLAV) → mid(T10, STRN) | C7, T10 → CLAV, STRN, ⟂ Z | Z × X (right) |
| humerus | elbow → shoulder | Y × Z (posterior, arm hanging) | right, arm hanging |
| radius | wrist → elbow | Y × Z | as the humerus |

Y points to the subject's left on both sides. A subject's axes measured from its plates'
motion (:func:`functional_landmarks`: the knee's for the femur, the ankle's for the tibia, the
elbow's for both arm segments) take the place of the body's. Otherwise the legs' flexion axis
is the body model's own (its rest frame's X): a lateral knee or ankle vertex sits some 5 cm
from the joint centre, where 1 cm of misplacement twists the axis by 11°. The arms' Y is the
elbow's flexion axis; the rest pose holds the arms out (T-pose), where that axis is vertical
(down for the left arm, up for the right). The progression frame ("lab") has X along the walk, Z up.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.geometry.kinematics import local_to_global
from rbmcap.markers.markerset import load_marker_set
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

LANDMARKS = "plug-in-gait"
"""The marker set whose markers the frames are built from."""

SEGMENTS: dict[str, str] = {
    "pelvis": "pelvis",
    "thorax": "spine3",
    "left_femur": "left_hip",
    "right_femur": "right_hip",
    "left_tibia": "left_knee",
    "right_tibia": "right_knee",
    "left_foot": "left_ankle",
    "right_foot": "right_ankle",
    "left_humerus": "left_shoulder",
    "right_humerus": "right_shoulder",
    "left_radius": "left_elbow",
    "right_radius": "right_elbow",
}
"""Each anatomical segment and the SMPL joint whose bone carries it."""

_UP, _LEFT, _FORWARD = np.eye(3)[1], np.eye(3)[0], np.eye(3)[2]  # SMPL's canonical rest frame


@dataclass(frozen=True)
class Landmarks:
    """Landmarks per anatomical segment, in that segment's bone's rest coordinates (a subject's,
    from a static trial: :func:`rbmcap.biomech.landmarks.landmarks_from_static`).

    Attributes:
        points: ``{segment: {landmark: (3,) metres}}``; landmarks are marker names of the
            ``plug-in-gait`` set, SMPL joint names (joint centres) and ``up`` (a unit vector).
        source: where they were measured, for messages and reports.
    """

    points: dict[str, dict[str, np.ndarray]]
    source: str = ""

    def merged(self, other: Landmarks | None) -> Landmarks:
        """These landmarks with ``other``'s added segment by segment (``other``'s win)."""
        if other is None:
            return self
        points = {k: dict(v) for k, v in self.points.items()}
        for segment, found in other.points.items():
            points[segment] = points.get(segment, {}) | found
        return Landmarks(points, " + ".join(s for s in (self.source, other.source) if s))


@dataclass(frozen=True)
class AnatomicalFrames:
    """Rest-pose anatomical frames of one shaped body.

    Attributes:
        names: segment names (S,), keys of :data:`SEGMENTS`.
        bones: (S,) SMPL joint index carrying each segment.
        rest: (S, 3, 3) canonical-from-segment rotations in the rest pose (columns X, Y, Z).
    """

    names: tuple[str, ...]
    bones: tuple[int, ...]
    rest: np.ndarray

    def posed(self, global_rotmats: torch.Tensor | np.ndarray) -> dict[str, np.ndarray]:
        """World-from-segment rotations ``{name: (T, 3, 3)}`` from the bones' global rotations
        (T, 24, 3, 3), world-from-bone (the root's Y-up → Z-up turn included)."""
        g = np.asarray(global_rotmats, dtype=np.float64)
        return {n: g[:, b] @ self.rest[i] for i, (n, b) in enumerate(zip(self.names, self.bones))}


def anatomical_frames(
    body, betas: np.ndarray | torch.Tensor | None = None, landmarks: Landmarks | None = None
) -> AnatomicalFrames:
    """The rest-pose anatomical frames of ``body`` shaped by ``betas`` (B,): from its joint
    centres and mesh markers, or, for each segment ``landmarks`` has points on, from those
    (a subject's static trial carried by the segment's bone, :mod:`rbmcap.biomech.landmarks`),
    the body's own standing in for the points the static lacks."""
    zero = torch.zeros(1, 24, 3, dtype=torch.float32)
    shape = None if betas is None else torch.as_tensor(np.asarray(betas), dtype=torch.float32)[None]
    rest = body(zero, betas=shape)
    joints = rest.joints[0].double().numpy()
    names, ids = _landmark_vertices(body)
    own = dict(zip(names, rest.vertices[0].double().numpy()[ids], strict=True))
    own |= {n: joints[i] for i, n in enumerate(SMPL_JOINT_NAMES)}
    names = tuple(SEGMENTS)
    built = _all_segments(own, measured=set())
    frames = []
    for name in names:
        measured = {} if landmarks is None else landmarks.points.get(name, {})
        frames.append(
            _all_segments(own | measured, set(measured))[name] if measured else built[name]
        )
    bones = tuple(SMPL_JOINT_NAMES.index(SEGMENTS[n]) for n in names)
    return AnatomicalFrames(names, bones, np.stack(frames))


_RESOLVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per body model: the :data:`LANDMARKS` markers' names and vertex ids (resolving anchors casts
rays through the mesh: once per body, not once per motion)."""


def _landmark_vertices(body) -> tuple[tuple[str, ...], np.ndarray]:
    """The names and vertex ids (N,) of the :data:`LANDMARKS` markers on ``body``."""
    if body not in _RESOLVED:
        marker_set = load_marker_set(LANDMARKS)
        _RESOLVED[body] = (marker_set.names, marker_set.resolve(body))
    return _RESOLVED[body]


def _all_segments(p: dict[str, np.ndarray], measured: set[str]) -> dict[str, np.ndarray]:
    """Every segment's frame from the points ``p`` (marker and SMPL joint names, rest
    coordinates); ``measured``: the names of ``p`` that are a subject's."""
    built = _pelvis(p) | _thorax(p)
    for side, sign in (("left", 1.0), ("right", -1.0)):
        built |= _leg(side, sign, p, measured) | _arm(side, sign, p)
    return built


FUNCTIONAL_AXES = {
    "femur": ("knee",),
    "tibia": ("ankle", "knee"),
    "humerus": ("elbow",),
    "radius": ("elbow",),
}
"""Each limb segment and the joints whose measured axis gives its flexion axis, in order of
preference: the tibia takes the ankle's (as Plug-in Gait's tibia takes its ankle marker), else
the knee's."""


def functional_landmarks(axes: dict[str, np.ndarray], source: str = "") -> Landmarks:
    """Landmarks that give the limb segments the flexion axes measured from a subject's plates'
    motion (:func:`rbmcap.calibrate.functional.bone_axes`).

    Args:
        axes: ``{(side)_(joint): (3,) axis}`` in the rest coordinates of the bone carrying the
            segment it is for (:data:`FUNCTIONAL_AXES`): the knee's in the thigh's bone, the
            ankle's in the shin's, the elbow's in the upper arm's (``(side)_elbow``) and the
            forearm's (``(side)_elbow_child``).
        source: where they were measured.
    """
    out: dict[str, dict[str, np.ndarray]] = {}
    for side in ("left", "right"):
        for segment, joints in FUNCTIONAL_AXES.items():
            suffix = "_child" if segment == "radius" else ""
            for joint in joints:
                key = f"{side}_{joint}" + (suffix if joint == "elbow" else "")
                if joint == "knee" and segment == "tibia":
                    key = f"{side}_knee_child"
                if key in axes:
                    out[f"{side}_{segment}"] = {f"{side}_{joint}_axis": np.asarray(axes[key])}
                    break
    return Landmarks(out, source)


def segment_rotations(
    body,
    poses: np.ndarray | torch.Tensor,
    betas: np.ndarray | None = None,
    landmarks: Landmarks | None = None,
) -> dict[str, np.ndarray]:
    """World-from-segment rotations ``{name: (T, 3, 3)}`` of a motion's SMPL ``poses``
    (T, 24, 3) axis-angle, on ``body`` shaped by ``betas`` (frames as
    :func:`anatomical_frames` builds them)."""
    local = roma.rotvec_to_rotmat(torch.as_tensor(np.asarray(poses), dtype=torch.float64))
    frames = anatomical_frames(body, betas, landmarks)
    return frames.posed(local_to_global(local, SMPL_PARENTS))


def axes(z: np.ndarray, y_hint: np.ndarray) -> np.ndarray:
    """The right-handed frame (3, 3) (columns X, Y, Z) with Z along ``z`` and Y the part of
    ``y_hint`` orthogonal to it."""
    z = z / np.linalg.norm(z)
    x = np.cross(y_hint, z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=-1)


def axes_zx(z: np.ndarray, x_hint: np.ndarray) -> np.ndarray:
    """The right-handed frame with Z along ``z`` and X the part of ``x_hint`` orthogonal to it."""
    z = z / np.linalg.norm(z)
    y = np.cross(z, x_hint)
    y /= np.linalg.norm(y)
    return np.stack([np.cross(y, z), y, z], axis=-1)


def _leftward(axis: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """``axis`` (an axis measured either way round) turned to point as ``reference`` does."""
    axis = np.asarray(axis, dtype=np.float64)
    return -axis if float(axis @ reference) < 0 else axis


def _pelvis(m: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    y = m["LASI"] - m["RASI"]
    forward = (m["LASI"] + m["RASI"] - m["LPSI"] - m["RPSI"]) / 2
    z = np.cross(forward, y)  # up, ⟂ the plane of the four pelvis markers' axes
    return {"pelvis": axes(z, y)}


def _thorax(m: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    down = (m["T10"] + m["STRN"] - m["C7"] - m["CLAV"]) / 2
    forward = (m["CLAV"] + m["STRN"] - m["C7"] - m["T10"]) / 2
    return {"thorax": axes_zx(down, forward)}


def _leg(side: str, sign: float, p: dict, measured: set[str]) -> dict[str, np.ndarray]:
    s = side[0].upper()
    hip, knee, ankle = p[f"{side}_hip"], p[f"{side}_knee"], p[f"{side}_ankle"]
    up = p.get("up", _UP)
    heel_to_toe = p[f"{s}TOE"] - p[f"{s}HEE"]
    heel_to_toe = heel_to_toe - up * (heel_to_toe @ up)  # flat foot: level when standing
    knee_axis, ankle_axis = _LEFT, _LEFT  # the body model's own flexion axis
    if {f"{s}KNE", f"{s}ANK"} <= measured:  # a subject's lateral markers: its own axes
        knee_axis, ankle_axis = sign * (p[f"{s}KNE"] - knee), sign * (p[f"{s}ANK"] - ankle)
    # axes measured from the plates' motion (functional calibration), turned to point left
    knee_axis = _leftward(p.get(f"{side}_knee_axis", knee_axis), _LEFT)
    ankle_axis = _leftward(p.get(f"{side}_ankle_axis", ankle_axis), _LEFT)
    return {
        f"{side}_femur": axes(hip - knee, knee_axis),
        f"{side}_tibia": axes(knee - ankle, ankle_axis),
        f"{side}_foot": axes(-heel_to_toe, _LEFT),
    }


def _arm(side: str, sign: float, j: dict) -> dict[str, np.ndarray]:
    shoulder, elbow, wrist = j[f"{side}_shoulder"], j[f"{side}_elbow"], j[f"{side}_wrist"]
    flexion_axis = -sign * _UP  # the right-pointing axis of a hanging arm, turned to the T-pose
    flexion_axis = _leftward(j.get(f"{side}_elbow_axis", flexion_axis), flexion_axis)
    return {
        f"{side}_humerus": axes(shoulder - elbow, flexion_axis),
        f"{side}_radius": axes(elbow - wrist, flexion_axis),
    }
