"""Inference on a real capture: plates matched by name, calibration, frame rate, SMPL motion out.

:func:`predict_capture` is what :meth:`Predictor.predict_capture` runs:

1. the capture's plates are matched to the checkpoint's marker set **by name** (capture plates
   the marker set does not use are ignored; a marker-set plate the capture lacks is one
   :class:`DataError` naming it), so the capture's plate order does not matter;
2. a calibration (:class:`rbmcap.calibrate.Calibration`), when given, maps the physical plates
   onto their virtual counterparts (``Calibration.apply``);
3. when the capture's rate differs from the rate the network was trained at, the observations
   are resampled to that rate (positions linearly, rotations by slerp, a sample valid only where
   both neighbours are), predicted there, and the motion is sampled back at the capture's own
   frame times, so the result has the capture's frame count and fps. The training rate is the
   checkpoint's ``fps`` hyper-parameter (see :mod:`rbmcap.checkpoint`);
4. shape: with a calibration that carries ``betas`` (fitted over the calibration's frames),
   those betas are used, and the body is placed on the plates: each frame's ``trans``
   is the least-squares translation of the virtual plates (the predicted pose on the calibrated
   body) onto the calibrated plates seen in that frame, i.e. their mean difference (see
   :func:`place_on_plates`): the network's own ``trans`` puts the pelvis where it belongs for
   *its* shape estimate, not for the calibrated shape. Frames with no plate seen keep the
   pelvis where the network put it. Without a calibration: the network's betas
   averaged over the whole capture, and its ``trans``.

Invalid plates are masked through ``valid`` (the network never sees their zeros as data).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.body import load_body_model
from rbmcap.errors import DataError
from rbmcap.geometry import rotmat_slerp
from rbmcap.markers.synth import Synthesizer
from rbmcap.motion.resample import resample_times, sample_frames
from rbmcap.motion.smpl_motion import GENDERS, SMPLMotion


def model_fps(predictor) -> float:
    """The frame rate (Hz) of the data the predictor's network was trained on, as its checkpoint
    records it (the ``fps`` hyper-parameter)."""
    return predictor.fps


def match_plates(capture, names: list[str], marker_set: str):
    """The capture's plates named ``names`` (the marker set's plates), in that order (a
    :class:`~rbmcap.io.capture.Capture`).

    Raises:
        DataError: a marker-set plate is missing from the capture (naming every missing one and
            what the capture has).
    """
    label = capture.source or "capture"
    missing = [n for n in names if n not in capture.names]
    if missing:
        raise DataError(
            f"{label}: no plate {', '.join(map(repr, missing))} of marker set {marker_set!r}; "
            f"the capture has {', '.join(capture.names)} (map names with `rbmcap import --map`)"
        )
    return capture.select(names)


def calibrated_plates(capture, names: list[str], marker_set: str, calibration=None):
    """The capture's plates named ``names`` in that order (:func:`match_plates`), mapped onto
    their virtual counterparts by ``calibration`` when given (a
    :class:`~rbmcap.io.capture.Capture`).

    Raises:
        DataError: a marker-set plate is missing from the capture, or it has no frames.
        ConfigError: the calibration has no offset for a plate (it names the calibration file).
    """
    cap = match_plates(capture, names, marker_set)
    if calibration is not None:
        cap = calibration.apply(cap)
    if cap.num_frames == 0:
        raise DataError(f"{capture.source or 'capture'}: no frames")
    return cap


def _lerp(x: np.ndarray, lo, hi, w) -> np.ndarray:
    shape = (-1,) + (1,) * (x.ndim - 1)
    return x[lo] * (1.0 - w.reshape(shape)) + x[hi] * w.reshape(shape)


def _interp_rotations(rot: np.ndarray, lo, hi, w) -> np.ndarray:
    """(T, J, 3, 3) rotations sampled per (lo, hi, w), float64 in and out."""
    r = torch.from_numpy(np.asarray(rot, dtype=np.float64))
    wt = torch.from_numpy(w)[:, None].expand(len(w), r.shape[1])
    return rotmat_slerp(r[lo], r[hi], wt).numpy()


def resample_observations(pos, rot, valid, fps_in: float, fps_out: float):
    """Plate observations at ``fps_out``: pos (K, N, 3) linear, rot (K, N, 3, 3) slerp, valid
    (K, N) where both neighbours are valid; K frames cover the input's whole time span."""
    times = resample_times(len(pos), fps_in, fps_out, cover=True)
    lo, hi, w = sample_frames(len(pos), fps_in, times)
    ok = valid[lo] & (valid[hi] | (w[:, None] < 1e-9))
    return (
        _lerp(pos.astype(np.float64), lo, hi, w).astype(np.float32),
        _interp_rotations(rot, lo, hi, w).astype(np.float32),
        ok,
    )


def _calibrated_betas(predictor, params, calibration, obs):
    """(betas (B,), trans (T, 3)): the calibration's betas with the body placed on the plates
    (:func:`place_on_plates`), or the prediction's when the calibration has none."""
    betas = getattr(calibration, "betas", None)
    if betas is None:
        return params.betas, params.trans
    nb = predictor.model.num_betas
    given = torch.zeros(nb)
    b = torch.as_tensor(np.asarray(betas, dtype=np.float32)).reshape(-1)[:nb]
    given[: len(b)] = b
    rest = predictor.model.joint_model.rest_joints
    with torch.no_grad():
        shift = rest(params.betas[None])[0, 0] - rest(given[None])[0, 0]
    synth = Synthesizer(checkpoint_body(predictor.body_id), predictor.marker_set)
    trans = place_on_plates(synth, params.poses, given, obs[0], obs[2])
    seen = obs[2].any(axis=1)
    fallback = params.trans + shift
    return given, torch.where(torch.as_tensor(seen)[:, None], trans.float(), fallback)


