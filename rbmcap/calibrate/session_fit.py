"""A session's captures → the subject's shape and each plate's offset, fitted over frames
(:func:`calibrate`), and ``rbmcap calibrate`` as one call on files (:func:`calibrate_files`).

1. Each capture's plates are put in the marker set's order and frames are chosen for variety
   (:mod:`rbmcap.calibrate.frames`): a static gives one or a few, a take with motion up to
   ``max_frames``.
2. Left/right names are checked on those frames (:func:`rbmcap.calibrate.start.swapped_pairs`).
3. The fit over frames (:class:`rbmcap.calibrate.objective.SessionFit`) estimates the betas, each
   frame's pose and every plate's constant offset.
4. The joints the plates bracket (knees, ankles, elbows, wrists on rbm14) are measured from the
   plates' motion over every frame of the captures (:mod:`rbmcap.calibrate.functional`), the
   fitted body's joint centres the prior for what the motion leaves open.
5. Diagnostics (:mod:`rbmcap.calibrate.report`): residuals, what the data did not determine, the
   body's proportions beside the plates'; an implausible fit is one :class:`DataError`.
6. :func:`calibrate_files` reads the captures, runs :func:`calibrate` (or the T-pose quick
   start, :mod:`rbmcap.calibrate.tpose_fit`), checks the calibration over the whole takes
   (:func:`rbmcap.calibrate.takes.check_takes`) and writes the YAML atomically.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.baseline.prior import default_pose_prior, load_pose_prior
from rbmcap.body import load_body_model
from rbmcap.calibrate.calibration import Calibration, PlateOffset
from rbmcap.calibrate.frames import FrameSpec, select_frames
from rbmcap.calibrate.functional import (
    adjacent_pairs,
    check_joint_noise,
    in_frames,
    measure_joints,
)
from rbmcap.calibrate.joint_correction import joint_correction
from rbmcap.calibrate.objective import FitWeights, SessionFit
from rbmcap.calibrate.report import build_report, check_plausible
from rbmcap.calibrate.start import (
    check_pairs,
    leg_plates,
    side_pairs,
    swapped_pairs,
    upright_rotation,
)
from rbmcap.calibrate.takes import check_takes
from rbmcap.calibrate.tpose_fit import calibrate_tpose
from rbmcap.errors import ConfigError, DataError, FormatError
from rbmcap.io.capture import Capture
from rbmcap.markers.markerset import DEFAULT_MARKERS
from rbmcap.markers.synth import Synthesizer
from rbmcap.skeleton import SMPL_JOINT_NAMES


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
    joint_offsets: bool = True,
    joint_noise: str = "shared",
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
        joint_offsets: keep the subject's joint correction (:func:`subject_joints`) in the
            calibration; False: the body model's joints.
        joint_noise: the measured centres' noise rule (:data:`.functional.JOINT_NOISE`).

    Returns:
        the :class:`Calibration`, with its diagnostics in ``.report``.

    Raises:
        DataError: a plate missing from a capture or never seen in the frames used, a left/right
            swap, or an implausible fit (betas beyond ±3, a plate far from its segment, a body
            that does not fit the plates); each names what it found.
        ConfigError: an unknown ``joint_noise`` (before any fitting).
    """
    check_joint_noise(joint_noise)  # before the fit, not minutes into it
    names = list(synth.markers.names)
    caps = session_captures(captures, names, synth.markers.name)
    root = synth.markers.parents.index(-1)
    chosen, (pos, rot, valid) = _frames_used(caps, frames, names, root, max_frames)
    if prior is None:
        prior = default_pose_prior()
    fit = SessionFit(
        synth, pos, rot, valid, prior=prior, weights=weights or FitWeights(), betas=betas
    )
    _check_sides(fit, names, root)
    state = fit.run(iterations)
    report = build_report(fit, state, caps, chosen)
    check_plausible(report, fit, state)
    calib = _calibration(state, report, caps, chosen, names)
    calib.joints = functional_joints(fit, state, caps, synth.markers, joint_noise)
    calib.joint_offsets = subject_joints(calib, synth) if joint_offsets else {}
    report.functional = [_describe(j, calib.joint_offsets) for j in calib.joints.values()]
    return calib


