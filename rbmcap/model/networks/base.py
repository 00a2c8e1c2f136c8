"""What every sequence network shares: shapes, the causality flag and argument checks."""

from __future__ import annotations

import torch
from torch import nn

from rbmcap.errors import ConfigError, DataError


def check_positive_int(name: str, value: int) -> int:
    """``value`` as an int if it is a positive integer, else :class:`ConfigError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def check_dropout(value: float) -> float:
    """``value`` as a float if it is a probability in [0, 1), else :class:`ConfigError`."""
    if not 0.0 <= float(value) < 1.0:
        raise ConfigError(f"dropout must be in [0, 1), got {value!r}")
    return float(value)


class SequenceNetwork(nn.Module):
    """A sequence-to-sequence network: ``(B, T, in_dim)`` features → ``(B, T, out_dim)`` outputs.

    Subclasses set ``is_causal``: True when the output at frame t depends only on inputs at frames
    ≤ t (so the network can run on a live stream), False when it also looks ahead.
    """

    is_causal: bool = False

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim = check_positive_int("in_dim", in_dim)
        self.out_dim = check_positive_int("out_dim", out_dim)

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)

    def _check_input(self, x: torch.Tensor) -> None:
        if x.dim() != 3 or x.shape[-1] != self.in_dim:
            raise DataError(
                f"{type(self).__name__} expects (B, T, {self.in_dim}) input, got {tuple(x.shape)}"
            )
