"""Distillation: a student network learns from a trained teacher as well as from the truth.

The shipped stream model (a causal GRU) is distilled from the shipped offline model (a
transformer over whole windows) on the same features: the student starts from the teacher's
input projection, its last layer norm and its output layer (where the shapes agree), so the
student's recurrent core is the only part that starts from nothing, and it is trained to give
the same normalised representation the teacher's output layer reads (the output of each
network's last ``LayerNorm``), a dense target for every frame, besides the usual losses on the
truth. A causal student cannot match a teacher that sees the future everywhere; the truth's
losses keep it honest where the two disagree.

The teacher is held outside the module tree: it is not saved with the student, and the
checkpoint of a distilled model is an ordinary one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from rbmcap.checkpoint import load_model
from rbmcap.errors import ConfigError
from rbmcap.model.regressor import PoseRegressor, checked_section, full_precision

log = logging.getLogger("rbmcap.train")

DISTILL_KEYS = ("teacher", "weight", "init")
"""The ``distill`` section: ``teacher`` (a checkpoint or a shipped model's name; null: no
distillation), ``weight`` of the representation term, ``init`` (start from the teacher's
layers)."""


def last_layer_norm(net: nn.Module) -> nn.LayerNorm:
    """The last ``LayerNorm`` among ``net``'s modules: the one the output layer reads."""
    norms = [m for m in net.modules() if isinstance(m, nn.LayerNorm)]
    if not norms:
        raise ConfigError(f"{type(net).__name__}: no layer norm to distil through")
    return norms[-1]


def output_layer(net: nn.Module, out_dim: int) -> nn.Linear:
    """The last linear layer of ``net`` producing its ``out_dim`` outputs."""
    layers = [m for m in net.modules() if isinstance(m, nn.Linear) and m.out_features == out_dim]
    if not layers:
        raise ConfigError(f"{type(net).__name__}: no linear output layer of width {out_dim}")
    return layers[-1]


class Teacher:
    """A frozen trained model whose representation a student learns (see the module docstring).

    Args:
        model: the teacher (evaluated, never trained).
        student: the student it teaches: same features, marker set and output width, and the
            same width of the representation read by the output layer.
        weight: weight of :meth:`loss` in the student's total.
    """

    def __init__(self, model: PoseRegressor, student: PoseRegressor, weight: float) -> None:
        cfg, own = model.config, student.config
        for field in ("features", "markers", "num_betas", "rotations"):
            if getattr(cfg, field) != getattr(own, field):
                raise ConfigError(
                    f"distill: the teacher's {field} ({getattr(cfg, field)!r}) differ from the "
                    f"student's ({getattr(own, field)!r})"
                )
        self.model = model.eval().requires_grad_(False)
        self.weight = float(weight)
        self._norms = (last_layer_norm(model.net), last_layer_norm(student.net))
        if self._norms[0].normalized_shape != self._norms[1].normalized_shape:
            raise ConfigError(
                f"distill: the teacher's representation is {self._norms[0].normalized_shape}, "
                f"the student's {self._norms[1].normalized_shape}: they must be equal"
            )
        self._seen: dict[str, torch.Tensor] = {}
        self._norms[1].register_forward_hook(self._keep("student"))

    @classmethod
    def from_config(cls, section: Mapping[str, Any], student: PoseRegressor) -> Teacher | None:
        """The teacher the ``distill`` section names (None when it names none), its layers
        copied into ``student`` when ``init`` says so."""
        section = checked_section("distill", section, DISTILL_KEYS)
        if not section["teacher"]:
            return None
        teacher = cls(load_model(str(section["teacher"])), student, section["weight"])
        if section["init"]:
            copied = teacher.initialise(student)
            log.info("distilling %s; started from its %s", section["teacher"], ", ".join(copied))
        return teacher

    def _keep(self, name: str):
        def hook(module, inputs, output) -> None:
            self._seen[name] = output

        return hook

    def initialise(self, student: PoseRegressor) -> list[str]:
        """Copy into ``student`` the teacher's input projection, last layer norm and output
        layer where their shapes agree; returns the names of what was copied."""
        t, s = self.model.net, student.net
        pairs = {
            "input projection": (getattr(t, "input_proj", None), getattr(s, "input_proj", None)),
            "last layer norm": self._norms,
            "output layer": (output_layer(t, self.model.out_dim), output_layer(s, student.out_dim)),
        }
        copied = []
        with torch.no_grad():
            for name, (src, dst) in pairs.items():
                if src is None or dst is None:
                    continue
                a, b = src.state_dict(), dst.state_dict()
                if a.keys() == b.keys() and all(a[k].shape == b[k].shape for k in a):
                    dst.load_state_dict(a)
                    copied.append(name)
        return copied

    def loss(self, pos, rot, valid) -> torch.Tensor:
        """Mean squared difference between the student's representation in its last forward
        pass and the teacher's on the same windows (pos, rot, valid as the student read them)."""
        student = self._seen.pop("student")
        self.model.to(pos.device)
        norm = self._norms[0]
        handle = norm.register_forward_hook(self._keep("teacher"))
        try:
            with torch.no_grad(), full_precision(pos):
                x, _ = self.model.encoder(pos, rot, valid)
                self.model.net(x)  # the representation only: no decoding, no plate fit
        finally:
            handle.remove()
        target = self._seen.pop("teacher").to(student.dtype)
        return (student - target).square().mean()