def subject_joints(calib: Calibration, synth) -> dict[str, np.ndarray]:
    """The subject's joint correction (:func:`rbmcap.calibrate.joint_correction.joint_correction`)
    of the joints ``calib`` measured, by joint name (joints left where the regressor puts them
    are left out)."""
    names = list(synth.markers.names)
    d = joint_correction(
        calib.joints.values(), synth.body, synth.markers, calib.betas, calib.offsets(names)
    )
    return {SMPL_JOINT_NAMES[k]: d[k] for k in range(24) if d[k].any()}


def _describe(joint, corrections: dict) -> str:
    """The report's line for a measured joint, with how far the correction moved it."""
    moved = corrections.get(joint.joint)
    if moved is None:
        return f"{joint.describe()}; joint kept where the body model puts it"
    mm = 1000 * np.linalg.norm(moved)
    return f"{joint.describe()}; joint moved {mm:.0f} mm from the body model's"


def functional_joints(fit: SessionFit, state, caps, markers, noise: str = "shared") -> dict:
    """The joints the marker set's plates bracket, measured over every frame of ``caps``
    (:func:`rbmcap.calibrate.functional.measure_joints`, ``noise`` as there), with the fitted
    body's joint centres in the plates' frames (mean over the frames fitted) as the prior."""
    pairs = adjacent_pairs(markers)
    names = list(markers.names)
    with torch.no_grad():
        joints = fit.body.pose_joints(state.rotmats, state.betas, state.trans)[0].numpy()
    pos, rot, valid = fit.pos.numpy(), fit.rot.numpy(), fit.valid.numpy()
    priors = {}
    for pair in pairs:
        a, b = names.index(pair.parent), names.index(pair.child)
        both = valid[:, a] & valid[:, b]
        if both.any():
            j = joints[both, SMPL_JOINT_NAMES.index(pair.joint)]
            priors[pair.joint] = in_frames(
                j, rot[both, a], pos[both, a], rot[both, b], pos[both, b]
            )
    every = [np.concatenate([getattr(c, k) for c in caps]) for k in ("pos", "rot", "valid")]
    found = measure_joints(*every, names, pairs, priors, noise=noise)
    return {j.joint: j for j in found}


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


# ------------------------------------------------------------------ rbmcap calibrate
def parse_frames(text: str | None):
    """One capture's ``--frames``: None, ``auto`` or ``all`` → None (chosen); ``a:b`` → (a, b)
    (chosen within, half-open; ``a:`` to the end); ``i,j,k`` → explicit frame indices."""
    if text is None or str(text).strip() in ("auto", "all", ":"):
        return None
    text = str(text).strip()
    bad = ConfigError(f"--frames {text!r}: expected auto, a:b (0 <= a < b) or i,j,k (integers)")
    try:
        if ":" in text:
            a, _, b = text.partition(":")
            lo = int(a) if a else 0
            hi = int(b) if b else None
            if lo < 0 or (hi is not None and hi <= lo):
                raise bad
            return (lo, hi)
        idx = [int(p) for p in text.split(",")]
    except ValueError:
        raise bad from None
    if not idx or min(idx) < 0:
        raise bad
    return idx


