"""``calibrate_tpose``: the quick start where a capture begins with a T-pose.

Betas, the alignment of the virtual T-pose and per-plate offsets read off that one still pose.
"""

from __future__ import annotations

import numpy as np
import roma
import torch

from rbmcap.calibrate.file import Calibration, PlateOffset
from rbmcap.calibrate.offsets import align_virtual, mean_plates, plate_offsets
from rbmcap.calibrate.shape import fit_betas
from rbmcap.calibrate.tpose import detect_tpose
from rbmcap.calibrate.virtual import virtual_tpose
from rbmcap.errors import DataError


def calibrate_tpose(
    capture, synth, *, frames: tuple[int, int] | None = None, betas=None
) -> Calibration:
    """Calibrate the physical plates of ``capture`` to the virtual ones of ``synth``.

    Steps: the T-pose window (``frames`` [a, b), or :func:`detect_tpose`); the mean plate poses
    there; the shape (``betas`` given, or :func:`rbmcap.calibrate.shape.fit_betas`); the rigid
    alignment of the virtual zero-pose body onto the plate positions (any rotation: a real
    T-pose leans a few degrees, which a yaw-only alignment would bake into every rotation
    offset); then each plate's ``R_off = R_virtᵀ R_phys``, ``t_off = R_virtᵀ (p_phys − p_virt)``.

    Args:
        capture: a :class:`rbmcap.io.Capture` with the marker set's plate names.
        synth: a :class:`rbmcap.markers.Synthesizer` (body and marker set; realism unused).
        frames: the T-pose window, array positions, half-open; default detected.
        betas: (B,) the subject's shape, or None to estimate it.

    Raises:
        DataError: a marker-set plate is missing from the capture, frames out of range, or a
            plate unseen throughout the window.
    """
    names = list(synth.markers.names)
    missing = [n for n in names if n not in capture.names]
    if missing:
        raise DataError(
            f"{capture.source or 'capture'}: no plate {missing[0]!r} of marker set "
            f"{synth.markers.name!r}; the capture has {', '.join(capture.names)}"
        )
    cap = capture.select(names)
    window = _window(cap, frames)
    phys_pos, phys_rot = mean_plates(cap, window)
    if betas is None:
        b = fit_betas(synth, phys_pos)
    else:
        b = torch.as_tensor(np.asarray(betas, dtype=np.float64).reshape(-1))
    with torch.no_grad():
        v_pos, v_rot = virtual_tpose(synth, b)
        a_rot, a_t = align_virtual(v_pos, phys_pos)
        r_off, t_off = plate_offsets(v_pos @ a_rot.T + a_t, a_rot @ v_rot, phys_pos, phys_rot)
        rv_off = roma.rotmat_to_rotvec(r_off)
    plates = {n: PlateOffset(rv_off[i].numpy(), t_off[i].numpy()) for i, n in enumerate(names)}
    return Calibration(
        betas=b.numpy().astype(np.float64),
        frames=[list(range(*window))],
        captures=[capture.source or "capture"],
        rotation=roma.rotmat_to_rotvec(a_rot).numpy(),
        translation=a_t.numpy(),
        plates=plates,
    )


def _window(cap, frames: tuple[int, int] | None) -> tuple[int, int]:
    if frames is None:
        return detect_tpose(cap.pos, cap.rot, cap.valid, cap.fps)
    a, b = int(frames[0]), int(frames[1])
    if not 0 <= a < b <= cap.num_frames:
        raise DataError(
            f"T-pose frames [{a}, {b}) out of range: the capture has {cap.num_frames} frames"
        )
    return a, b
