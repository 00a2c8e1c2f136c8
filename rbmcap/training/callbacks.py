"""Callbacks: a one-line summary per epoch (readable in logs where progress bars are not)."""

from __future__ import annotations

import logging
import time

import lightning as L

from rbmcap.checkpoint import RUN_KEY

log = logging.getLogger("rbmcap.train")


class EpochSummary(L.Callback):
    """Logs ``epoch k/n: train loss, val MPJPE, val joint angle, elapsed`` after validation."""

    def on_train_start(self, trainer, pl_module) -> None:
        self._start = time.perf_counter()

    def on_validation_epoch_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or not hasattr(self, "_start"):
            return
        m = trainer.callback_metrics
        timed = any(isinstance(c, L.pytorch.callbacks.Timer) for c in trainer.callbacks)
        of = "" if timed else f"/{trainer.max_epochs}"  # with max_time the time ends the run
        parts = [f"epoch {trainer.current_epoch + 1}{of}"]
        fields = (
            ("train/total_epoch", "train loss", "{:.3f}"),
            ("val/mpjpe_mm", "val MPJPE", "{:.1f} mm"),
            ("val/joint_angle_deg", "val joint angle", "{:.1f} deg"),
        )
        for key, label, fmt in fields:
            if key in m:
                parts.append(f"{label} " + fmt.format(float(m[key])))
        parts.append(f"{time.perf_counter() - self._start:.0f} s")
        log.info(", ".join(parts))


class RunRecord(L.Callback):
    """Writes ``record`` (the command that started the run and its data recipe: plain data)
    into every checkpoint under ``rbmcap_run``, where ``rbmcap pretrained pack`` reads it."""

    KEY = RUN_KEY

    def __init__(self, record: dict) -> None:
        self.record = record

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        checkpoint[self.KEY] = self.record
