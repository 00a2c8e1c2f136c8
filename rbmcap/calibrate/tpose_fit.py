"""The T-pose quick start (``rbmcap calibrate --tpose``): a capture that begins with a still
T-pose, calibrated from that one pose.

1. The T-pose window: the stillest second near the start (:func:`detect_tpose`).
2. The mean plate poses there (:func:`mean_plates`).
3. The shape: the betas whose virtual T-pose plates (:func:`virtual_tpose`), rigidly aligned,
   lie nearest to the physical plate positions (:func:`fit_betas`). With per-plate offsets free,
   one T-pose cannot separate shape from offsets exactly; the shape chosen makes Σ‖t_off‖²
   smallest, with a small Gaussian prior on the betas. The alignment is the rigid fit at every
   step (variable projection: its gradient terms vanish at the optimum, so it is held while
   differentiating).
4. The rigid alignment of the virtual T-pose onto the plates (any rotation: a real T-pose leans
   a few degrees, which a yaw-only alignment would bake into every rotation offset; the rigid
   fit makes Σ‖t_off‖² smallest, the gauge: a transform common to all plates cannot be told
   apart from the offsets), then each plate's offset
   (:func:`rbmcap.calibrate.calibration.offsets_between`).
"""

from __future__ import annotations

import numpy as np
import roma
import torch

from rbmcap.calibrate.calibration import Calibration, PlateOffset, offsets_between
from rbmcap.calibrate.start import UPRIGHT
from rbmcap.errors import DataError
from rbmcap.geometry import nearest_rotation, rigid_registration, rotmat_geodesic_angle
from rbmcap.markers.plates import plate_frames

ROTATION_RADIUS_M = 0.1
"""Rotational speed counts as the linear speed of a point this far from the plate (m/rad): a
plate turning at 1 rad/s scores like one sliding at 0.1 m/s."""
BETA_PRIOR = 1e-4
"""Weight (m² per unit beta²) of ‖β‖² against the summed squared plate distances (m²): a
weaker prior lets the shape absorb the offsets, a stronger one pulls it towards the mean shape.
How it was chosen: docs/history.md#how-the-settings-were-chosen."""


def calibrate_tpose(
    capture, synth, *, frames: tuple[int, int] | None = None, betas=None
) -> Calibration:
    """Calibrate the physical plates of ``capture`` to the virtual ones of ``synth`` on its
    T-pose (module docstring).

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
        a_rot, a_t = rigid_registration(v_pos, phys_pos)
        r_off, t_off = offsets_between(v_pos @ a_rot.T + a_t, a_rot @ v_rot, phys_pos, phys_rot)
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


# ------------------------------------------------------------------------------ the window
def plate_speed(pos: np.ndarray, rot: np.ndarray, valid: np.ndarray, fps: float) -> np.ndarray:
    """Per frame step, the plates' mean speed ``|dp/dt| + ROTATION_RADIUS_M · |dθ/dt|``.

    Args:
        pos: (T, N, 3) metres; rot: (T, N, 3, 3) world-from-plate; valid: (T, N) bool.

    Returns:
        (T - 1,) float64 m/s over the plates seen in both frames of a step (inf if none).
    """
    lin = np.linalg.norm(np.diff(pos.astype(np.float64), axis=0), axis=-1)
    r = torch.as_tensor(rot, dtype=torch.float64)
    ang = rotmat_geodesic_angle(r[1:], r[:-1]).numpy()
    both = valid[1:] & valid[:-1]
    speed = (lin + ROTATION_RADIUS_M * ang) * fps
    count = both.sum(axis=1)
    total = np.where(both, speed, 0.0).sum(axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), np.inf)


def detect_tpose(
    pos: np.ndarray,
    rot: np.ndarray,
    valid: np.ndarray,
    fps: float,
    *,
    window_s: float = 1.0,
    search_s: float = 10.0,
) -> tuple[int, int]:
    """The stillest window of ``window_s`` seconds starting within the first ``search_s``.

    Stillness is the mean of :func:`plate_speed` over the window; a window in which some plate
    is seen in fewer than half of the frames is not a candidate (its offsets would rest on too
    few frames). Stillness is what is detected: the subject is trusted to hold the T-pose then.

    Args:
        pos, rot, valid: (T, N, 3), (T, N, 3, 3), (T, N) plates of the capture.
        fps: frame rate (Hz).

    Returns:
        (a, b): the frames [a, b) (array positions, half-open like a slice).

    Raises:
        DataError: the capture is shorter than the window, or no window has every plate seen.
    """
    num = len(pos)
    width = max(2, round(window_s * fps))
    if num < width:
        raise DataError(f"capture of {num} frames is shorter than the {window_s:g} s T-pose window")
    speed = plate_speed(pos, rot, valid, fps)
    last = min(num - width, max(0, round(search_s * fps)))
    csum = np.concatenate([[0.0], np.cumsum(np.where(np.isfinite(speed), speed, 1e6))])
    seen = np.concatenate([np.zeros((1, valid.shape[1])), np.cumsum(valid, axis=0)])
    starts = np.arange(last + 1)
    score = (csum[starts + width - 1] - csum[starts]) / (width - 1)
    enough = ((seen[starts + width] - seen[starts]) >= width / 2).all(axis=1)
    score = np.where(enough, score, np.inf)
    if not np.isfinite(score).any():
        raise DataError("no T-pose window: in every candidate window some plate is mostly unseen")
    a = int(np.argmin(score))
    return a, a + width


def mean_plates(capture, frames: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean plate poses over the frames [a, b) where each plate is seen.

    Returns:
        pos (N, 3) metres and rot (N, 3, 3) (the nearest rotation to the mean matrix), float64.

    Raises:
        DataError: a plate is never seen in the window (named).
    """
    a, b = frames
    valid = capture.valid[a:b]
    unseen = [n for n, seen in zip(capture.names, valid.any(axis=0)) if not seen]
    if unseen:
        raise DataError(f"plate {unseen[0]!r} is never seen in the T-pose frames [{a}, {b})")
    w = torch.as_tensor(valid, dtype=torch.float64)
    count = w.sum(0)
    pos = (torch.as_tensor(capture.pos[a:b], dtype=torch.float64) * w[..., None]).sum(0)
    rot = (torch.as_tensor(capture.rot[a:b], dtype=torch.float64) * w[..., None, None]).sum(0)
    return pos / count[:, None], nearest_rotation(rot / count[:, None, None])


