"""The virtual T-pose: plates of the body at zero pose, standing upright in a Z-up frame."""

from __future__ import annotations

import math

import roma
import torch

from rbmcap.markers.plates import plate_frames

UPRIGHT = (math.pi / 2, 0.0, 0.0)
"""Root rotation vector of the canonical virtual T-pose: SMPL's Y-up body turned Z-up (AMASS)."""


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
