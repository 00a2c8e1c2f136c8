"""Per-frame residual MLP: every frame is mapped on its own, with no temporal context."""

from __future__ import annotations

import torch
from torch import nn

from rbmcap.model.networks.base import SequenceNetwork, check_dropout, check_positive_int


class _PreNormBlock(nn.Module):
    """``x + W₂ drop(GELU(W₁ LN(x)))``, width preserved."""

    def __init__(self, width: int, dropout: float) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.LayerNorm(width),
            nn.Linear(width, width),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(width, width),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ResidualMLP(SequenceNetwork):
    """Input projection, ``num_blocks`` pre-norm residual blocks, final norm, output projection.

    Frames are independent, so the network is trivially causal (zero look-ahead); it is the
    baseline that shows what temporal context adds.

    Args:
        in_dim: features per frame.
        out_dim: outputs per frame.
        hidden_dim: width of the residual stream.
        num_blocks: number of residual blocks (two linear layers each).
        dropout: dropout probability inside the blocks.

    Shapes: ``forward(x (B, T, in_dim)) -> (B, T, out_dim)``.
    """

    is_causal = True

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        *,
        hidden_dim: int,
        num_blocks: int,
        dropout: float,
    ) -> None:
        super().__init__(in_dim, out_dim)
        hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        num_blocks = check_positive_int("num_blocks", num_blocks)
        dropout = check_dropout(dropout)
        self.input_proj = nn.Linear(in_dim, hidden_dim)
        self.blocks = nn.Sequential(
            *(_PreNormBlock(hidden_dim, dropout) for _ in range(num_blocks))
        )
        self.norm = nn.LayerNorm(hidden_dim)
        self.output_proj = nn.Linear(hidden_dim, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        return self.output_proj(self.norm(self.blocks(self.input_proj(x))))
