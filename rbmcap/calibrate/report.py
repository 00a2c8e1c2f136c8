"""Diagnostics of a calibration fit that a lab can act on.

- **Residuals** per plate over the frames fitted (mean position error in mm and rotation error in
  degrees between the plate and the calibrated body's plate).
- **What the frames determine, for the poses** (:mod:`rbmcap.calibrate.determination`): per
  plate, how far the remaining uncertainty of its offset moves the fitted body's joints, and the
  same for all offsets together. A plate whose share is above :data:`PLATE_JOINTS_MM` is not
  determined (add frames where its segment moves); a calibration whose joints spread above
  :data:`USABLE_JOINTS_MM`, or with a flagged plate, is not usable for inference
  (:meth:`CalibrationReport.verdict`). The offset directions that the data alone leave to a
  prior are named, each with how far it moves the joints.
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

from rbmcap.calibrate.determination import determination
from rbmcap.errors import DataError
from rbmcap.skeleton import SMPL_JOINT_NAMES

BETAS_LIMIT = 3.0
OFFSET_LIMIT_M = 0.35
RESIDUAL_LIMIT_MM = 30.0
PLATE_JOINTS_MM = 25.0
"""A plate whose offset's remaining uncertainty moves a joint by more than this (mm, spread) is
not determined by the frames fitted."""
USABLE_JOINTS_MM = 30.0
"""A calibration whose offsets' remaining uncertainty moves a joint by more than this (mm) is not
usable for inference: on the real Plug-in Gait session this spread is close to the joints' error
of the inference that follows (docs/capture.md)."""
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
        plates: plate → {residual_mm, residual_deg, seen, offset_deg, offset_mm, joints_mm,
            joint, determined, flags}: ``joints_mm`` how far the remaining uncertainty of its
            offset moves the joints (spread, mm; ``joint`` the one moved most), ``determined``
            whether that is within :data:`PLATE_JOINTS_MM`.
        joints_mm, joint: the same for every offset together.
        left_open: sentences naming the offset directions the data alone left to a prior.
        body: {height_m, segments_m {name: length}}.
        distances: "a–b" → {capture_m, body_m} for plates joined in the marker set.
        takes: per capture, plate → {residual_mm, residual_deg, slip}, from
            :func:`rbmcap.calibrate.takes.check_takes` (empty until then).
        functional: one line per joint measured from its plates' motion
            (:meth:`rbmcap.calibrate.functional.FunctionalJoint.describe`).
    """

    frames: list[tuple[str, int, int]]
    plates: dict[str, dict]
    joints_mm: float = math.nan
    joint: str = ""
    left_open: list[str] = field(default_factory=list)
    body: dict = field(default_factory=dict)
    distances: dict[str, dict] = field(default_factory=dict)
    takes: dict[str, dict] = field(default_factory=dict)
    functional: list[str] = field(default_factory=list)

    def flags(self) -> list[str]:
        """Every flag raised, as 'plate: flag'."""
        out = [f"{n}: {f}" for n, p in self.plates.items() for f in p["flags"]]
        for cap, plates in self.takes.items():
            out += [f"{n}: {f} ({cap})" for n, p in plates.items() for f in p.get("flags", [])]
        return out

    def usable(self) -> bool:
        """Whether the calibration is fit for inference: no plate flagged and the joints'
        spread within :data:`USABLE_JOINTS_MM`."""
        return not self.flags() and self.joints_mm <= USABLE_JOINTS_MM

    def verdict(self) -> str:
        """One sentence: usable for inference or not, and why."""
        spread = (
            f"the offsets' remaining uncertainty moves the joints by ±{self.joints_mm:.0f} mm "
            f"at most ({self.joint}; usable up to {USABLE_JOINTS_MM:.0f} mm)"
        )
        if self.usable():
            return f"usable for inference: {spread}; no plate flagged"
        if self.flags():
            bad = sorted({f.split(":")[0] for f in self.flags()})
            return f"NOT usable for inference: plates flagged ({', '.join(bad)}); {spread}"
        loose = [n for n, p in self.plates.items() if not p["determined"]]
        return (
            f"NOT usable for inference: {spread}; add frames where the body moves (a walk, a "
            f"range of motion) to determine {', '.join(loose) or 'the offsets'}"
        )

    def to_dict(self) -> dict:
        """JSON-ready content."""
        return {
            "frames": [list(f) for f in self.frames],
            "plates": self.plates,
            "joints_mm": self.joints_mm,
            "joint": self.joint,
            "usable": self.usable(),
            "verdict": self.verdict(),
            "left_open": self.left_open,
            "body": self.body,
            "distances": self.distances,
            "takes": self.takes,
            "functional": self.functional,
            "flags": self.flags(),
        }

    def __str__(self) -> str:
        lines = ["frames used: " + ", ".join(f"{_short(n)}: {k} of {t}" for n, k, t in self.frames)]
        lines.append(
            f"{'plate':16s} {'resid mm':>8s} {'deg':>5s} {'offset mm':>9s} {'deg':>6s} "
            f"{'joints ±mm':>10s} {'':14s}" + "".join(f"  {_short(c):>24s}" for c in self.takes)
        )
        for n, p in self.plates.items():
            row = (
                f"{n:16s} {p['residual_mm']:8.1f} {p['residual_deg']:5.1f} "
                f"{p['offset_mm']:9.1f} {p['offset_deg']:6.1f} {p['joints_mm']:10.1f} "
                f"{'determined' if p['determined'] else 'NOT determined':14s}"
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
        lines += [f"left open by the data alone: {u}" for u in self.left_open]
        lines += [f"from the plates' motion: {u}" for u in self.functional]
        lines += [f"FLAG {f}" for f in self.flags()]
        lines.append(self.verdict())
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
    found = determination(fit, state)
    for n, (mm, joint) in found.plates.items():
        plates[n]["joints_mm"] = _round(mm, 1)
        plates[n]["joint"] = SMPL_JOINT_NAMES[joint]
        plates[n]["determined"] = mm <= PLATE_JOINTS_MM
    report = CalibrationReport(
        frames=frames,
        plates=plates,
        joints_mm=_round(found.joints_mm, 1),
        joint=SMPL_JOINT_NAMES[found.joint],
        left_open=found.left_open,
    )
    report.body = body_proportions(fit, state)
    report.distances = plate_distances(fit, state)
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


def _round(x, digits: int = 2) -> float:
    v = float(x)
    return round(v, digits) if math.isfinite(v) else float("nan")
