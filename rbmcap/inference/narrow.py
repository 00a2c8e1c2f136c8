"""A causal GRU's frame step with its weights held in a narrower type, so they stay in cache.

A live stream steps the network once a frame, a few milliseconds apart; between two frames
other work (the capture software, the kernel, other processes) runs on the core and the
network's weights leave its cache, so each frame reads them from memory again. The shipped
stream GRU's weights are 3.6 MB in float32, more than a core's 1 MiB L2 on the AMD EPYC hosts
this project measures on. :class:`NarrowGRU` holds the same network with its matrices in

- ``int8``: each output row's weights scaled into int8 (symmetric, one float32 scale per row):
  a quarter of the bytes;
- ``bfloat16``: the weights rounded to bfloat16: half the bytes.

Either way the weights are widened to float32 inside the product and the activations, sums and
recurrent state stay float32 (weight-only quantisation). Compiled
(:mod:`rbmcap.inference.compiled`), each product is written out elementwise, so the generated
code reads the narrow weights once and widens them in registers; eager or traced, it widens a
copy and calls the library's product (slower than float32: the narrow types are for the
compiled step).

It steps as :meth:`rbmcap.model.networks.gru.CausalGRU.step` does (the same gate equations, one
layer after another), so it replaces the model's ``net`` inside a stream's frame step; biases,
the layer norm and the recurrent state stay float32. Figures (speed paced at the capture rate,
accuracy against the full-precision model): docs/live.md#a-step-that-stays-in-cache.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from rbmcap.errors import ConfigError

PRECISIONS = ("float32", "bfloat16", "int8")
"""Types a stream's network weights may be held in (``float32``: as trained)."""


class NarrowLinear(nn.Module):
    """``linear`` (weight (out, in), bias) with its weight held as ``precision``; float32 in
    and out."""

    def __init__(self, linear: nn.Linear, precision: str) -> None:
        super().__init__()
        weight = linear.weight.detach().float()
        self.precision = precision
        if precision == "int8":
            scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127.0
            self.register_buffer("weight", (weight / scale[:, None]).round().to(torch.int8))
            self.register_buffer("scale", scale)
        else:
            self.register_buffer("weight", weight.to(torch.bfloat16))
        bias = linear.bias.detach().float() if linear.bias is not None else None
        self.register_buffer("bias", bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            # Written out elementwise: compiled, the narrow weights are read once, widened in
            # registers and summed in float32 (no widened copy of the matrix is ever stored).
            y = (x.unsqueeze(-2) * self.weight.to(x.dtype)).sum(-1)
        else:  # eager or traced: a widened copy and a library product (the same sums)
            y = nn.functional.linear(x, self.weight.to(x.dtype))
        if self.precision == "int8":
            y = y * self.scale
        return y if self.bias is None else y + self.bias


class NarrowGRU(nn.Module):
    """A trained :class:`~rbmcap.model.networks.gru.CausalGRU` for streaming, its matrices
    held as ``precision`` (``bfloat16`` or ``int8``, see the module docstring).

    ``step(x_t (B, in_dim), state (L, B, H))`` → ``(y_t (B, out_dim), state)`` as the GRU's own
    ``step``; ``initial_state`` as its.
    """

    is_causal = True

    def __init__(self, net: nn.Module, precision: str) -> None:
        super().__init__()
        if precision not in PRECISIONS[1:]:
            raise ConfigError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
        gru = getattr(net, "gru", None)
        if not isinstance(gru, nn.GRU) or gru.bidirectional or not gru.batch_first:
            raise ConfigError(f"{type(net).__name__}: only a causal GRU streams in {precision}")
        self.precision = precision
        self.hidden_dim, self.num_layers = gru.hidden_size, gru.num_layers
        self.input_proj = NarrowLinear(net.input_proj, precision)
        self.ih = nn.ModuleList()
        self.hh = nn.ModuleList()
        for k in range(gru.num_layers):
            for kind, layers in (("ih", self.ih), ("hh", self.hh)):
                linear = nn.Linear(1, 1)
                linear.weight = getattr(gru, f"weight_{kind}_l{k}")
                linear.bias = getattr(gru, f"bias_{kind}_l{k}")
                layers.append(NarrowLinear(linear, precision))
        norm, out = net.head[0], net.head[-1]
        self.norm = nn.LayerNorm(norm.normalized_shape, eps=norm.eps)
        self.norm.load_state_dict(norm.state_dict())
        self.out = NarrowLinear(out, precision)

    def initial_state(self, batch_size: int, *, device=None, dtype=None) -> torch.Tensor:
        """The zero state of a fresh stream: (num_layers, batch_size, hidden_dim) float32."""
        shape = (self.num_layers, batch_size, self.hidden_dim)
        return torch.zeros(shape, device=device, dtype=dtype or torch.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """A window ``x (B, T, in_dim)`` from the zero state, frame by frame: (B, T, out_dim),
        as the GRU's own ``forward``."""
        state = self.initial_state(x.shape[0], device=x.device)
        ys = []
        for t in range(x.shape[1]):
            y, state = self.step(x[:, t], state)
            ys.append(y)
        return torch.stack(ys, dim=1)

    def step(self, x_t: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance one frame (see the class docstring)."""
        h_in = self.input_proj(x_t)
        states = []
        for k in range(self.num_layers):
            h = state[k]
            gi, gh = self.ih[k](h_in), self.hh[k](h)
            i_r, i_z, i_n = gi.chunk(3, dim=-1)
            h_r, h_z, h_n = gh.chunk(3, dim=-1)
            r = torch.sigmoid(i_r + h_r)
            z = torch.sigmoid(i_z + h_z)
            n = torch.tanh(i_n + r * h_n)
            h_in = (1.0 - z) * n + z * h
            states.append(h_in)
        return self.out(self.norm(h_in)), torch.stack(states)


def narrowed(model, precision: str):
    """``model`` (a :class:`~rbmcap.model.regressor.PoseRegressor`) with its network's weights
    held as ``precision`` (one of :data:`PRECISIONS`): ``model`` itself for ``float32``, else a
    copy whose ``net`` is a :class:`NarrowGRU` (ConfigError unless it is a causal GRU)."""
    if precision not in PRECISIONS:
        raise ConfigError(f"precision {precision!r}: expected one of {', '.join(PRECISIONS)}")
    if precision == "float32":
        return model
    narrow = NarrowGRU(model.net.eval(), precision)  # checks the network before copying
    other = copy.deepcopy(model)
    other.net = narrow.to(next(model.parameters()).device)
    return other.eval()


def matrix_bytes(module: nn.Module) -> int:
    """Bytes of ``module``'s matrices (its 2-D parameters and buffers): what a step reads of its
    weights, whatever type they are held in."""
    tensors = [*module.parameters(), *module.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors if t.dim() == 2)
