"""Shape from a T-pose: the betas whose virtual plates best match the physical plate positions.

With per-plate offsets free, one T-pose cannot separate shape from offsets exactly; the shape
chosen is the one whose rigidly aligned virtual plate positions are nearest to the physical ones
(Σ‖t_off‖² smallest), with a small Gaussian prior on the betas. The alignment is the rigid fit
at every step (variable projection: its gradient terms vanish at the optimum, so it is held
fixed while differentiating).
"""

from __future__ import annotations

import torch

from rbmcap.calibrate.offsets import align_virtual
from rbmcap.calibrate.virtual import virtual_tpose

BETA_PRIOR = 1e-4
"""Weight (m² per unit beta²) of ‖β‖² against the summed squared plate distances (m²): a
weaker prior lets the shape absorb the offsets, a stronger one pulls it towards the mean shape.
How it was chosen: docs/history.md#how-the-settings-were-chosen."""


def shape_loss(synth, betas: torch.Tensor, phys_pos: torch.Tensor) -> torch.Tensor:
    """Σ_i ‖p_phys,i − (R p_virt,i(β) + t)‖² + BETA_PRIOR ‖β‖², (R, t) the rigid fit (held)."""
    pos, _ = virtual_tpose(synth, betas)
    rot, t = align_virtual(pos.detach(), phys_pos)
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
