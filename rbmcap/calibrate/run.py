"""``rbmcap calibrate`` as one library call: read the inputs, calibrate, write, summarise."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rbmcap.calibrate.file import Calibration
from rbmcap.calibrate.fit import calibrate
from rbmcap.errors import ConfigError, DataError, FormatError


def parse_frames(text: str | None) -> tuple[int, int] | None:
    """``"a:b"`` → (a, b) (array positions, half-open); None stays None; ConfigError otherwise."""
    if text is None:
        return None
    parts = str(text).split(":")
    try:
        a, b = (int(p) for p in parts)
    except ValueError:
        raise ConfigError(f"--frames {text!r}: expected a:b, two integers with a < b") from None
    if not 0 <= a < b:
        raise ConfigError(f"--frames {text!r}: expected 0 <= a < b")
    return a, b


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
    capture_path, out, *, markers: str = "rbm14", frames: str | None = None,
    betas: str | None = None, body: str = "standin",
) -> tuple[Calibration, dict]:  # fmt: skip
    """Calibrate the capture file ``capture_path`` and write ``out`` (YAML, atomically).

    Returns the calibration and a JSON-ready summary: ``frames`` [a, b), ``fps``, ``betas``,
    ``betas_given``, ``alignment`` (degrees, millimetres) and per plate ``rotation_offset_deg``
    (angle), ``rotation_offset_rotvec_deg`` and ``position_offset_mm`` (vector and norm).
    """
    from rbmcap.body import load_body_model
    from rbmcap.io.capture import Capture
    from rbmcap.markers.synth import Synthesizer

    window = parse_frames(frames)
    given = load_betas(betas) if betas is not None else None
    capture = Capture.load(capture_path)
    synth = Synthesizer(load_body_model(body), markers)
    calib = calibrate(capture, synth, frames=window, betas=given)
    calib.save(out)
    return calib, summary(calib, capture.fps, given is not None)


def summary(calib: Calibration, fps: float, betas_given: bool) -> dict:
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
        "frames": [int(calib.frames[0]), int(calib.frames[1])],
        "seconds": [round(calib.frames[0] / fps, 3), round(calib.frames[1] / fps, 3)],
        "betas": r(calib.betas),
        "betas_given": betas_given,
        "alignment": {
            "rotation_deg": r(calib.rotation, deg),
            "translation_mm": r(calib.translation, mm),
        },
        "plates": plates,
    }
