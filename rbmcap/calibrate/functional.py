"""Functional joint centres and hinge axes from the relative motion of two plates (SCoRE and
SARA, Ehrig et al. 2006, 2007).

A joint between two plated segments A (the parent) and B is a point fixed in both plates'
frames. Over T frames of plate poses (R_A, p_A), (R_B, p_B) its coordinates c_A, c_B in the two
frames solve, in the least-squares sense (SCoRE),

    R_A(t) c_A + p_A(t) = R_B(t) c_B + p_B(t)        i.e.  [R_A  −R_B] [c_A; c_B] = p_B − p_A.

The 3T × 6 system M x = y has three singular values near √(2T) (the two plates agree on where
the joint is) and three that grow with the relative rotation about each direction. A hinge
turns about one axis only, so one of them is near zero: the centre slides along the axis, which
is then the null direction of M (SARA). Each singular direction v_i of x blends the data's
answer d_i = u_iᵀ y / s_i with the prior's (the body model's joint centre in the two plates'
frames, v_iᵀ x_prior), weighted by their precisions:

    x = Σ_i v_i (w_i d_i + (1 − w_i) v_iᵀ x_prior),   w_i = π_i / (π_i + τ⁻²),   π_i = s_i² / (κσ²)

σ is the fit's residual per frame (at least :data:`SIGMA_FLOOR_M`) and τ = :data:`PRIOR_M` how far
a body model's joint centre may be from the subject's. The frames' errors are not independent
(soft tissue swings with the muscles, a marker model's frames slide with flexion, a static
repeats one pose), so T frames count as T / κ independent ones, π_i = s_i² / (κσ²), with κ
chosen by ``noise`` (:data:`JOINT_NOISE`):

- ``"shared"`` (the default): κ = T, as if every frame's error were one error shared by the whole
  take. An upper bound, and the safe one: an error that follows the pose looks like signal, not
  noise, to any measure taken from the residual.
- ``"measured"``: κ the residual's integrated autocorrelation time in frames
  (:func:`correlation_frames`). Tighter, and right where the errors do not follow the pose.

1/√(π_i + 1/τ²) is how far the direction can be off: its **uncertainty**. A direction with
w_i < ½ is counted as taken from the prior. Without a prior, x_prior is the point midway between
the two plates (:func:`midpoint_prior`). The two choices measured, on synthetic plates and the
real Plug-in Gait walk: docs/results.md, "How the frames count against the noise".

The **axis** is the principal direction of the relative rotations R_Aᵀ R_B about their mean
(in A's frame, and carried into B's by the mean), the **range** the angle swept about it and
the **off-axis** spread the root-mean-square angle about the other two directions. An axis is
determined when the range is at least :data:`AXIS_RANGE_DEG`.

Only adjacent joints are measured: the joint at the proximal end of plate B's segment whose
parent in the body is the joint of plate A's segment (rbm14: knees, ankles, elbows, wrists).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.baseline.objective import predict_markers
from rbmcap.biomech.frames import functional_landmarks
from rbmcap.errors import ConfigError
from rbmcap.markers.markerset import load_marker_set
from rbmcap.markers.synth import Synthesizer
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

PRIOR_M = 0.025
"""How far the prior (a body model's joint centre) may be from the subject's joint, m: the
Plug-in Gait walk's body joints are 21–45 mm from Vicon's (docs/results.md)."""
SIGMA_FLOOR_M = 0.0005
"""The least per-frame error assumed of a plate pair, m (a tracked plate's noise)."""
AXIS_RANGE_DEG = 20.0
"""An axis is determined when the take turns the joint through at least this angle about it."""
MIN_FRAMES = 10
"""Fewer frames with both plates seen: the joint is not measured (everything from the prior)."""
JOINT_NOISE = ("shared", "measured")
"""How a take's frames count against the centre's noise (module docstring): one error shared by
the whole take, or the residual's measured correlation over frames."""
HINGE_JOINTS = ("left_knee", "right_knee", "left_elbow", "right_elbow")
"""The joints anatomy makes hinges, held to their axis by a solve's hinge term where the
calibration found them turning as one."""
HINGE_OFF_AXIS_DEG = 6.0
"""A joint whose rotation off its axis has a spread below this turns as a hinge in the take."""


JOINT_KEYS = (
    "parent", "child", "centre_parent_m", "centre_child_m", "axis_parent", "axis_child",
    "range_deg", "off_axis_deg", "residual_mm", "uncertainty_mm", "from_prior", "frames",
)  # fmt: skip
"""The keys every joint's entry in a calibration file has, in :meth:`FunctionalJoint.to_dict`'s
order (``noise`` follows them, optional: files from before it read as ``shared``)."""


@dataclass(frozen=True)
class JointPair:
    """A joint between two plated segments: ``joint`` (SMPL name), ``parent`` and ``child``
    plate names."""

    joint: str
    parent: str
    child: str


def adjacent_pairs(markers) -> list[JointPair]:
    """The joints a marker set's plates bracket (module docstring), in the set's order.

    ``markers``: a :class:`rbmcap.markers.MarkerSet` whose plates have anchors (their segment's
    SMPL joint) and parents.
    """
    pairs = []
    for i, anchor in enumerate(markers.anchors):
        p = markers.parents[i]
        if anchor is None or p < 0 or markers.anchors[p] is None:
            continue
        if SMPL_PARENTS[anchor.joint] == markers.anchors[p].joint:
            pairs.append(
                JointPair(SMPL_JOINT_NAMES[anchor.joint], markers.names[p], markers.names[i])
            )
    return pairs


@dataclass
class FunctionalJoint:
    """One joint measured from the motion of its two plates (module docstring).

    Attributes:
        joint, parent, child: the SMPL joint and the two plates.
        centre_parent, centre_child: (3,) m, the centre in each plate's frame.
        axis_parent, axis_child: (3,) unit axis in each plate's frame.
        range_deg: the angle swept about the axis; off_axis_deg: the rotation's spread off it.
        residual_mm: root-mean-square distance between the two plates' estimates of the centre.
        uncertainty_mm: (3,) per direction of the centre (in the parent plate's frame, sorted
            from the best determined), how far errors of the residual's size and correlation
            over frames move it.
        from_prior: how many of the centre's six directions came from the prior (0: all from the
            motion).
        frames: frames used (both plates seen).
        noise: how the frames counted against the noise (:data:`JOINT_NOISE`).
    """

    joint: str
    parent: str
    child: str
    centre_parent: np.ndarray
    centre_child: np.ndarray
    axis_parent: np.ndarray
    axis_child: np.ndarray
    range_deg: float
    off_axis_deg: float
    residual_mm: float
    uncertainty_mm: np.ndarray
    from_prior: int
    frames: int
    noise: str = "shared"

    @property
    def axis_determined(self) -> bool:
        """The take turns the joint enough about its axis to fix it."""
        return self.frames >= MIN_FRAMES and self.range_deg >= AXIS_RANGE_DEG

    @property
    def axis_uncertainty_deg(self) -> float:
        """How far the axis may be off (degrees): the turn off the axis against half the range
        about it, as if every frame's turn off the axis were one shared error (an upper bound)."""
        if self.range_deg <= 0:
            return 90.0
        return math.degrees(math.atan2(self.off_axis_deg, 0.5 * self.range_deg))

    @property
    def hinge(self) -> bool:
        """The joint turned as a hinge in the take (determined axis, little off it)."""
        return self.axis_determined and self.off_axis_deg < HINGE_OFF_AXIS_DEG

    @property
    def centre_determined(self) -> bool:
        """Every direction of the centre came from the motion."""
        return self.frames >= MIN_FRAMES and self.from_prior == 0

    def estimates(self, pa, ra, pb, rb) -> tuple[np.ndarray, np.ndarray]:
        """The centre as each plate puts it: (..., 3) from parent poses ``pa`` (..., 3), ``ra``
        (..., 3, 3) and from child poses ``pb``, ``rb``."""
        return pa + ra @ self.centre_parent, pb + rb @ self.centre_child

    def describe(self) -> str:
        """One line a lab can act on, e.g. ``right knee: turned 55° about its axis (off it
        3.7°), hinge; centre: 1 of 6 directions from the body (±52 mm)``."""
        name = self.joint.replace("_", " ")
        if self.frames < MIN_FRAMES:
            return f"{name}: {self.frames} frames with both plates seen: not measured"
        turn = f"turned {self.range_deg:.0f}° about its axis (off it {self.off_axis_deg:.1f}°)"
        axis = f"{'hinge' if self.hinge else 'axis determined'} (±{self.axis_uncertainty_deg:.0f}°)"
        if not self.axis_determined:
            axis = "axis not determined"
        if self.from_prior:
            worst = float(self.uncertainty_mm[-1])
            centre = (
                f"centre: {self.from_prior} of 6 directions from the body model "
                f"(the motion leaves ±{min(worst, 999.0):.0f} mm)"
            )
        else:
            centre = f"centre determined (±{float(self.uncertainty_mm[-1]):.1f} mm)"
        return f"{name}: {turn}, {axis}; {centre}; residual {self.residual_mm:.1f} mm"

    def to_dict(self) -> dict:
        """The calibration file's entry (plain lists and floats)."""

        def v(x) -> list[float]:
            return [round(float(a), 6) for a in np.asarray(x).reshape(-1)]

        return {
            "parent": self.parent,
            "child": self.child,
            "centre_parent_m": v(self.centre_parent),
            "centre_child_m": v(self.centre_child),
            "axis_parent": v(self.axis_parent),
            "axis_child": v(self.axis_child),
            "range_deg": round(self.range_deg, 2),
            "off_axis_deg": round(self.off_axis_deg, 2),
            "residual_mm": round(self.residual_mm, 3),
            # unrounded: the report's line is rounded from it, and must read the same back
            "uncertainty_mm": [min(float(u), 1e6) for u in self.uncertainty_mm],
            "from_prior": int(self.from_prior),
            "frames": int(self.frames),
            "noise": self.noise,
        }


def fit_joint(
    pair: JointPair,
    ra,
    pa,
    rb,
    pb,
    prior: tuple[np.ndarray, np.ndarray] | None = None,
    noise: str = "shared",
) -> FunctionalJoint:
    """SCoRE centre and SARA axis of one joint (module docstring).

    Args:
        pair: the joint and its plates.
        ra, pa, rb, pb: (T, 3, 3), (T, 3) m the parent's and the child's poses over the frames
            where both are seen.
        prior: the body model's centre in the parent's and the child's frame ((3,), (3,) m), for
            the directions the motion leaves open; None: :func:`midpoint_prior`.
        noise: how the frames count against the noise, one of :data:`JOINT_NOISE`.

    Raises:
        ConfigError: an unknown ``noise``.
    """
    check_joint_noise(noise)
    ra, pa, rb, pb = (np.asarray(a, dtype=np.float64) for a in (ra, pa, rb, pb))
    t = len(ra)
    if prior is None:
        prior = midpoint_prior(ra, pa, rb, pb)
    x_prior = np.concatenate([prior[0], prior[1]])
    if t < MIN_FRAMES:
        eye = np.eye(3)[0]
        return FunctionalJoint(
            pair.joint, pair.parent, pair.child, x_prior[:3], x_prior[3:], eye, eye,
            0.0, 0.0, 0.0, np.full(3, PRIOR_M * 1e3), 6, t, noise,
        )  # fmt: skip
    x, weight, uncertainty = _score(ra, pa, rb, pb, x_prior, noise)
    ea, eb = pa + ra @ x[:3], pb + rb @ x[3:]
    residual = float(np.sqrt(((ea - eb) ** 2).sum(-1).mean())) * 1e3
    axis_a, axis_b, rng, off = _axis(ra, rb)
    return FunctionalJoint(
        pair.joint,
        pair.parent,
        pair.child,
        x[:3],
        x[3:],
        axis_a,
        axis_b,
        rng,
        off,
        residual,
        uncertainty[3:],  # the three directions the joint's turning determines
        int((weight < 0.5).sum()),
        t,
        noise,
    )


def check_joint_noise(noise: str) -> None:
    """ConfigError unless ``noise`` is one of :data:`JOINT_NOISE`."""
    if noise not in JOINT_NOISE:
        raise ConfigError(f"joint noise {noise!r}: expected one of {', '.join(JOINT_NOISE)}")


def _score(ra, pa, rb, pb, x_prior, noise: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The SCoRE centre (6,) [c_A; c_B] blended with the prior direction by direction, each
    direction's weight on the motion (6,) and its uncertainty (6,) mm (module docstring)."""
    t = len(ra)
    m = np.concatenate([ra, -rb], axis=2).reshape(-1, 6)
    y = (pb - pa).reshape(-1)
    # the singular directions of M from its 6 × 6 normal matrix (s² its eigenvalues)
    evals, evecs = np.linalg.eigh(m.T @ m)
    order = np.argsort(evals)[::-1]
    s, vt = np.sqrt(np.clip(evals[order], 0.0, None)), evecs[:, order].T
    solvable = s > 1e-6 * s[0]
    data = np.where(solvable, vt @ (m.T @ y) / np.where(solvable, s * s, 1.0), 0.0)
    fitted = m @ (vt.T @ data) - y
    sigma = math.sqrt(float(fitted @ fitted) / max(1, 3 * t - 6) * 3.0)  # per point
    # per direction: the data's precision (T / κ independent frames) and the prior's
    kappa = t if noise == "shared" else correlation_frames(fitted.reshape(t, 3))
    precision = (s / max(sigma, SIGMA_FLOOR_M)) ** 2 / kappa
    weight = precision / (precision + PRIOR_M**-2)
    x = vt.T @ (weight * data + (1.0 - weight) * (vt @ x_prior))
    return x, weight, 1e3 / np.sqrt(precision + PRIOR_M**-2)


def correlation_frames(residual: np.ndarray) -> float:
    """The integrated autocorrelation time κ of a residual series (T, 3), in frames: T frames
    of it carry as much as T / κ independent ones. κ = 1 + 2 Σ_k ρ_k over the lags up to the
    autocorrelation's first sign change (Geyer's initial positive sequence), ρ from the three
    components' summed autocovariance; between 1 (white) and T (one shared error)."""
    t = len(residual)
    centred = residual - residual.mean(0)
    spectrum = np.fft.rfft(centred, n=2 * t, axis=0)
    autocov = np.fft.irfft(np.abs(spectrum) ** 2, n=2 * t, axis=0)[:t].sum(1)
    if autocov[0] <= 0.0:  # a constant residual: every frame says the same
        return float(t)
    rho = autocov[1:] / autocov[0]
    first_negative = np.flatnonzero(rho <= 0.0)
    positive = rho[: first_negative[0]] if len(first_negative) else rho
    return float(np.clip(1.0 + 2.0 * positive.sum(), 1.0, t))


def in_frames(point, ra, pa, rb, pb) -> tuple[np.ndarray, np.ndarray]:
    """A point (T, 3) m given per frame, in the parent's and the child's frame (mean over the
    frames): a prior for :func:`fit_joint`."""
    point = np.asarray(point, dtype=np.float64)
    in_a = np.einsum("tji,tj->ti", ra, point - pa).mean(0)
    in_b = np.einsum("tji,tj->ti", rb, point - pb).mean(0)
    return in_a, in_b


def midpoint_prior(ra, pa, rb, pb) -> tuple[np.ndarray, np.ndarray]:
    """The prior without a body: the point midway between the two plates, in their frames."""
    return in_frames(0.5 * (pa + pb), ra, pa, rb, pb)


def _axis(ra: np.ndarray, rb: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The principal axis of the relative rotations R_Aᵀ R_B in A's and B's frame, the range
    swept about it and the rotation's spread off it (degrees)."""
    rel = torch.as_tensor(np.einsum("tji,tjk->tik", ra, rb))
    mean = roma.special_procrustes(rel.mean(0))
    turns = roma.rotmat_to_rotvec(rel @ mean.T).numpy()  # in A's frame, about the mean
    centred = turns - turns.mean(0)
    evals, evecs = np.linalg.eigh(centred.T @ centred / len(turns))
    axis = evecs[:, -1]
    along = turns @ axis
    if np.median(along) < 0 or (np.median(along) == 0 and axis[np.argmax(np.abs(axis))] < 0):
        axis, along = -axis, -along
    rng = math.degrees(float(along.max() - along.min()))
    off = math.degrees(math.sqrt(max(0.0, float(evals[:2].sum()))))
    return axis, mean.numpy().T @ axis, rng, off


def measure_joints(
    pos, rot, valid, names, pairs, priors=None, noise: str = "shared"
) -> list[FunctionalJoint]:
    """Every joint of ``pairs`` measured over a take's frames.

    Args:
        pos, rot, valid: (T, N, 3) m, (T, N, 3, 3), (T, N) the plates, observed (physical).
        names: the N plate names.
        pairs: the joints (:func:`adjacent_pairs`).
        priors: joint name → (centre in the parent's frame, in the child's), m
            (:func:`in_frames`); a joint absent here gets :func:`midpoint_prior`.
        noise: how the frames count against the noise (:data:`JOINT_NOISE`).
    """
    pos, rot, valid = np.asarray(pos), np.asarray(rot), np.asarray(valid, dtype=bool)
    out = []
    for pair in pairs:
        a, b = names.index(pair.parent), names.index(pair.child)
        both = valid[:, a] & valid[:, b]
        prior = (priors or {}).get(pair.joint)
        poses = rot[both, a], pos[both, a], rot[both, b], pos[both, b]
        out.append(fit_joint(pair, *poses, prior, noise=noise))
    return out


def joint_centres(joints, pos, rot, valid, names) -> tuple[np.ndarray, np.ndarray]:
    """Each measured joint's centre in every frame, where the plates put it, as the solver takes
    them (:meth:`rbmcap.baseline.Solver.solve`'s ``joint_centres``).

    Args:
        joints: the measured joints (a calibration's ``joints.values()``); joints measured on
            fewer than :data:`MIN_FRAMES` frames are left out.
        pos, rot, valid: (T, N, 3) m, (T, N, 3, 3), (T, N) the observed (physical) plates.
        names: the N plate names.

    Returns:
        (T, 24, 3) m the centres (the mean of the two plates' estimates, or the one seen) and
        (T, 24) bool where a plate of the joint is seen.
    """
    pos, rot = np.asarray(pos, dtype=np.float64), np.asarray(rot, dtype=np.float64)
    valid = np.asarray(valid, dtype=bool)
    centres = np.zeros((len(pos), 24, 3))
    seen = np.zeros((len(pos), 24), dtype=bool)
    for j in joints:
        if j.frames < MIN_FRAMES or j.parent not in names or j.child not in names:
            continue
        a, b = names.index(j.parent), names.index(j.child)
        ea, eb = j.estimates(pos[:, a], rot[:, a], pos[:, b], rot[:, b])
        va, vb = valid[:, a, None], valid[:, b, None]
        k = SMPL_JOINT_NAMES.index(j.joint)
        total = np.where(va, ea, 0.0) + np.where(vb, eb, 0.0)
        count = va.astype(float) + vb.astype(float)
        centres[:, k] = total / np.maximum(count, 1.0)
        seen[:, k] = (count > 0)[:, 0]
    return centres, seen


def bone_axes(joints, rest_rot, plate_rotation, names) -> dict[str, np.ndarray]:
    """Each measured joint's axis (where the take determined it) in the rest coordinates of the
    bones its two plates ride: ``{joint: axis in the parent's bone, joint + "_child": in the
    child's}``.

    A plate rides its bone: ``R_phys = G_bone C R_off`` with C its virtual plate's rotation in
    the rest pose, so an axis ``a`` in the physical plate's frame is ``C R_off a`` in the bone's
    (the frame the joint's own rotation, and the segment's rest frame, are expressed in).

    Args:
        joints: the measured joints (a calibration's ``joints.values()``).
        rest_rot: (N, 3, 3) the virtual plates' rotations in the rest pose (the calibrated body).
        plate_rotation: (N, 3, 3) the calibration's rotation offsets R_off, same order.
        names: the N plate names.
    """
    out = {}
    for j in joints:
        if not j.axis_determined or j.parent not in names or j.child not in names:
            continue
        a, b = names.index(j.parent), names.index(j.child)
        out[j.joint] = np.asarray(rest_rot[a]) @ np.asarray(plate_rotation[a]) @ j.axis_parent
        out[j.joint + "_child"] = (
            np.asarray(rest_rot[b]) @ np.asarray(plate_rotation[b]) @ j.axis_child
        )
    return out


def hinge_axes(joints, rest_rot, plate_rotation, names) -> tuple[np.ndarray, np.ndarray]:
    """The hinges among measured ``joints`` (:data:`HINGE_JOINTS` that turned as one,
    :attr:`FunctionalJoint.hinge`) and their axes in each joint's parent bone
    (:func:`bone_axes`), for a solve's hinge term (:meth:`rbmcap.baseline.Solver.solve`'s
    ``hinges``); arguments as :func:`bone_axes`.

    Returns:
        (joint indices (K,) int, axes (K, 3)); K may be 0.
    """
    hinges = [j for j in joints if j.joint in HINGE_JOINTS and j.hinge]
    axes = bone_axes(hinges, rest_rot, plate_rotation, names)
    ids = [SMPL_JOINT_NAMES.index(j.joint) for j in hinges if j.joint in axes]
    vectors = [axes[j.joint] for j in hinges if j.joint in axes]
    return np.asarray(ids, dtype=np.int64), np.asarray(vectors, dtype=np.float64).reshape(-1, 3)


def rest_plates(body, markers, betas) -> tuple[np.ndarray, np.ndarray]:
    """The virtual plates on ``body`` shaped by ``betas`` in the rest pose (the body's own
    canonical frame): positions (N, 3) m and rotations (N, 3, 3), float64 (``markers``: a marker
    set or its name)."""
    synth = Synthesizer(body, markers)
    dtype = body.v_template.dtype
    nb = body.num_betas
    with torch.no_grad():
        eye = torch.eye(3, dtype=dtype).expand(1, 24, 3, 3)
        shape = torch.as_tensor(np.asarray(betas)[:nb], dtype=dtype)[None]
        pos, rot = predict_markers(body, synth.topology, eye, shape, torch.zeros(1, 3, dtype=dtype))
    return pos[0].double().numpy(), rot[0].double().numpy()


def rest_plate_rotations(body, markers, betas) -> np.ndarray:
    """(N, 3, 3) the virtual plates' rotations of :func:`rest_plates`."""
    return rest_plates(body, markers, betas)[1]


def axis_landmarks(calibration, body, markers="rbm14"):
    """Landmarks (:func:`rbmcap.biomech.frames.functional_landmarks`) that give the limb
    segments of ``body`` the flexion axes ``calibration`` measured from the plates' motion, for
    clinical angles without a static; None when it measured none."""
    marker_set = load_marker_set(markers)
    names = list(marker_set.names)
    if not calibration.joints:
        return None
    rest = rest_plate_rotations(body, marker_set, calibration.betas)
    axes = bone_axes(calibration.joints.values(), rest, calibration.offsets(names).rotation, names)
    return functional_landmarks(axes, calibration.source or "calibration") if axes else None
