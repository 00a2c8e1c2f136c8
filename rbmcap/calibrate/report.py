"""Diagnostics of a calibration fit that a lab can act on.

- **Residuals** per plate over the frames fitted (mean position error in mm and rotation error in
  degrees between the plate and the calibrated body's plate).
- **What the data did not determine**: the fit's Gauss–Newton information (finite differences of
  the residuals, the per-frame poses eliminated by their Schur complement) gives each offset's
  posterior spread. Where the data shrank the offset prior's spread by less than half, the prior
  decided: the report names the plate and the direction (along or across its segment), and the
  shift of all plates together when one still pose cannot tell it from where the body stands.
- **Proportions**: the fitted body's height and segment lengths, and between plates joined in
  the marker set's tree, their distance in the capture beside the calibrated body's.
- **Plausibility** (:func:`check_plausible`): betas beyond ±3, a plate offset beyond 0.35 m, a
  body that does not fit the plates (median residual over 30 mm) are one :class:`DataError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import roma
import torch

from rbmcap.errors import DataError

BETAS_LIMIT = 3.0
OFFSET_LIMIT_M = 0.35
RESIDUAL_LIMIT_MM = 30.0
PRIOR_SHARE = 0.25
"""An offset direction counts as decided by the prior when its posterior variance is more than
this fraction of the prior's (the data did not halve the spread)."""
SEGMENTS = {
    "left_upper_arm": (16, 18),
    "left_forearm": (18, 20),
    "left_thigh": (1, 4),
    "left_shin": (4, 7),
    "right_upper_arm": (17, 19),
    "right_forearm": (19, 21),
    "right_thigh": (2, 5),
    "right_shin": (5, 8),
}
"""Segment name → (proximal, distal) SMPL joints, for the body's proportions."""


@dataclass
class CalibrationReport:
    """What a calibration fit found (see the module docstring).

    Attributes:
        frames: per capture, (name, frames used, frames in the capture).
        plates: plate → {residual_mm, residual_deg, seen, offset_deg, offset_mm, flags}.
        undetermined: sentences naming what the data did not determine.
        body: {height_m, segments_m {name: length}}.
        distances: "a–b" → {capture_m, body_m} for plates joined in the marker set.
        takes: per capture, plate → {residual_mm, residual_deg, slip}, from
            :func:`rbmcap.calibrate.takes.check_takes` (empty until then).
    """

    frames: list[tuple[str, int, int]]
    plates: dict[str, dict]
    undetermined: list[str] = field(default_factory=list)
    body: dict = field(default_factory=dict)
    distances: dict[str, dict] = field(default_factory=dict)
    takes: dict[str, dict] = field(default_factory=dict)

    def flags(self) -> list[str]:
        """Every flag raised, as 'plate: flag'."""
        out = [f"{n}: {f}" for n, p in self.plates.items() for f in p["flags"]]
        for cap, plates in self.takes.items():
            out += [f"{n}: {f} ({cap})" for n, p in plates.items() for f in p.get("flags", [])]
        return out

    def to_dict(self) -> dict:
        """JSON-ready content."""
        return {
            "frames": [list(f) for f in self.frames],
            "plates": self.plates,
            "undetermined": self.undetermined,
            "body": self.body,
            "distances": self.distances,
            "takes": self.takes,
            "flags": self.flags(),
        }

    def __str__(self) -> str:
        lines = ["frames used: " + ", ".join(f"{_short(n)}: {k} of {t}" for n, k, t in self.frames)]
        lines.append(
            f"{'plate':16s} {'resid mm':>8s} {'deg':>5s} {'offset mm':>9s} {'deg':>6s}"
            + "".join(f"  {_short(c):>24s}" for c in self.takes)
        )
        for n, p in self.plates.items():
            row = (
                f"{n:16s} {p['residual_mm']:8.1f} {p['residual_deg']:5.1f} "
                f"{p['offset_mm']:9.1f} {p['offset_deg']:6.1f}"
            )
            for plates in self.takes.values():
                t = plates.get(n, {})
                mm, deg = t.get("residual_mm", math.nan), t.get("residual_deg", math.nan)
                row += f"  {mm:13.1f} mm {deg:5.1f}°"
            lines.append(row)
        b = self.body
        if b:
            segs = ", ".join(f"{k} {1000 * v:.0f}" for k, v in b["segments_m"].items())
            lines.append(f"body: height {b['height_m']:.3f} m; segments (mm): {segs}")
        if self.distances:
            lines.append(
                "plate distances (capture / calibrated body, mm): "
                + ", ".join(
                    f"{k} {1000 * d['capture_m']:.0f}/{1000 * d['body_m']:.0f}"
                    for k, d in self.distances.items()
                )
            )
        lines += [f"not determined by the data: {u}" for u in self.undetermined]
        lines += [f"FLAG {f}" for f in self.flags()]
        return "\n".join(lines)


