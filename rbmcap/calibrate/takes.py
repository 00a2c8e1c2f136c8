"""Residuals of a calibration over whole takes, and plates that slipped mid-take.

With the calibration's betas and offsets held, each frame's pose is fitted to the plates (the
calibration objective with only the poses free, on up to ``max_frames`` frames spread over the
take). A plate whose residual is far above the others' is flagged inconsistent. A plate whose
residual *vector* (in its own frame) steps to another constant value mid-take slipped: the
best split of the take into a before and an after moves the mean residual by at least
``SLIP_MM`` and by four times the scatter around the two means. A calibration fitted across the
slip shares the step between both halves, so a vector test finds it where a test of the
residual's size would see the same size before and after.
"""

from __future__ import annotations

import numpy as np
import torch

from rbmcap.baseline.prior import default_pose_prior
from rbmcap.calibrate.objective import FitWeights, SessionFit
from rbmcap.markers.synth import Synthesizer

SLIP_MM = 10.0
"""A step of the mean residual vector by this much (mm) can mark a slip."""


def check_takes(
    calib, captures, synth, *, prior=None, max_frames: int = 200, weights: FitWeights | None = None
) -> dict[str, dict]:
    """Per capture, per plate: mean residual (mm, degrees) over the take and flags.

    Args:
        calib: a :class:`rbmcap.calibrate.Calibration` of the marker set of ``synth``.
        captures: captures with the marker set's plates
            (:func:`rbmcap.calibrate.session_fit.session_captures`).
        synth: the :class:`rbmcap.markers.Synthesizer` the calibration was fitted with.
        prior: the pose prior (None: the shipped one).
        max_frames: frames per take at most (evenly spread).
        weights: the objective's :class:`FitWeights` (None: the defaults).

    Returns:
        {capture name: {plate: {residual_mm, residual_deg, flags}}}.
    """
    if prior is None:
        prior = default_pose_prior()
    names = list(synth.markers.names)
    corrected = calib.joint_offset_array()
    if corrected is not None:  # the takes fitted on the subject's body, its joints corrected
        body = synth.body.with_joint_offsets(corrected)
        synth = Synthesizer(body, synth.markers, standoff=synth.standoff)
    arrays = calib.offsets(names)
    offsets = (torch.from_numpy(arrays.rotation), torch.from_numpy(arrays.position))
    out = {}
    for k, cap in enumerate(captures):
        idx = _spread_frames(cap, max_frames)
        if idx.size == 0:
            continue
        fit = SessionFit(
            synth,
            cap.pos[idx],
            cap.rot[idx],
            cap.valid[idx],
            prior=prior,
            weights=weights or FitWeights(),
            betas=calib.betas,
        )
        plates = _plate_entries(fit, offsets, names, idx)
        _flag_inconsistent(plates)
        out[cap.source or f"capture {k}"] = plates
    return out


def _spread_frames(cap, max_frames: int) -> np.ndarray:
    """(K,) indices of at most ``max_frames`` frames spread evenly over the capture, keeping
    those where at least one plate is seen."""
    idx = np.unique(
        np.linspace(0, cap.num_frames - 1, min(max_frames, cap.num_frames)).round().astype(int)
    )
    return idx[cap.valid[idx].any(axis=1)]


def _plate_entries(
    fit: SessionFit, offsets: tuple[torch.Tensor, torch.Tensor], names: list[str], idx: np.ndarray
) -> dict[str, dict]:
    """Fit the poses with the calibration's ``offsets`` held; per plate, the mean residual (mm,
    degrees) over the frames ``idx`` it is seen in and a slip flag where its residual steps."""
    fit.state.r_off, fit.state.t_off = offsets[0].clone(), offsets[1].clone()
    st = fit.fit_poses(200)
    dp, dr = (x.numpy() for x in fit.residuals(st))
    with torch.no_grad():
        p_hat, r_hat = fit.physical(st)
        vec = (r_hat.transpose(-1, -2) @ (fit.pos - p_hat)[..., None])[..., 0].numpy()
    plates = {}
    for i, n in enumerate(names):
        seen = ~np.isnan(dp[:, i])
        entry = {
            "residual_mm": _r(np.nanmean(dp[:, i]) if seen.any() else np.nan),
            "residual_deg": _r(np.nanmean(dr[:, i]) if seen.any() else np.nan),
            "flags": [],
        }
        slip = _slip(vec[seen, i] * 1000.0, idx[seen])
        if slip is not None:
            frame, before, after = slip
            entry["flags"].append(
                f"slip at frame {frame}: the plate's residual changes direction or size "
                f"there ({before:.1f} mm before, {after:.1f} mm after; a strap that moved?)"
            )
        plates[n] = entry
    return plates


def _flag_inconsistent(plates: dict[str, dict]) -> None:
    """Flag, in place, each plate not already flagged whose mean residual is above 15 mm and
    three times the median over the plates."""
    med = np.nanmedian([p["residual_mm"] for p in plates.values()])
    for p in plates.values():
        if p["residual_mm"] > max(15.0, 3 * med) and not p["flags"]:
            p["flags"].append(
                f"inconsistent over the take: {p['residual_mm']:.1f} mm (median {med:.1f} mm)"
            )


def _slip(res: np.ndarray, frames: np.ndarray) -> tuple[int, float, float] | None:
    """(frame, residual before, residual after) in mm of the best step in the residual vectors
    ``res`` (K, 3) mm, or None when no step stands out (module docstring)."""
    k = len(res)
    if k < 10:
        return None
    c = np.concatenate([np.zeros((1, 3)), np.cumsum(res, axis=0)])
    margin = max(3, k // 10)
    best, where = 0.0, None
    for s in range(margin, k - margin):
        before, after = c[s] / s, (c[k] - c[s]) / (k - s)
        step = float(np.linalg.norm(after - before))
        scatter = np.sqrt(
            (((res[:s] - before) ** 2).sum() + ((res[s:] - after) ** 2).sum()) / (3 * k)
        )
        gain = step**2 * s * (k - s) / k
        if step > max(SLIP_MM, 4 * scatter) and gain > best:
            size_b = float(np.linalg.norm(res[:s], axis=1).mean())
            size_a = float(np.linalg.norm(res[s:], axis=1).mean())
            best, where = gain, (int(frames[s]), size_b, size_a)
    return where


def _r(x) -> float:
    return round(float(x), 2)
