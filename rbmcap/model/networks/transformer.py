"""Transformer encoder with a learned relative position bias (T5-style bucketed distances).

There is no absolute position embedding: each head adds a learned scalar to its attention logits
that depends only on the bucketed offset between key and query frame. Offsets are exact up to a
few frames and log-spaced beyond, and every offset past ``max_distance`` shares the last bucket,
so the network runs on windows of any length, including lengths never seen in training.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rbmcap.errors import ConfigError
from rbmcap.model.networks.base import SequenceNetwork, check_dropout, check_positive_int


def relative_position_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """Map offsets ``key − query`` (frames) to bucket ids in ``[0, num_buckets)``, as in T5.

    Half the buckets (per direction when ``bidirectional``) hold exact offsets 0, 1, 2, …; the rest
    cover larger offsets on a log scale up to ``max_distance``, beyond which all offsets share the
    last bucket. When not bidirectional only the past is distinguished (future offsets, which a
    causal mask hides anyway, fall in bucket 0).

    Args:
        relative_position: (...) integer offsets.

    Returns:
        (...) int64 bucket ids.
    """
    n = -relative_position.long()  # > 0 for keys in the past
    buckets = torch.zeros_like(n)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp_min(0)
    max_exact = num_buckets // 2
    # clamp_min(1) keeps log finite for the small offsets the where below discards anyway.
    log_ratio = torch.log(n.clamp_min(1).float() / max_exact) / math.log(max_distance / max_exact)
    large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    large = large.clamp(max=num_buckets - 1)
    return buckets + torch.where(n < max_exact, n, large)


class _RelPosEncoderLayer(nn.Module):
    """Pre-norm encoder layer whose self-attention adds a per-head relative position bias."""

    def __init__(
        self, d_model: int, nhead: int, dim_feedforward: int, dropout: float, num_buckets: int
    ) -> None:
        super().__init__()
        self.nhead = nhead
        self.dropout = dropout
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.attn_out = nn.Linear(d_model, d_model)
        self.rel_bias = nn.Embedding(num_buckets, nhead)
        nn.init.zeros_(self.rel_bias.weight)  # start position-agnostic; the bias is learnt
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(
            nn.Linear(d_model, dim_feedforward),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(dim_feedforward, d_model),
        )
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, buckets: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.nhead, D // self.nhead).unbind(2)
        bias = self.rel_bias(buckets).permute(2, 0, 1).unsqueeze(0)  # (1, H, T, T)
        if mask is not None:
            bias = bias + mask
        bias = bias.to(q.dtype)  # under autocast q may be half precision; SDPA wants them equal
        attn = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=bias,
            dropout_p=self.dropout if self.training else 0.0,
        )
        x = x + self.drop(self.attn_out(attn.transpose(1, 2).reshape(B, T, D)))
        return x + self.drop(self.ff(self.norm2(x)))


class RelPosTransformer(SequenceNetwork):
    """Input projection, pre-norm transformer encoder with relative position bias, output head.

    Args:
        in_dim: features per frame.
        out_dim: outputs per frame.
        d_model: width of the residual stream.
        nhead: attention heads (must divide ``d_model``).
        num_layers: encoder layers, each with its own relative bias table.
        dim_feedforward: hidden width of the feed-forward blocks.
        dropout: dropout in attention, feed-forward and residual branches.
        num_buckets: relative-distance buckets per layer.
        max_distance: offset (frames) beyond which distances share the last bucket.
        causal: mask attention to the future, so the output at frame t depends on frames ≤ t.

    Shapes: ``forward(x (B, T, in_dim)) -> (B, T, out_dim)`` for any T ≥ 1.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        *,
        d_model: int,
        nhead: int,
        num_layers: int,
        dim_feedforward: int,
        dropout: float,
        num_buckets: int,
        max_distance: int,
        causal: bool = False,
    ) -> None:
        super().__init__(in_dim, out_dim)
        d_model = check_positive_int("d_model", d_model)
        nhead = check_positive_int("nhead", nhead)
        num_layers = check_positive_int("num_layers", num_layers)
        dim_feedforward = check_positive_int("dim_feedforward", dim_feedforward)
        dropout = check_dropout(dropout)
        self.num_buckets = check_positive_int("num_buckets", num_buckets)
        self.max_distance = check_positive_int("max_distance", max_distance)
        if d_model % nhead:
            raise ConfigError(f"nhead ({nhead}) must divide d_model ({d_model})")
        min_buckets = 4 if causal else 8  # at least two exact and one log bucket per direction
        if num_buckets < min_buckets or max_distance <= num_buckets:
            raise ConfigError(
                f"need num_buckets >= {min_buckets} and max_distance > num_buckets, "
                f"got {num_buckets} and {max_distance}"
            )
        self.is_causal = bool(causal)
        self.input_proj = nn.Linear(in_dim, d_model)
        self.layers = nn.ModuleList(
            _RelPosEncoderLayer(d_model, nhead, dim_feedforward, dropout, num_buckets)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.output_proj = nn.Linear(d_model, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._check_input(x)
        T = x.shape[1]
        pos = torch.arange(T, device=x.device)
        buckets = relative_position_bucket(
            pos[None, :] - pos[:, None],  # [query, key] -> key - query
            bidirectional=not self.is_causal,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        mask = None
        if self.is_causal:
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
            mask = torch.zeros(T, T, dtype=x.dtype, device=x.device).masked_fill(
                future, float("-inf")
            )
        h = self.input_proj(x)
        for layer in self.layers:
            h = layer(h, buckets, mask)
        return self.output_proj(self.norm(h))
