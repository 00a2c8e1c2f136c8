"""``calibrate``: a session's captures → betas and each plate's offset, fitted over frames.

1. Each capture's plates are put in the marker set's order and frames are chosen for variety
   (:mod:`rbmcap.calibrate.frames`): a static gives one or a few, a take with motion up to
   ``max_frames``.
2. Left/right names are checked on those frames (:func:`rbmcap.calibrate.start.swapped_pairs`).
3. The fit over frames (:class:`rbmcap.calibrate.session.SessionFit`) estimates the betas, each
   frame's pose and every plate's constant offset.
4. Diagnostics (:mod:`rbmcap.calibrate.report`): residuals, what the data did not determine, the
   body's proportions beside the plates'; an implausible fit is one :class:`DataError`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import roma
import torch

from rbmcap.calibrate.file import Calibration, PlateOffset
from rbmcap.calibrate.frames import FrameSpec, select_frames
from rbmcap.calibrate.report import build_report, check_plausible
from rbmcap.calibrate.session import FitWeights, SessionFit
from rbmcap.calibrate.start import (
    check_pairs,
    leg_plates,
    side_pairs,
    swapped_pairs,
    upright_rotation,
)
from rbmcap.errors import DataError


def session_captures(captures, names: list[str], marker_set: str) -> list:
    """The captures with the marker set's plates in its order; DataError naming a plate that
    no capture has."""
    captures = [captures] if not isinstance(captures, Sequence) else list(captures)
    if not captures:
        raise DataError("no capture to calibrate")
    for cap in captures:
        missing = [n for n in names if n not in cap.names]
        if missing:
            raise DataError(
                f"{cap.source or 'capture'}: no plate {missing[0]!r} of marker set "
                f"{marker_set!r}; the capture has {', '.join(cap.names)} (map names with "
                f"`rbmcap import --map`)"
            )
    return [cap.select(names) for cap in captures]


def calibrate(
    captures,
    synth,
    *,
    frames: Sequence[FrameSpec] | None = None,
    betas=None,
    prior=None,
    weights: FitWeights | None = None,
    max_frames: int = 40,
    iterations: tuple[int, int, int] = (60, 150, 400),
) -> Calibration:
    """Calibrate the physical plates of one session's captures to the virtual plates of
    ``synth`` (see the module docstring).

    Args:
        captures: a :class:`rbmcap.io.Capture` or a list of them (a static, a take, ...), each
            holding the marker set's plate names.
        synth: a :class:`rbmcap.markers.Synthesizer` (body and marker set; realism unused).
        frames: per capture, None (chosen for variety), (a, b) (chosen within [a, b)) or a list
            of frame indices.
        betas: (B,) the subject's shape, held; None to fit it.
        prior: a pose prior (:class:`rbmcap.baseline.prior.GaussianMixturePrior`); None: the
            one shipped with rbmcap.
        weights: the objective's scales (:class:`FitWeights`).
        max_frames: most frames chosen per capture.
        iterations: L-BFGS iterations of the pose, positions and full stages.

    Returns:
        the :class:`Calibration`, with its diagnostics in ``.report``.

    Raises:
        DataError: a plate missing from a capture or never seen in the frames used, a left/right
            swap, or an implausible fit (betas beyond ±3, a plate far from its segment, a body
            that does not fit the plates); each names what it found.
    """
    names = list(synth.markers.names)
    caps = session_captures(captures, names, synth.markers.name)
    root = synth.markers.parents.index(-1)
    chosen, (pos, rot, valid) = _frames_used(caps, frames, names, root, max_frames)
    if prior is None:
        from rbmcap.baseline.prior import default_pose_prior

        prior = default_pose_prior()
    fit = SessionFit(
        synth, pos, rot, valid, prior=prior, weights=weights or FitWeights(), betas=betas
    )
    _check_sides(fit, names, root)
    state = fit.run(iterations)
    report = build_report(fit, state, caps, chosen)
    check_plausible(report, fit, state)
    return _calibration(state, report, caps, chosen, names)


def _calibration(state, report, caps, chosen, names: list[str]) -> Calibration:
    """The :class:`Calibration` of a finished fit, with its report."""
    rv = roma.rotmat_to_rotvec(state.r_off).numpy()
    t = state.t_off.numpy()
    plates = {
        n: PlateOffset(
            rv[i], t[i], report.plates[n]["residual_mm"], report.plates[n]["residual_deg"]
        )
        for i, n in enumerate(names)
    }
    root_rot = state.rotmats[0, 0] @ upright_rotation().T
    calib = Calibration(
        betas=state.betas.numpy().copy(),
        frames=[[int(i) for i in c] for c in chosen],
        rotation=roma.rotmat_to_rotvec(root_rot).numpy(),
        translation=state.trans[0].numpy().copy(),
        plates=plates,
        captures=[c.source or f"capture {k}" for k, c in enumerate(caps)],
    )
    calib.report = report
    return calib


def _frames_used(caps, frames, names, root: int, max_frames: int):
    """Per capture the frames chosen, and their plates stacked: pos (F, N, 3), rot, valid."""
    specs = list(frames) if frames is not None else [None] * len(caps)
    if len(specs) != len(caps):
        raise DataError(f"{len(specs)} frame selections for {len(caps)} captures")
    chosen = [
        select_frames(c.pos, c.rot, c.valid, root, spec=s, max_frames=max_frames)
        for c, s in zip(caps, specs)
    ]
    pos = np.concatenate([c.pos[i] for c, i in zip(caps, chosen)]).astype(np.float64)
    rot = np.concatenate([c.rot[i] for c, i in zip(caps, chosen)]).astype(np.float64)
    valid = np.concatenate([c.valid[i] for c, i in zip(caps, chosen)])
    unseen = [n for n, s in zip(names, valid.any(axis=0)) if not s]
    if unseen:
        raise DataError(
            f"plate {unseen[0]!r} is not seen in any frame used for calibration "
            f"({', '.join(c.source or 'capture' for c in caps)}); add a capture where it is"
        )
    return chosen, (pos, rot, valid)


def _check_sides(fit: SessionFit, names: list[str], root: int) -> None:
    """DataError when a left plate sits on the subject's right (see ``swapped_pairs``)."""
    with torch.no_grad():
        st = fit.state
        eye = torch.eye(3, dtype=torch.float64).expand(24, 3, 3).clone()
        eye[0] = upright_rotation()
        rest, _ = fit.virtual(eye[None], st.betas, torch.zeros(1, 3, dtype=torch.float64))
    pairs = side_pairs(names)
    swaps = swapped_pairs(rest[0], fit.pos, fit.valid, pairs, leg_plates(rest[0], root), root)
    check_pairs(names, swaps)
