"""Residuals of a calibration over whole takes, and plates that slipped mid-take.

With the calibration's betas and offsets held, each frame's pose is fitted to the plates (the
calibration objective with only the poses free, on up to ``max_frames`` frames spread over the
take). A plate whose residual is far above the others' is flagged inconsistent; a plate whose
residual steps up and stays up (the best split of the take into a before and an after, the
after ``SLIP_MM`` worse) is flagged as a slip, with the frame where it happened.
"""

from __future__ import annotations

import numpy as np
import roma
import torch

from rbmcap.calibrate.session import FitWeights, SessionFit

SLIP_MM = 10.0
"""A rise of the mean position residual by this much (and 3× the before) marks a slip."""


def check_takes(calib, captures, synth, *, prior=None, max_frames: int = 200,
                weights: FitWeights | None = None) -> dict[str, dict]:  # fmt: skip
    """Per capture, per plate: mean residual (mm, degrees) over the take and flags.

    Args:
        calib: a :class:`rbmcap.calibrate.Calibration` of the marker set of ``synth``.
        captures: captures with the marker set's plates (``rbmcap.calibrate.fit.session_captures``).
        synth: the :class:`rbmcap.markers.Synthesizer` the calibration was fitted with.
        prior: the pose prior (None: the shipped one).
        max_frames: frames per take at most (evenly spread).

    Returns:
        {capture name: {plate: {residual_mm, residual_deg, flags}}}.
    """
    if prior is None:
        from rbmcap.baseline.prior import default_pose_prior

        prior = default_pose_prior()
    names = list(synth.markers.names)
    r_off = roma.rotvec_to_rotmat(torch.as_tensor(
        np.stack([calib.plates[n].rotation for n in names]), dtype=torch.float64))  # fmt: skip
    t_off = torch.as_tensor(np.stack([calib.plates[n].position for n in names]),
                            dtype=torch.float64)  # fmt: skip
    out = {}
    for k, cap in enumerate(captures):
        idx = np.unique(np.linspace(0, cap.num_frames - 1, min(max_frames, cap.num_frames))
                        .round().astype(int))  # fmt: skip
        idx = idx[cap.valid[idx].any(axis=1)]
        if idx.size == 0:
            continue
        fit = SessionFit(synth, cap.pos[idx], cap.rot[idx], cap.valid[idx], prior=prior,
                         weights=weights or FitWeights(), betas=calib.betas)  # fmt: skip
        fit.state.r_off, fit.state.t_off = r_off.clone(), t_off.clone()
        st = fit._stage(fit.state, 200, betas=False, offsets=False, rotation=True)
        dp, dr = (x.numpy() for x in fit.residuals(st))
        plates = {}
        for i, n in enumerate(names):
            seen = ~np.isnan(dp[:, i])
            entry = {"residual_mm": _r(np.nanmean(dp[:, i]) if seen.any() else np.nan),
                     "residual_deg": _r(np.nanmean(dr[:, i]) if seen.any() else np.nan),
                     "flags": []}  # fmt: skip
            slip = _slip(dp[seen, i], idx[seen])
            if slip is not None:
                frame, before, after = slip
                entry["flags"].append(
                    f"slip: residual rises from {before:.1f} to {after:.1f} mm at frame "
                    f"{frame} (a strap that moved?)"
                )
            plates[n] = entry
        med = np.nanmedian([p["residual_mm"] for p in plates.values()])
        for p in plates.values():
            if p["residual_mm"] > max(15.0, 3 * med) and not p["flags"]:
                p["flags"].append(f"inconsistent over the take: {p['residual_mm']:.1f} mm "
                                  f"(median {med:.1f} mm)")  # fmt: skip
        out[cap.source or f"capture {k}"] = plates
    return out


def _slip(res: np.ndarray, frames: np.ndarray) -> tuple[int, float, float] | None:
    """(frame, mean before, mean after) of the best step up in ``res`` (K,), or None."""
    k = len(res)
    if k < 10:
        return None
    c = np.concatenate([[0.0], np.cumsum(res)])
    best, where = 0.0, None
    for s in range(max(3, k // 10), k - max(3, k // 10)):
        before, after = c[s] / s, (c[k] - c[s]) / (k - s)
        gain = (after - before) ** 2 * s * (k - s) / k
        if after - before > SLIP_MM and after > 3 * before and gain > best:
            best, where = gain, (int(frames[s]), float(before), float(after))
    return where


def _r(x) -> float:
    return round(float(x), 2)