# ------------------------------------------------------------------------------ the shape
def virtual_tpose(synth, betas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Plate poses of the zero-pose (T-pose) body, root upright, no translation (differentiable in
    ``betas``: sparse skinning of the plate vertices).

    Args:
        synth: a :class:`rbmcap.markers.Synthesizer` (body, marker vertices, plate topology).
        betas: (B,) shape.

    Returns:
        pos (N, 3) metres and rot (N, 3, 3) world-from-plate, float64, canonical Z-up frame.
    """
    body = synth.body
    poses = torch.zeros(24, 3, dtype=torch.float64)
    poses[0] = torch.tensor(UPRIGHT, dtype=torch.float64)
    rotmats = roma.rotvec_to_rotmat(poses).to(body.v_template.dtype)
    skinned, _ = body.skin_vertices_and_joints(
        synth.topology.skin_ids, rotmats, betas.to(body.v_template.dtype)
    )
    pos, rot = plate_frames(skinned, synth.topology, synth.standoff)
    return pos.double(), rot.double()


def shape_loss(synth, betas: torch.Tensor, phys_pos: torch.Tensor) -> torch.Tensor:
    """Σ_i ‖p_phys,i − (R p_virt,i(β) + t)‖² + BETA_PRIOR ‖β‖², (R, t) the rigid fit (held)."""
    pos, _ = virtual_tpose(synth, betas)
    rot, t = rigid_registration(pos.detach(), phys_pos)
    moved = pos @ rot.transpose(-1, -2) + t
    return ((moved - phys_pos) ** 2).sum() + BETA_PRIOR * (betas**2).sum()


def fit_betas(synth, phys_pos: torch.Tensor, *, iterations: int = 30) -> torch.Tensor:
    """Betas (B,) of the body whose T-pose plates best match ``phys_pos`` (N, 3) metres, float64
    (L-BFGS from the mean shape)."""
    betas = torch.zeros(synth.body.num_betas, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [betas], lr=1.0, max_iter=iterations, line_search_fn="strong_wolfe", tolerance_grad=1e-12
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = shape_loss(synth, betas, phys_pos)
        loss.backward()
        return loss

    opt.step(closure)
    return betas.detach()
