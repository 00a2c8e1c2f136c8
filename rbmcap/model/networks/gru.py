"""Recurrent networks: one GRU stack, bidirectional for offline windows (:class:`BiGRU`) or
causal for streaming (:class:`CausalGRU`)."""

from __future__ import annotations

import torch
from torch import nn

from rbmcap.model.networks.base import SequenceNetwork, check_dropout, check_positive_int


class GRUNetwork(SequenceNetwork):
    """Input projection, a stacked GRU, norm and output projection; :class:`BiGRU` runs it in
    both directions, :class:`CausalGRU` forwards only.

    Args:
        in_dim: features per frame.
        out_dim: outputs per frame.
        hidden_dim: GRU hidden size per direction.
        num_layers: stacked GRU layers.
        dropout: dropout between GRU layers and before the output projection.

    Shapes: ``forward(x (B, T, in_dim)) -> (B, T, out_dim)``.
    """

    bidirectional: bool = False

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        *,
        hidden_dim: int,
        num_layers: int,
        dropout: float,
    ) -> None:
        super().__init__(in_dim, out_dim)
        self.hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        self.num_layers = check_positive_int("num_layers", num_layers)
        dropout = check_dropout(dropout)
        width = 2 * hidden_dim if self.bidirectional else hidden_dim
        self.input_proj = nn.Linear(in_dim, hidden_dim)
        self.gru = nn.GRU(
            hidden_dim,
            hidden_dim,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=self.bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.head = nn.Sequential(
            nn.LayerNorm(width), nn.Dropout(dropout), nn.Linear(width, out_dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        y, _ = self.gru(self.input_proj(x))
        return self.head(y)


class BiGRU(GRUNetwork):
    """:class:`GRUNetwork` in both directions: each output frame sees the whole window (past and
    future), so the network is not causal."""

    bidirectional = True
    is_causal = False


class CausalGRU(GRUNetwork):
    """:class:`GRUNetwork` forwards only, for streaming: output at frame t depends on frames ≤ t.

    ``forward`` runs a whole window from a zero state; ``step`` advances one frame at a time in
    constant time and memory (latency of one frame), and feeding a sequence through ``step`` frame
    by frame gives the same outputs as ``forward`` on the whole sequence. ``forward_with_state``
    does the same for a chunk of frames, so a stream can also be processed chunk by chunk.

    State: a (num_layers, B, hidden_dim) tensor; ``None`` means the zero state of a fresh stream.
    """

    bidirectional = False
    is_causal = True

    def initial_state(
        self,
        batch_size: int,
        *,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> torch.Tensor:
        """The zero state of a fresh stream: (num_layers, batch_size, hidden_dim)."""
        ref = self.input_proj.weight
        return torch.zeros(
            self.num_layers,
            batch_size,
            self.hidden_dim,
            device=device if device is not None else ref.device,
            dtype=dtype if dtype is not None else ref.dtype,
        )

    def forward_with_state(
        self, x: torch.Tensor, state: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run a chunk ``x (B, T, in_dim)`` from ``state``; return outputs (B, T, out_dim) and
        the state after the chunk's last frame."""
        self._check_input(x)
        y, state = self.gru(self.input_proj(x), state)
        return self.head(y), state

    def step(
        self, x_t: torch.Tensor, state: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance the stream by one frame.

        Args:
            x_t: (B, in_dim) features of the new frame.
            state: the state returned by the previous call, or None at the start of a stream.

        Returns:
            ``(y_t, state)``: outputs (B, out_dim) for this frame and the new state.
        """
        y, state = self.forward_with_state(x_t[:, None, :], state)
        return y[:, 0, :], state
