"""Clinical joint-angle conventions: which segments, which rotation sequence, which signs.

An angle set (``LHipAngles``) is the rotation of a distal segment's frame relative to a proximal
one, ``R = (P·Aₚ)ᵀ (D·A_d)``, decomposed into intrinsic Euler angles (roma's upper-case
sequences, degrees), reordered, signed per side and offset:
``angle[k] = sign[k] · euler[order[k]] + offset[k]``, wrapped to (−180°, 180°]. ``P`` and ``D``
are the world-from-segment frames of :mod:`rbmcap.biomech.frames` (Plug-in Gait's axes);
``Aₚ``/``A_d`` turn them to the axes the convention names.

**plug-in-gait** reproduces Vicon Plug-in Gait's outputs from Plug-in Gait's own segment frames
(checked on a Plug-in Gait C3D: the angles it stores equal these to 0.0001°): the lower limb and
pelvis in Y-X-Z order (flexion about the proximal Y, ab/adduction about the floating X,
rotation about the distal Z); the ankle and foot progression on the foot's own frame (Z along the
foot, toe to heel, so its third rotation is about the foot's long axis, and the −90° offset makes
a foot at right angles to the shank read 0); the thorax against the progression frame turned half
a turn about the vertical; the shoulder in X-Y-Z order on the thorax; the elbow as flexion only.

**isb** follows the ISB's joint coordinate systems (Grood & Suntay 1983; Wu et al. 2002, 2005):
segment axes X anterior, Y proximal, Z to the right; hip, knee, ankle (on a calcaneus frame, Y up,
not along the foot) and elbow in Z-X-Y order; the shoulder (humerus on thorax) in Y-X-Y order
(plane of elevation, elevation, axial rotation; of the two Euler triples of one rotation, the
one whose elevation is positive on both sides); pelvis, thorax and foot against the progression
frame in Z-X-Y order.

In both, a positive angle is clinical on both sides: flexion (dorsiflexion at the ankle),
adduction (varus at the knee, inversion at the ankle), internal rotation; pelvis and thorax:
anterior tilt, the side up, the side forward. One exception keeps Plug-in Gait's own numbers:
its second ankle angle, about the foot's long axis pointing back, is positive for eversion (the
component is named so). The right side's frames are the left side's mirror images only in their
meaning, not their axes (Y points left on both sides), so the signs of the second and third
angles differ per side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rbmcap.errors import ConfigError

_I = np.eye(3)
_RZ180 = np.diag([-1.0, -1.0, 1.0])  # half a turn about Z
_RX180 = np.diag([1.0, -1.0, -1.0])  # half a turn about X
_TO_ISB = np.array([[1.0, 0, 0], [0, 0, -1], [0, 1, 0]])  # columns: X ant, Y up, Z right
_FOOT_TO_CALCANEUS = np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]])  # X along the foot, Z up


@dataclass(frozen=True)
class AngleSet:
    """One joint's angles, per side.

    Attributes:
        name: the set's name after the side letter (``HipAngles`` → ``LHipAngles``).
        proximal, distal: segment names (``{side}`` filled in), or ``progression``.
        sequence: intrinsic Euler sequence (roma's upper-case letters).
        components: the names of the reported angles, in order.
        order: which Euler angle each component reads.
        left, right: sign of each component per side.
        offset: degrees added to each component.
        proximal_axes, distal_axes: (3, 3) segment-from-convention axes.
    """

    name: str
    proximal: str
    distal: str
    sequence: str
    components: tuple[str, ...]
    order: tuple[int, ...]
    left: tuple[float, ...]
    right: tuple[float, ...]
    offset: tuple[float, ...] = (0.0, 0.0, 0.0)
    proximal_axes: np.ndarray = field(default_factory=lambda: _I)
    distal_axes: np.ndarray = field(default_factory=lambda: _I)


_LIMB = ("flexion", "adduction", "internal rotation")
_ANKLE = ("dorsiflexion", "inversion", "internal rotation")
_PIG_ANKLE = ("dorsiflexion", "eversion", "internal rotation")
_TRUNK = ("anterior tilt", "obliquity (side up)", "rotation (side forward)")

PLUG_IN_GAIT: tuple[AngleSet, ...] = (
    AngleSet(
        "PelvisAngles", "progression", "pelvis", "YXZ", _TRUNK, (0, 1, 2), (1, 1, -1), (1, -1, 1)
    ),
    AngleSet(
        "HipAngles", "pelvis", "{side}_femur", "YXZ", _LIMB, (0, 1, 2), (-1, -1, -1), (-1, 1, 1)
    ),
    AngleSet(
        "KneeAngles",
        "{side}_femur",
        "{side}_tibia",
        "YXZ",
        _LIMB,
        (0, 1, 2),
        (1, -1, -1),
        (1, 1, 1),
    ),
    AngleSet(
        "AnkleAngles",
        "{side}_tibia",
        "{side}_foot",
        "YXZ",
        _PIG_ANKLE,
        (0, 2, 1),
        (-1, -1, -1),
        (-1, 1, 1),
        (-90.0, 0.0, 0.0),
    ),
    AngleSet(
        "FootProgressAngles",
        "progression",
        "{side}_foot",
        "YXZ",
        ("pitch", "roll", "progression (internal)"),
        (0, 2, 1),
        (1, 1, -1),
        (1, -1, 1),
    ),
    AngleSet(
        "ThoraxAngles",
        "progression",
        "thorax",
        "YXZ",
        _TRUNK,
        (0, 1, 2),
        (-1, 1, 1),
        (-1, -1, -1),
        (180.0, 0.0, 0.0),
        proximal_axes=_RZ180,
    ),
    AngleSet(
        "ShoulderAngles",
        "thorax",
        "{side}_humerus",
        "XYZ",
        ("flexion", "abduction", "internal rotation"),
        (1, 0, 2),
        (-1, 1, -1),
        (-1, -1, 1),
        (0.0, 180.0, 180.0),
    ),
    AngleSet(
        "ElbowAngles", "{side}_humerus", "{side}_radius", "YXZ", ("flexion",), (0,), (1,), (1,)
    ),
)
"""Vicon Plug-in Gait's angle outputs (names as in its C3D files)."""

_ISB_LOWER = {"proximal_axes": _TO_ISB, "distal_axes": _TO_ISB}
_ISB_UPPER = {"proximal_axes": _RZ180 @ _TO_ISB, "distal_axes": _RZ180 @ _TO_ISB}
_ISB_TRUNK = ("anterior tilt", "obliquity (side up)", "rotation (side forward)")

ISB: tuple[AngleSet, ...] = (
    AngleSet(
        "PelvisAngles",
        "progression",
        "pelvis",
        "ZXY",
        _ISB_TRUNK,
        (0, 1, 2),
        (-1, 1, -1),
        (-1, -1, 1),
        **_ISB_LOWER,
    ),
    AngleSet(
        "HipAngles",
        "pelvis",
        "{side}_femur",
        "ZXY",
        _LIMB,
        (0, 1, 2),
        (1, -1, -1),
        (1, 1, 1),
        **_ISB_LOWER,
    ),
    AngleSet(
        "KneeAngles",
        "{side}_femur",
        "{side}_tibia",
        "ZXY",
        _LIMB,
        (0, 1, 2),
        (-1, -1, -1),
        (-1, 1, 1),
        **_ISB_LOWER,
    ),
    AngleSet(
        "AnkleAngles",
        "{side}_tibia",
        "{side}_foot",
        "ZXY",
        _ANKLE,
        (0, 1, 2),
        (1, -1, -1),
        (1, 1, 1),
        proximal_axes=_TO_ISB,
        distal_axes=_FOOT_TO_CALCANEUS @ _TO_ISB,
    ),
    AngleSet(
        "FootProgressAngles",
        "progression",
        "{side}_foot",
        "ZXY",
        ("pitch", "roll", "progression (internal)"),
        (0, 1, 2),
        (1, -1, -1),
        (1, 1, 1),
        proximal_axes=_TO_ISB,
        distal_axes=_FOOT_TO_CALCANEUS @ _TO_ISB,
    ),
    AngleSet(
        "ThoraxAngles",
        "progression",
        "thorax",
        "ZXY",
        _ISB_TRUNK,
        (0, 1, 2),
        (-1, 1, -1),
        (-1, -1, 1),
        proximal_axes=_TO_ISB,
        distal_axes=_RX180 @ _TO_ISB,
    ),
    AngleSet(
        "ShoulderAngles",
        "thorax",
        "{side}_humerus",
        "YXY",
        ("plane of elevation", "elevation", "internal rotation"),
        (0, 1, 2),
        (-1, 1, -1),
        (1, -1, 1),
        proximal_axes=_RX180 @ _TO_ISB,
        **{"distal_axes": _RZ180 @ _TO_ISB},
    ),
    AngleSet(
        "ElbowAngles",
        "{side}_humerus",
        "{side}_radius",
        "ZXY",
        ("flexion", "carrying angle", "pronation"),
        (0, 1, 2),
        (1, -1, -1),
        (1, 1, 1),
        **_ISB_UPPER,
    ),
)
"""The ISB's joint coordinate systems, clinical signs on both sides."""

CONVENTIONS: dict[str, tuple[AngleSet, ...]] = {"plug-in-gait": PLUG_IN_GAIT, "isb": ISB}


def convention(name: str) -> tuple[AngleSet, ...]:
    """The angle sets of convention ``name`` (``plug-in-gait`` or ``isb``)."""
    if name not in CONVENTIONS:
        raise ConfigError(f"angle convention {name!r}: expected one of {', '.join(CONVENTIONS)}")
    return CONVENTIONS[name]