def _short(source: str) -> str:
    """A capture's file name without folders and extension, at most 24 characters."""
    from pathlib import Path

    return Path(source).stem[-24:]


def build_report(fit, state, caps, chosen) -> CalibrationReport:
    """The report of a finished fit (``fit`` a SessionFit, ``state`` its FitState)."""
    names = fit.names
    dp, dr = fit.residuals(state)
    seen = fit.valid.sum(0)
    angle = torch.rad2deg(roma.rotmat_to_rotvec(state.r_off).norm(dim=-1))
    plates = {}
    for i, n in enumerate(names):
        plates[n] = {
            "residual_mm": _round(torch.nanmean(dp[:, i])),
            "residual_deg": _round(torch.nanmean(dr[:, i])),
            "seen": int(seen[i]),
            "offset_mm": _round(state.t_off[i].norm() * 1000),
            "offset_deg": _round(angle[i]),
            "flags": [],
        }
    start = 0
    for k, (cap, idx) in enumerate(zip(caps, chosen)):
        part = fit.valid[start : start + len(idx)]
        start += len(idx)
        for i, n in enumerate(names):
            if len(idx) and not bool(part[:, i].any()):
                plates[n]["flags"].append(
                    f"not seen in {_short(cap.source or f'capture {k}')} (none of its "
                    f"{len(idx)} frames used): its offset rests on the other captures"
                )
    med = float(np.nanmedian([p["residual_mm"] for p in plates.values()]))
    med_r = float(np.nanmedian([p["residual_deg"] for p in plates.values()]))
    for p in plates.values():
        if p["residual_mm"] > max(15.0, 3 * med) or p["residual_deg"] > max(10.0, 3 * med_r):
            p["flags"].append(
                f"inconsistent: residual {p['residual_mm']:.1f} mm, {p['residual_deg']:.1f}° "
                f"(median {med:.1f} mm, {med_r:.1f}°): a wrong name, a loose strap?"
            )
    frames = [
        (c.source or f"capture {k}", len(i), c.num_frames)
        for k, (c, i) in enumerate(zip(caps, chosen))
    ]
    report = CalibrationReport(frames=frames, plates=plates)
    report.body = body_proportions(fit, state)
    report.distances = plate_distances(fit, state)
    report.undetermined = undetermined(fit, state)
    return report


def check_plausible(report: CalibrationReport, fit, state) -> None:
    """One DataError when the fit is not a plausible person wearing these plates."""
    b = state.betas.numpy()
    if np.abs(b).max() > BETAS_LIMIT:
        k = int(np.abs(b).argmax())
        raise DataError(
            f"implausible calibration: betas[{k}] = {b[k]:.2f} is beyond ±{BETAS_LIMIT:g} (the "
            f"plates do not fit this body model; check the names and the marker set)"
        )
    far = [
        (n, p["offset_mm"])
        for n, p in report.plates.items()
        if p["offset_mm"] > 1000 * OFFSET_LIMIT_M
    ]
    if far:
        n, mm = max(far, key=lambda x: x[1])
        raise DataError(
            f"implausible calibration: plate {n!r} sits {mm:.0f} mm from where its segment "
            f"carries it (more than {1000 * OFFSET_LIMIT_M:.0f} mm): a wrong name, or left and "
            f"right swapped?"
        )
    med = float(np.nanmedian([p["residual_mm"] for p in report.plates.values()]))
    if med > RESIDUAL_LIMIT_MM:
        raise DataError(
            f"implausible calibration: the body fits the plates only within {med:.0f} mm "
            f"(median over plates; at most {RESIDUAL_LIMIT_MM:.0f}): check the names, the "
            f"marker set and the frames"
        )
    h = report.body.get("height_m", 1.7)
    if not 1.0 <= h <= 2.3:
        raise DataError(f"implausible calibration: a body {h:.2f} m tall")


