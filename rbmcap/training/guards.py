"""Guards that keep a training run's files usable: a NaN or infinite loss stops the run with one
clear error before the weights are updated, no checkpoint holding a NaN or infinite weight is ever
written, and checkpoints are written atomically (a kill leaves the previous file or the new one).

* :func:`check_finite_loss` — called by :meth:`RegressorLitModule.training_step` on every step,
  before the loss reaches ``backward``: a :class:`~rbmcap.errors.DataError` names the epoch, the
  step and each loss term that is not finite.
* :func:`check_finite_weights` — called before every checkpoint save (the module's
  ``on_save_checkpoint`` and :class:`AtomicCheckpointIO`).
* :class:`AtomicCheckpointIO` — Lightning's checkpoint writer with both: the weights are checked,
  then the file is written beside its target and renamed onto it (Lightning's own writer goes
  through the system's temporary folder and ``shutil.move``, which copies across file systems).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from rbmcap.atomic import atomic_path
from rbmcap.errors import DataError


def _kind(value: float) -> str:
    return "NaN" if math.isnan(value) else "infinite"


def check_finite_loss(terms: Mapping[str, torch.Tensor], epoch: int, step: int) -> None:
    """DataError when the total loss of ``terms`` (name → scalar tensor, with ``total``) is NaN
    or infinite, naming ``epoch`` (0-based, as Lightning counts), the optimiser ``step`` and every
    term that is not finite (a term with weight 0 still poisons the total: 0 × NaN is NaN)."""
    total = terms["total"].detach()
    if bool(torch.isfinite(total)):
        return
    bad = {k: float(v.detach()) for k, v in terms.items() if k != "total"}
    bad = {k: v for k, v in bad.items() if not math.isfinite(v)}
    named = ", ".join(f"{k} {_kind(v)}" for k, v in bad.items()) or "no single term"
    raise DataError(
        f"training: epoch {epoch}, step {step}: the loss became {_kind(float(total))} "
        f"(loss terms: {named}); stopped before updating the weights, no checkpoint written "
        "with them (the last checkpoint, if any, is the last good one)"
    )


def check_finite_weights(state_dict: Mapping[str, Any], where: str | Path = "checkpoint") -> None:
    """DataError naming the first tensors of ``state_dict`` that hold a NaN or an infinity:
    such weights are never written to a checkpoint."""
    bad = [
        name
        for name, value in state_dict.items()
        if isinstance(value, torch.Tensor)
        and value.is_floating_point()
        and not bool(torch.isfinite(value).all())
    ]
    if bad:
        names = ", ".join(bad[:4]) + (", ..." if len(bad) > 4 else "")
        raise DataError(
            f"{where}: not saved: {len(bad)} weight tensors hold NaN or infinite values ({names})"
        )


class AtomicCheckpointIO(TorchCheckpointIO):
    """``torch.save`` to a temporary file beside the checkpoint, renamed onto it once complete,
    after checking that every weight is finite."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        if storage_options is not None:
            raise TypeError(f"{type(self).__name__} takes no storage_options")
        check_finite_weights(checkpoint.get("state_dict", {}), path)
        with atomic_path(path) as tmp:
            torch.save(checkpoint, tmp)