def place_on_plates(synth, poses, betas, pos, valid) -> torch.Tensor:
    """Per-frame root translation putting the virtual plates on the observed ones.

    The translation minimising Σ_i valid_ti ‖p_ti − (v_ti(pose_t, β) + τ_t)‖² is the mean of
    p_ti − v_ti over the plates seen in frame t (all plates weigh the same: the residual of one
    badly predicted limb is spread over 14 plates, while any single torso plate would carry its
    own soft-tissue wobble into the whole body).

    Args:
        synth: a :class:`~rbmcap.markers.synth.Synthesizer` (the checkpoint's body and marker
            set, no realism).
        poses: (T, 24, 3) axis-angle; betas: (B,); pos: (T, N, 3) m observed (calibrated) plate
            positions; valid: (T, N) bool.

    Returns:
        (T, 3) float64 metres; frames with no plate seen get zeros (the caller decides).
    """
    p = np.asarray(poses, dtype=np.float32)
    b = np.asarray(betas, dtype=np.float32)
    virt = synth(p, np.zeros((len(p), 3), np.float32), b).pos.astype(np.float64)
    w = np.asarray(valid, dtype=np.float64)
    diff = (np.asarray(pos, dtype=np.float64) - virt) * w[..., None]
    return torch.from_numpy(diff.sum(1) / np.maximum(w.sum(1), 1.0)[:, None])


def _gender(body_id: str) -> str:
    gender = body_id.rsplit("/", 1)[-1]
    return gender if gender in GENDERS else "neutral"


def predict_capture(predictor, capture, calibration=None, *, progress: bool = False) -> SMPLMotion:
    """SMPL motion of a capture (see the module docstring for each step).

    Args:
        predictor: a :class:`~rbmcap.inference.predictor.Predictor`.
        capture: a :class:`~rbmcap.io.capture.Capture` (world Z up, metres).
        calibration: ``None`` or a ``rbmcap.calibrate.Calibration`` of the same session.
        progress: a progress bar over the network's chunks on stderr.

    Returns:
        :class:`SMPLMotion` with the capture's frame count and fps: ``poses`` (T, 24, 3),
        ``trans`` (T, 3) m, world Z up, ``betas`` (B,), the checkpoint body's gender.
    """
    cap = calibrated_plates(capture, predictor.marker_names, predictor.marker_set, calibration)
    return predict_plates(predictor, cap, calibration, capture.source, progress=progress)


def predict_plates(
    predictor, cap, calibration=None, source: str | None = None, *, progress: bool = False
) -> SMPLMotion:
    """:func:`predict_capture` from steps 3 on: ``cap`` holds the marker set's plates in its
    order, already calibrated (:func:`calibrated_plates`); ``source`` names the capture."""
    fps = model_fps(predictor)
    same_rate = abs(fps - cap.fps) <= 1e-6 * fps
    obs = (cap.pos, cap.rot, cap.valid)
    if not same_rate:
        obs = resample_observations(*obs, cap.fps, fps)
    params = predictor.predict(*obs, progress=progress)
    betas, trans = _calibrated_betas(predictor, params, calibration, obs)
    poses, trans = params.poses.double().numpy(), trans.double().numpy()
    if not same_rate:
        lo, hi, w = sample_frames(len(poses), fps, np.arange(cap.num_frames) / cap.fps)
        rotmats = roma.rotvec_to_rotmat(torch.from_numpy(poses)).numpy()
        rotmats = _interp_rotations(rotmats, lo, hi, w)
        poses = roma.rotmat_to_rotvec(torch.from_numpy(rotmats)).numpy()
        trans = _lerp(trans, lo, hi, w)
    info = {
        "capture": source,
        "marker_set": predictor.marker_set,
        "model_fps": fps,
        "calibrated": calibration is not None,
    }
    name = Path(source).stem if source else "capture"
    return SMPLMotion(
        poses=poses,
        trans=trans,
        betas=betas.double().numpy(),
        gender=_gender(predictor.body_id),
        fps=cap.fps,
        name=name,
        source=info,
        joint_offsets=calibration.joint_offset_array() if calibration is not None else None,
    )


def checkpoint_body(body_id: str, spec: str | None = None):
    """The body model a checkpoint was trained on (``body_id`` as the checkpoint records it:
    ``standin-v1/neutral`` or ``smpl:/path/to/folder/male``), or ``spec`` when given.

    Raises:
        ModelError: the model file is not found (pass ``spec``, e.g. ``--model``).
    """
    gender = _gender(body_id)
    if spec is not None:
        return load_body_model(spec, gender=gender)
    if body_id.startswith("standin"):
        return load_body_model("standin", gender=gender)
    kind, _, rest = body_id.partition(":")
    return load_body_model(rest.rsplit("/", 1)[0], gender=gender, kind=kind or None)