def body_proportions(fit, state) -> dict:
    """Height (rest pose, top to bottom of the mesh, m) and segment lengths (m)."""
    with torch.no_grad():
        out = fit.body(torch.eye(3, dtype=torch.float64).expand(24, 3, 3), state.betas)
        v, j = out.vertices, out.joints
    height = float(v[:, 1].max() - v[:, 1].min())
    segs = {n: round(float((j[b] - j[a]).norm()), 4) for n, (a, b) in SEGMENTS.items()}
    return {"height_m": round(height, 4), "segments_m": segs}


def plate_distances(fit, state) -> dict:
    """For each plate and its parent in the marker set: mean distance (m) in the capture and
    between the calibrated body's plates, over frames where both are seen."""
    with torch.no_grad():
        pred, _ = fit.physical(state)
    out = {}
    for i, parent in enumerate(fit.parents):
        if parent < 0:
            continue
        both = fit.valid[:, i] & fit.valid[:, parent]
        if not both.any():
            continue
        d_cap = (fit.pos[both, i] - fit.pos[both, parent]).norm(dim=-1).mean()
        d_fit = (pred[both, i] - pred[both, parent]).norm(dim=-1).mean()
        key = f"{fit.names[parent]}-{fit.names[i]}"
        out[key] = {"capture_m": round(float(d_cap), 4), "body_m": round(float(d_fit), 4)}
    return out


# ---------------------------------------------------------------------- what was determined
def undetermined(fit, state, step: float = 1e-6) -> list[str]:
    """Sentences naming the offset directions the data did not determine (module docstring):
    those the pose prior then fixed ("the pose prior decided") and those left to the offsets'
    own prior ("the offsets' prior decided")."""
    data_s, prior_s, with_pose = _offset_information(fit, state, step)
    prior_var = 1.0 / torch.diagonal(prior_s)
    cov_data = torch.linalg.inv(data_s + prior_s)
    cov_pose = torch.linalg.inv(with_pose + prior_s)
    n = len(fit.names)
    groups: dict[tuple[str, str], list[str]] = {}
    with torch.no_grad():
        jp, _ = fit.body.pose_joints(state.rotmats[:1], state.betas, state.trans[:1])
        _, vr = fit.virtual(state.rotmats[:1], state.betas, state.trans[:1])
    for kind, base, unit, scale in (
        ("position", 3 * n, "mm", 1000.0),
        ("rotation", 0, "°", math.degrees(1.0)),
    ):
        for i, name in enumerate(fit.names):
            sl = slice(base + 3 * i, base + 3 * i + 3)
            evals, evecs = torch.linalg.eigh(cov_data[sl, sl])
            if evals[-1] / prior_var[sl].max() <= PRIOR_SHARE:
                continue
            u = evecs[:, -1]
            pinned = float(u @ cov_pose[sl, sl] @ u) / float(prior_var[sl].max()) <= PRIOR_SHARE
            where = _segment_words(int(fit.dominant[i]), vr[0, i] @ u, jp[0], kind)
            who = "the pose prior decided" if pinned else "the offsets' prior decided"
            spread = scale * math.sqrt(float(evals[-1]))
            groups.setdefault((f"{kind} offset {where}", who), []).append(
                f"{name} ±{spread:.0f} {unit}"
            )
    out = [f"{what}: {', '.join(plates)} ({who})" for (what, who), plates in groups.items()]
    # a shift of every plate together, in the world frame of the first frame used
    for d, label in zip(torch.eye(3, dtype=torch.float64), "xyz"):
        u = torch.zeros(cov_pose.shape[0], dtype=torch.float64)
        for i in range(n):
            u[3 * n + 3 * i : 3 * n + 3 * i + 3] = vr[0, i].T @ d
        u = u / u.norm()
        post = float(u @ cov_pose @ u)
        if post / float(u @ torch.diag(prior_var) @ u) > PRIOR_SHARE:
            out.append(
                f"all plates shifted together along world {label} (±{1000 * math.sqrt(post):.0f}"
                f" mm): one still pose cannot tell it from where the body stands; the offsets' "
                f"prior decided"
            )
    return out


