"""Random plate observations for the rbm14 marker set: inputs for inference plumbing, not poses."""

from __future__ import annotations

import numpy as np
import roma
import torch


def random_observations(
    t: int, seed: int = 0, hidden: float = 0.2
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``t`` frames of 14 plates: positions ``(t, 14, 3)`` drawn from a standard normal,
    rotations ``(t, 14, 3, 3)`` from random rotation vectors, and visibility ``(t, 14)`` with
    about a ``hidden`` share of plates hidden, the chest (plate 1, the features' reference)
    always seen."""
    gen = torch.Generator().manual_seed(seed)
    pos = torch.randn(t, 14, 3, generator=gen)
    rot = roma.rotvec_to_rotmat(torch.randn(t, 14, 3, generator=gen))
    valid = torch.rand(t, 14, generator=gen) > hidden
    valid[:, 1] = True
    return pos.numpy(), rot.numpy(), valid.numpy()
