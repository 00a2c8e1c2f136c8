"""``rbmcap calibrate`` as one library call: read the inputs, calibrate, check, write, summarise."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rbmcap.calibrate.file import Calibration
from rbmcap.errors import ConfigError, DataError, FormatError


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


def calibrate_file(
    capture_paths,
    out,
    *,
    markers: str = "rbm14",
    frames: list[str] | None = None,
    betas: str | None = None,
    body: str = "standin",
    prior: str | None = None,
    check: bool = True,
    tpose: bool = False,
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

    Returns the calibration and a JSON-ready summary (:func:`summary`).
    """
    from rbmcap.baseline.prior import load_pose_prior
    from rbmcap.body import load_body_model
    from rbmcap.calibrate.fit import calibrate, session_captures
    from rbmcap.calibrate.takes import check_takes
    from rbmcap.calibrate.tposefit import calibrate_tpose
    from rbmcap.io.capture import Capture
    from rbmcap.markers.synth import Synthesizer

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
        calib = calibrate(captures, synth, frames=specs, betas=given, prior=pose_prior)
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
    """The JSON summary of :func:`calibrate_file` (angles in degrees, lengths in millimetres)."""

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
