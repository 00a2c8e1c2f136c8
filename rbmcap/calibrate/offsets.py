"""Per-plate constant offsets between physical and virtual plates, and their inverse.

Model: ``R_phys = R_virt · R_off`` and ``p_phys = p_virt + R_virt · t_off``, with the offsets
constant over a session and expressed in the virtual plate's frame
(docs/architecture.md#real-captures-and-calibration).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import roma
import torch

from rbmcap.errors import DataError
from rbmcap.geometry import nearest_rotation, rigid_registration


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


def align_virtual(
    virt_pos: torch.Tensor, phys_pos: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rigid alignment (R (3, 3), t (3,)) of the virtual plate positions (N, 3) onto the
    physical ones: the rigid fit, which makes Σ‖t_off‖² smallest (the gauge: a transform common
    to all plates cannot be told apart from the offsets, so the smallest offsets are chosen)."""
    return rigid_registration(virt_pos, phys_pos)


def plate_offsets(
    virt_pos: torch.Tensor, virt_rot: torch.Tensor, phys_pos: torch.Tensor, phys_rot: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Offsets of physical plates from virtual ones (both in the capture world).

    Args:
        virt_pos, phys_pos: (..., 3) metres; virt_rot, phys_rot: (..., 3, 3) world-from-plate.

    Returns:
        R_off (..., 3, 3) = R_virtᵀ R_phys and t_off (..., 3) = R_virtᵀ (p_phys − p_virt), metres.
    """
    rt = virt_rot.transpose(-1, -2)
    return rt @ phys_rot, (rt @ (phys_pos - virt_pos)[..., None])[..., 0]


def apply_calibration(capture, calib):
    """Map each physical plate of ``capture`` onto its virtual counterpart, every frame:
    ``R_virt = R_phys R_offᵀ`` and ``p_virt = p_phys − R_virt t_off``.

    Args:
        capture: a :class:`rbmcap.io.Capture` whose plate names all appear in ``calib.plates``.
        calib: a :class:`rbmcap.calibrate.Calibration`.

    Returns:
        a new Capture (float32; invalid entries stay zeros and identities).

    Raises:
        DataError: a plate of the capture has no offset in the calibration (named).
    """
    missing = [n for n in capture.names if n not in calib.plates]
    if missing:
        raise DataError(
            f"{capture.source or 'capture'}: plate {missing[0]!r} has no offset in the "
            f"calibration (it has {', '.join(calib.plates)})"
        )
    offs = [calib.plates[n] for n in capture.names]
    r_off = roma.rotvec_to_rotmat(torch.as_tensor(np.stack([o.rotation for o in offs])))
    t_off = torch.as_tensor(np.stack([o.position for o in offs]))
    r_phys = torch.as_tensor(capture.rot, dtype=torch.float64)
    r_virt = r_phys @ r_off.transpose(-1, -2)
    p_virt = torch.as_tensor(capture.pos, dtype=torch.float64) - (r_virt @ t_off[..., None])[..., 0]
    return replace(
        capture, pos=p_virt.float().numpy(), rot=r_virt.float().numpy(), valid=capture.valid.copy()
    )
