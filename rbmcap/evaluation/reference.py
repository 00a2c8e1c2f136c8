"""A motion measured against the reference joint centres a capture carries (``rbmcap
eval-capture``).

Some capture systems write their own estimate of joint centres as labelled points: Vicon's
Plug-in Gait puts each segment's origin at its distal joint centre (``LFEO`` the left knee, …).
A reference (``rbmcap/conf/references/<name>.yaml``) maps SMPL joints to such points:
``evaluated`` (the joints reported), ``fitted`` (further joint centres the floor fit uses) and
``segments`` (proximal and distal joint of each limb segment).

:func:`evaluate_against_reference` reports

- **distances**: per evaluated joint, the distance (mm) between the motion's SMPL joint and the
  reference point, averaged over the frames where the point is valid; ``mean_mm`` is the mean of
  the per-joint figures (each joint weighs the same);
- **the floor** (:func:`rbmcap.evaluation.floor.fit_joint_centres`): the same distances for SMPL
  fitted directly to every reference joint centre: SMPL's joints are not the reference's (other
  definitions, other proportions), and the floor says how close any SMPL motion on that body
  model can come;
- **segment lengths**: the reference's (mean over the frames where both ends are valid, m),
  the motion's body (its betas' rest skeleton, same SMPL joints), their ratio motion/reference,
  and the floor's body.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from rbmcap.body import load_body_model
from rbmcap.config.packaged import named_yaml
from rbmcap.config.safe_yaml import load_yaml_mapping
from rbmcap.errors import ConfigError, DataError
from rbmcap.evaluation.floor import fit_joint_centres
from rbmcap.skeleton import SMPL_JOINT_NAMES

SECTIONS = ("evaluated", "fitted", "segments")


@dataclass(frozen=True)
class ReferenceMap:
    """SMPL joints ↔ a capture's reference points (module docstring).

    Attributes:
        name: the reference's name.
        evaluated: SMPL joint name → point name, the joints reported.
        fitted: SMPL joint name → point name, joints the floor fit uses besides the evaluated.
        segments: segment name → (proximal, distal) SMPL joint names, each in ``evaluated`` or
            ``fitted``.
    """

    name: str
    evaluated: dict[str, str]
    fitted: dict[str, str]
    segments: dict[str, tuple[str, str]]

    @property
    def all_joints(self) -> dict[str, str]:
        """Every mapped joint (evaluated first) → its point."""
        return {**self.evaluated, **self.fitted}

    @classmethod
    def load(cls, name_or_path: str | Path = "plug-in-gait") -> ReferenceMap:
        """A packaged reference by name (``plug-in-gait``) or a YAML path.

        Raises:
            ConfigError: unknown name or file, unknown SMPL joint, bad segment.
        """
        path = named_yaml(name_or_path, "references", "reference")
        data = load_yaml_mapping(path)
        where = str(path)
        unknown = sorted(set(data) - {"name", *SECTIONS})
        if unknown or "evaluated" not in data:
            raise ConfigError(
                f"{where}: expected keys name, {', '.join(SECTIONS)} "
                f"(evaluated required), got {sorted(data)}"
            )
        evaluated = _joint_points(data["evaluated"], where, "evaluated")
        fitted = _joint_points(data.get("fitted") or {}, where, "fitted")
        segments = {}
        for seg, ends in (data.get("segments") or {}).items():
            ok = isinstance(ends, list) and len(ends) == 2
            if not ok or any(e not in evaluated and e not in fitted for e in ends):
                raise ConfigError(
                    f"{where}: segments.{seg} must be [proximal, distal], two "
                    f"mapped joints, got {ends!r}"
                )
            segments[str(seg)] = (str(ends[0]), str(ends[1]))
        return cls(str(data.get("name", Path(path).stem)), evaluated, fitted, segments)


def _joint_points(section, where: str, key: str) -> dict[str, str]:
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: {key} must map SMPL joint names to point names")
    bad = [j for j in section if j not in SMPL_JOINT_NAMES]
    if bad:
        raise ConfigError(f"{where}: {key}: {bad[0]!r} is not an SMPL joint name")
    return {str(j): str(p) for j, p in section.items()}


def reference_points(capture, joints: dict[str, str], reference: str = "reference"):
    """The reference points of ``joints`` (SMPL joint → point name) in the capture.

    Returns:
        (points (T, J, 3) float64 m, valid (T, J) bool), J in the order of ``joints``.

    Raises:
        DataError: the capture has no labelled points, or lacks one of them (all named).
    """
    label = capture.source or "capture"
    names = capture.point_names or []
    missing = [p for p in joints.values() if p not in names]
    if missing:
        has = "no labelled points" if not names else f"{len(names)} other points"
        raise DataError(
            f"{label}: no reference point {', '.join(missing)} ({reference}); the capture has {has}"
        )
    idx = [names.index(p) for p in joints.values()]
    return capture.points[:, idx].astype(np.float64), capture.point_valid[:, idx].copy()


def joint_distances_mm(pred: np.ndarray, ref: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per joint, the mean distance (mm) between ``pred`` and ``ref`` (T, J, 3) m over the frames
    where ``valid`` (T, J); NaN for a joint never valid."""
    d = np.linalg.norm(pred - ref, axis=-1) * 1e3
    count = valid.sum(0)
    total = np.where(valid, d, 0.0).sum(0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def segment_lengths(points: np.ndarray, valid: np.ndarray, index: dict[str, int], segments):
    """Mean length (m) of each segment over the frames where both ends are valid (NaN if none).

    Args:
        points: (T, J, 3) m; valid: (T, J); index: joint name → column; segments: name →
            (proximal, distal) joint names.
    """
    out = {}
    for seg, (a, b) in segments.items():
        ok = valid[:, index[a]] & valid[:, index[b]]
        d = np.linalg.norm(points[ok, index[a]] - points[ok, index[b]], axis=-1)
        out[seg] = float(d.mean()) if len(d) else math.nan
    return out


def rest_segment_lengths(body, betas, segments) -> dict[str, float]:
    """Segment lengths (m) of ``body``'s rest skeleton at ``betas`` (B,)."""
    b = torch.as_tensor(np.asarray(betas, dtype=np.float32)[: body.num_betas])
    with torch.no_grad():
        joints = body.rest_joints(b).double().numpy()
    j = SMPL_JOINT_NAMES.index
    return {s: float(np.linalg.norm(joints[j(a)] - joints[j(b)])) for s, (a, b) in segments.items()}


def motion_joints(body, motion) -> np.ndarray:
    """(T, 24, 3) float64 m: the SMPL joints of an :class:`~rbmcap.motion.SMPLMotion` (with its
    joint offsets)."""
    body = body.with_joint_offsets(motion.joint_offsets)
    b = torch.as_tensor(motion.betas[: body.num_betas], dtype=torch.float32)
    poses = torch.as_tensor(motion.poses, dtype=torch.float32)
    trans = torch.as_tensor(motion.trans, dtype=torch.float32)
    with torch.no_grad():
        return body.pose_joints(poses, b, trans)[0].double().numpy()


@dataclass
class ReferenceReport:
    """What :func:`evaluate_against_reference` measured (module docstring for definitions).

    Attributes:
        reference: the reference's name; frames: the frames compared.
        joints: evaluated SMPL joint → ``point``, ``frames`` (valid), ``motion_mm``, ``floor_mm``.
        mean_mm, floor_mean_mm: the per-joint figures averaged over the evaluated joints.
        segments: segment → ``reference_m``, ``motion_m``, ``ratio`` (motion / reference),
            ``floor_m``.
        floor: the floor fit's ``betas``, ``fit_mm`` (mean distance over every fitted joint
            centre) and ``iterations``; empty without the floor.
    """

    reference: str
    frames: int
    joints: dict[str, dict] = field(default_factory=dict)
    mean_mm: float = math.nan
    floor_mean_mm: float | None = None
    segments: dict[str, dict] = field(default_factory=dict)
    floor: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain JSON-ready content (NaN as None)."""
        return _json_ready(
            {
                "reference": self.reference,
                "frames": self.frames,
                "mean_mm": self.mean_mm,
                "floor_mean_mm": self.floor_mean_mm,
                "joints": self.joints,
                "segments": self.segments,
                "floor": self.floor,
            }
        )


def _json_ready(x):
    if isinstance(x, dict):
        return {k: _json_ready(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json_ready(v) for v in x]
    if isinstance(x, float | np.floating):
        return None if not math.isfinite(x) else round(float(x), 4)
    return x


def evaluate_against_reference(
    motion,
    capture,
    reference: ReferenceMap | str = "plug-in-gait",
    *,
    body=None,
    floor: bool = True,
    prior=None,
    floor_iterations: int | None = None,
) -> ReferenceReport:
    """Distances of ``motion``'s joints to the capture's reference joint centres, the floor, and
    segment lengths (module docstring).

    Args:
        motion: an :class:`~rbmcap.motion.SMPLMotion` of the capture (same frames).
        capture: a :class:`~rbmcap.io.capture.Capture` with the reference's points.
        reference: a :class:`ReferenceMap`, or its name or YAML path.
        body: the body model of the motion and of the floor fit, or its name (default: the
            stand-in of the motion's gender).
        floor: also fit SMPL to the reference points (:mod:`rbmcap.evaluation.floor`).
        prior: the floor fit's pose prior (default: the shipped one).
        floor_iterations: the floor fit's L-BFGS iterations (default its own).

    Raises:
        DataError: frame counts differ; a reference point is missing from the capture.
    """
    ref = reference if isinstance(reference, ReferenceMap) else ReferenceMap.load(reference)
    _check_same_take(motion, capture)
    if body is None or isinstance(body, str):
        body = load_body_model(body or "standin", gender=motion.gender)
    mapped = ref.all_joints
    points, valid = reference_points(capture, mapped, ref.name)
    order = list(mapped)
    ev = [order.index(j) for j in ref.evaluated]
    smpl = [SMPL_JOINT_NAMES.index(j) for j in order]
    body = body.with_joint_offsets(motion.joint_offsets)
    pred = motion_joints(body, motion)[:, smpl]
    motion_mm = joint_distances_mm(pred[:, ev], points[:, ev], valid[:, ev])
    report = ReferenceReport(ref.name, capture.num_frames, mean_mm=_nanmean(motion_mm))
    _add_joints(report, ref, motion_mm, valid[:, ev])
    index = {j: i for i, j in enumerate(order)}
    ref_len = segment_lengths(points, valid, index, ref.segments)
    _add_segments(report, ref_len, rest_segment_lengths(body, motion.betas, ref.segments))
    if floor:
        _add_floor(report, ref, body, points, valid, smpl, ev, prior, floor_iterations)
    return report


def _check_same_take(motion, capture) -> None:
    """Raise :class:`DataError` when the motion and the capture differ in frame count."""
    if motion.num_frames != capture.num_frames:
        label = capture.source or "capture"
        raise DataError(
            f"{label}: {capture.num_frames} frames, the motion {motion.name or ''} "
            f"has {motion.num_frames}: not the same take"
        )


def _add_joints(
    report: ReferenceReport, ref: ReferenceMap, motion_mm: np.ndarray, valid: np.ndarray
) -> None:
    """Each evaluated joint's point, valid frames and motion distance into ``report``.

    Args:
        motion_mm: (J,) mm per evaluated joint; valid: (T, J) bool, in ``ref.evaluated``'s order.
    """
    for k, (joint, point) in enumerate(ref.evaluated.items()):
        report.joints[joint] = {
            "point": point,
            "frames": int(valid[:, k].sum()),
            "motion_mm": float(motion_mm[k]),
            "floor_mm": None,
        }


def _add_segments(
    report: ReferenceReport, ref_len: dict[str, float], body_len: dict[str, float]
) -> None:
    """Each segment's reference and motion lengths (m) and their ratio into ``report``."""
    for seg in ref_len:
        report.segments[seg] = {
            "reference_m": ref_len[seg],
            "motion_m": body_len[seg],
            "ratio": body_len[seg] / ref_len[seg],
            "floor_m": None,
        }


def _add_floor(report, ref, body, points, valid, smpl, ev, prior, iterations) -> None:
    """The floor fit's figures into ``report``."""
    kwargs = {} if iterations is None else {"iterations": iterations}
    fit = fit_joint_centres(body, points, valid, smpl, prior=prior, **kwargs)
    floor_mm = joint_distances_mm(fit.joints[:, ev], points[:, ev], valid[:, ev])
    report.floor_mean_mm = _nanmean(floor_mm)
    for k, joint in enumerate(ref.evaluated):
        report.joints[joint]["floor_mm"] = float(floor_mm[k])
    floor_len = rest_segment_lengths(body, fit.betas, ref.segments)
    for seg in ref.segments:
        report.segments[seg]["floor_m"] = floor_len[seg]
    all_mm = joint_distances_mm(fit.joints, points, valid)
    report.floor = {
        "betas": [float(b) for b in fit.betas],
        "fit_mm": _nanmean(all_mm),
        "iterations": fit.iterations,
    }


def _nanmean(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    return float(x[np.isfinite(x)].mean()) if np.isfinite(x).any() else math.nan