def _segment_words(joint: int, axis: torch.Tensor, joints: torch.Tensor, kind: str) -> str:
    """Where a direction (3,) in the world points relative to the plate's segment: for a
    position 'along' or 'across the segment', for a rotation axis 'about' or 'across'."""
    from rbmcap.skeleton import SMPL_PARENTS

    children = [k for k, p in enumerate(SMPL_PARENTS) if p == joint]
    if children:
        bone = joints[children[0]] - joints[joint]
    else:  # a leaf segment continues its parent's bone
        bone = joints[joint] - joints[SMPL_PARENTS[joint]]
    cos = abs(float(bone @ axis / (bone.norm() * axis.norm()).clamp_min(1e-12)))
    along = cos > 0.8
    if kind == "rotation":
        return "about the segment's axis" if along else "about an axis across the segment"
    return "along the segment" if along else "across the segment"


def _offset_information(fit, state, step: float):
    """Information (6N, 6N) of the offsets [rotation (3N) | position (3N)] in the objective's
    units (½ Hessian: JᵀJ and ½ the priors' curvature), each frame's pose eliminated (Schur
    complement): from the data alone, the offsets' prior (diagonal), and from the data with
    the pose prior."""
    n = len(fit.names)
    base = fit.residual_vector(state)  # (F, R)
    frame_cols = []  # (F, R) per frame parameter, the same one perturbed in every frame
    for k in range(75):
        frame_cols.append((fit.residual_vector(_perturb_frame(state, k, step)) - base) / step)
    shared_cols = []
    for k in range(6 * n):
        shared_cols.append((fit.residual_vector(_perturb_offset(state, k, step)) - base) / step)
    a = torch.stack(frame_cols, -1)  # (F, R, 75)
    b = torch.stack(shared_cols, -1)  # (F, R, 6N)
    wt = fit.weights
    prior_frame = torch.zeros(75, dtype=torch.float64)
    if fit.prior is not None and wt.prior > 0:
        prior_frame[3:72] = 0.5 * wt.prior * fit.prior.precision_diagonal().double()
    prior_frame[3:72] += wt.pose_l2
    prior_frame[:3] += 1e-6
    prior_frame[72:] += 1e-6
    ata = a.transpose(-1, -2) @ a
    hab = a.transpose(-1, -2) @ b
    hbb = (b.transpose(-1, -2) @ b).sum(0)

    def schur(diag: torch.Tensor) -> torch.Tensor:
        s = hbb - (hab.transpose(-1, -2) @ torch.linalg.solve(ata + torch.diag(diag), hab)).sum(0)
        return 0.5 * (s + s.T)

    prior_s = torch.cat(
        [
            torch.full((3 * n,), 1.0 / math.radians(wt.offset_sigma_deg) ** 2, dtype=torch.float64),
            torch.full((3 * n,), 1.0 / wt.offset_sigma_m**2, dtype=torch.float64),
        ]
    )
    floor = torch.full_like(prior_frame, 1e-6)
    return schur(floor), torch.diag(prior_s), schur(prior_frame)


def _perturb_frame(state, k: int, step: float):
    """``state`` with frame parameter k (root 0–2, body 3–71, translation 72–74) moved by
    ``step`` in every frame."""
    from rbmcap.calibrate.session import FitState

    rot = state.rotmats.clone()
    trans = state.trans.clone()
    if k < 3:
        d = torch.zeros(3, dtype=torch.float64)
        d[k] = step
        rot[:, 0] = roma.rotvec_to_rotmat(d) @ rot[:, 0]
    elif k < 72:
        j, c = divmod(k - 3, 3)
        rv = roma.rotmat_to_rotvec(rot[:, 1 + j])
        rv[:, c] += step
        rot[:, 1 + j] = roma.rotvec_to_rotmat(rv)
    else:
        trans[:, k - 72] += step
    return FitState(rot, trans, state.betas, state.r_off, state.t_off)


def _perturb_offset(state, k: int, step: float):
    """``state`` with offset parameter k (rotations 0..3N−1, positions 3N..6N−1) moved."""
    from rbmcap.calibrate.session import FitState

    n = state.r_off.shape[0]
    r_off, t_off = state.r_off.clone(), state.t_off.clone()
    if k < 3 * n:
        i, c = divmod(k, 3)
        d = torch.zeros(3, dtype=torch.float64)
        d[c] = step
        r_off[i] = roma.rotvec_to_rotmat(d) @ r_off[i]
    else:
        i, c = divmod(k - 3 * n, 3)
        t_off[i, c] += step
    return FitState(state.rotmats, state.trans, state.betas, r_off, t_off)


def _round(x, digits: int = 2) -> float:
    v = float(x)
    return round(v, digits) if math.isfinite(v) else float("nan")
