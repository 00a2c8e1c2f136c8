"""Shape and translation fitted to the plates in closed form, given the network's pose.

A network's joint error lies as much in *where* its body stands and how big it is as in its
rotations (docs/history.md#the-plate-fit). Given the rotations, the plates' positions are linear
in shape and translation, so both follow from one small least-squares problem instead of being
regressed:

    p_ti ≈ J_k(θ_t, β) + G_tk (P_i(β) − J_k^rest(β)) + τ_t

with k the joint carrying plate i, G_tk its global rotation, J_k(θ, β) the posed joint (the
rest joints turned down the tree, linear in β for fixed rotations), P_i(β) the plate's rest
position (linear in β: its shape directions are measured on the body) and τ_t the root
translation (SMPL ``trans``). Per frame τ_t is the mean residual over the plates seen; β is
shared by the window (or, for causal networks, by every frame so far: running sums), with a
ridge pull of strength ``prior_weight`` (m², the weight of the network's own betas estimate).
Everything is differentiable, so training sees the fitted shape and translation.

The plate is taken as rigid on its carrying bone (its skin is skinned by blended weights near
joints); that approximation and the plates' own placement noise bound what the fit can reach
even from the true rotations.

Shapes: ``global_rots (..., T, 24, 3, 3)``, ``pos (..., T, N, 3)`` metres, ``valid (..., T, N)``,
``betas_prior (..., T, B)``; all in one frame per time step (world, or the network's heading
frame: the fit is invariant to a per-frame rigid change of frame).
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from rbmcap.errors import ConfigError
from rbmcap.skeleton import SMPL_PARENTS


class PlateFitResult(NamedTuple):
    betas: torch.Tensor
    """(..., T, B) fitted shape (constant over a window, or running for causal fits)."""
    trans: torch.Tensor
    """(..., T, 3) root translation (SMPL ``trans``) in the plates' frame, metres."""
    seen: torch.Tensor
    """(..., T) bool: frames with at least one plate seen (elsewhere ``trans`` is meaningless)."""
    carry: tuple[torch.Tensor, torch.Tensor]
    """The normal equations summed up to the last frame (for a stream's next call)."""


class PlateFit(torch.nn.Module):
    """Closed-form shape and translation from plate positions and bone rotations.

    Args:
        carriers: (N,) SMPL joint carrying each plate.
        plate_rest_pos: (N, 3) plate positions at rest, zero betas (canonical frame, metres).
        plate_shapedirs: (N, 3, B) change of the plate rest positions per unit beta.
        joint_template: (24, 3) rest joints at zero betas; joint_shapedirs: (24, 3, B).
        prior_weight: ridge strength (m²) pulling the fitted betas to the network's.
    """

    def __init__(
        self,
        carriers,
        plate_rest_pos: torch.Tensor,
        plate_shapedirs: torch.Tensor,
        joint_template: torch.Tensor,
        joint_shapedirs: torch.Tensor,
        prior_weight: float,
    ) -> None:
        super().__init__()
        nb = min(plate_shapedirs.shape[-1], joint_shapedirs.shape[-1])
        carriers = [int(k) for k in carriers]
        # Column 0: the zero-betas body; columns 1..B: one unit of each beta.
        rest = torch.cat([joint_template[None], joint_shapedirs[..., :nb].permute(2, 0, 1)])
        plates = torch.cat([plate_rest_pos[None], plate_shapedirs[..., :nb].permute(2, 0, 1)])
        # A posed plate is the root's rest position plus, down its chain, each bone's rest vector
        # turned by the bone's parent's global rotation, plus its arm from the carrying joint
        # turned by that joint's: one gather, one product and one sum over the (plate, term)
        # pairs, whatever the depth (a stream's frame pays per operation, not per flop).
        turn, vectors, owner = [], [], []
        for i, k in enumerate(carriers):
            turn.append(k)
            vectors.append(plates[:, i] - rest[:, k])
            owner.append(i)
            a = k
            while SMPL_PARENTS[a] >= 0:
                up = SMPL_PARENTS[a]
                turn.append(up)
                vectors.append(rest[:, a] - rest[:, up])
                owner.append(i)
                a = up
        incidence = torch.zeros(len(carriers), len(turn))
        incidence[owner, range(len(turn))] = 1.0
        self.register_buffer("turn", torch.tensor(turn), persistent=False)
        vectors = torch.stack(vectors).transpose(-1, -2).float()  # (P, 3, 1 + B)
        self.register_buffer("vectors", vectors.contiguous(), persistent=False)
        self.register_buffer("incidence", incidence, persistent=False)
        self.register_buffer("root_rest", rest[:, None, 0].float(), persistent=False)
        self.num_betas = nb
        if not float(prior_weight) > 0:  # the normal equations need the ridge to be solvable
            raise ConfigError(f"plate_fit.prior_weight must be > 0, got {prior_weight!r}")
        self.prior_weight = float(prior_weight)

    def design(self, global_rots: torch.Tensor) -> torch.Tensor:
        """(..., T, 1 + B, N, 3): plate positions (root at rest, no translation) of the zero-betas
        body (column 0) and their change per unit of each beta, for these rotations."""
        turned = global_rots[..., self.turn, :, :] @ self.vectors  # (..., T, P, 3, 1 + B)
        return torch.einsum("np,...pcb->...bnc", self.incidence, turned) + self.root_rest

    def forward(
        self, global_rots, pos, valid, betas_prior, causal: bool = False, carry=None
    ) -> PlateFitResult:
        """Fit (see the module docstring). ``carry`` (h (..., 1, B, B), g (..., 1, B)): normal
        equations summed over earlier frames (a stream's past), added to a causal fit's."""
        a = self.design(global_rots)
        w = valid.to(pos.dtype)
        count = w.sum(-1, keepdim=True).clamp_min(1.0)  # (..., T, 1)
        a_mean = (a * w[..., None, :, None]).sum(-2) / count[..., None]  # (..., T, 1+B, 3)
        p_mean = (pos * w[..., None]).sum(-2) / count
        x = (a - a_mean[..., None, :]) * w[..., None, :, None]
        y = (pos - p_mean[..., None, :]) * w[..., None] - x[..., 0, :, :]
        xb = x[..., 1:, :, :]
        h = torch.einsum("...bnc,...dnc->...bd", xb, xb)
        g = torch.einsum("...bnc,...nc->...b", xb, y)
        if causal:
            h, g = h.cumsum(-3), g.cumsum(-2)
            if carry is not None:
                h, g = h + carry[0], g + carry[1]
        else:
            h = h.sum(-3, keepdim=True).expand_as(h)
            g = g.sum(-2, keepdim=True).expand_as(g)
        prior = betas_prior[..., : self.num_betas]
        eye = torch.eye(self.num_betas, dtype=h.dtype, device=h.device)
        rhs = (g + self.prior_weight * prior)[..., None]
        # h + λI is symmetric positive definite (λ > 0), so the solve cannot fail: its check
        # (a synchronising call, and a second library call in a compiled stream) is skipped.
        lhs = h + self.prior_weight * eye
        betas = torch.linalg.solve_ex(lhs, rhs, check_errors=False)[0][..., 0]
        placed = a_mean[..., 0, :] + (betas[..., None, :] @ a_mean[..., 1:, :])[..., 0, :]
        carry = (h[..., -1:, :, :], g[..., -1:, :])
        return PlateFitResult(betas, p_mean - placed, valid.any(-1), carry)