def load_betas(path: str | Path) -> np.ndarray:
    """The ``betas`` array (B,) of an ``.npz`` (e.g. an AMASS motion file).

    Raises:
        FormatError: no such file, not a readable ``.npz``, no numeric ``betas``.
        DataError: betas has NaN or infinite values (the first named).
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            files = getattr(z, "files", None)
            if files is None or "betas" not in files:
                raise FormatError(f"{path}: no 'betas' array (it has {', '.join(files or [])})")
            raw = z["betas"]
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except FormatError:
        raise
    except Exception as exc:  # decoding a damaged archive fails in many ways: all are format
        raise FormatError(f"{path}: not an .npz file ({exc})") from None
    if raw.dtype.kind not in "biuf":
        raise FormatError(f"{path}: betas has dtype {raw.dtype}, expected numbers")
    betas = np.asarray(raw, dtype=np.float64).reshape(-1)
    if not np.isfinite(betas).all():
        k = int(np.flatnonzero(~np.isfinite(betas))[0])
        raise DataError(f"{path}: betas has NaN or infinite values (betas[{k}] = {betas[k]})")
    return betas


def calibrate_files(
    capture_paths,
    out,
    *,
    markers: str = DEFAULT_MARKERS,
    frames: list[str] | None = None,
    betas: str | None = None,
    body: str = "standin",
    prior: str | None = None,
    check: bool = True,
    tpose: bool = False,
    joint_offsets: bool = True,
    joint_noise: str = "shared",
) -> tuple[Calibration, dict]:
    """Calibrate the capture files ``capture_paths`` (one session) and write ``out`` (YAML,
    atomically; nothing is written when the fit is refused).

    Args:
        capture_paths: one path or several (a static, a take, ...).
        frames: per capture a ``--frames`` text (see :func:`parse_frames`), or None.
        betas: an ``.npz`` with the subject's ``betas`` (held), or None to fit them.
        prior: a pose prior ``.npz`` (default: the shipped one).
        check: also fit every frame of the takes with the calibration held and report residuals
            and slips (``report.takes``).
        tpose: the quick T-pose calibration (one capture starting with a T-pose).
        joint_offsets: keep the subject's joint correction (:func:`calibrate`).
        joint_noise: how the frames count against the joint centres' noise (:func:`calibrate`).

    Returns the calibration and a JSON-ready summary (:func:`summary`).
    """
    paths = [capture_paths] if isinstance(capture_paths, (str, Path)) else list(capture_paths)
    specs = [parse_frames(f) for f in (frames or [])]
    if specs and len(specs) != len(paths):
        raise ConfigError(f"{len(specs)} --frames for {len(paths)} captures: give one per capture")
    given = load_betas(betas) if betas is not None else None
    captures = [Capture.load(p) for p in paths]
    specs = [_to_end(s, c.num_frames) for s, c in zip(specs or [None] * len(paths), captures)]
    synth = Synthesizer(load_body_model(body), markers)
    pose_prior = load_pose_prior(prior) if prior is not None else None
    if tpose:
        if len(captures) != 1:
            raise ConfigError("--tpose calibrates on one capture")
        window = specs[0] if isinstance(specs[0], tuple) else None
        calib = calibrate_tpose(captures[0], synth, frames=window, betas=given)
    else:
        calib = calibrate(
            captures,
            synth,
            frames=specs,
            betas=given,
            prior=pose_prior,
            joint_offsets=joint_offsets,
            joint_noise=joint_noise,
        )
        if check:
            caps = session_captures(captures, list(synth.markers.names), synth.markers.name)
            calib.report.takes = check_takes(calib, caps, synth, prior=pose_prior)
    calib.save(out)
    return calib, summary(calib, given is not None)


def _to_end(spec, num: int):
    """``(a, None)`` → ``(a, num)``; anything else unchanged."""
    if isinstance(spec, tuple) and spec[1] is None:
        return (spec[0], num)
    return spec


def summary(calib: Calibration, betas_given: bool) -> dict:
    """The JSON summary of :func:`calibrate_files` (angles in degrees, lengths in millimetres)."""

    def r(x, scale=1.0) -> list[float]:
        return [round(float(v) * scale, 3) for v in np.asarray(x).reshape(-1)]

    deg, mm = float(np.degrees(1.0)), 1000.0
    plates = {
        n: {
            "rotation_offset_deg": round(float(np.linalg.norm(o.rotation)) * deg, 3),
            "rotation_offset_rotvec_deg": r(o.rotation, deg),
            "position_offset_mm": r(o.position, mm),
            "position_offset_norm_mm": round(float(np.linalg.norm(o.position)) * mm, 3),
        }
        for n, o in calib.plates.items()
    }
    return {
        "frames": [len(f) for f in calib.frames],
        "captures": list(calib.captures),
        "betas": r(calib.betas),
        "betas_given": betas_given,
        "alignment": {
            "rotation_deg": r(calib.rotation, deg),
            "translation_mm": r(calib.translation, mm),
        },
        "plates": plates,
        "report": None if calib.report is None else calib.report.to_dict(),
    }
