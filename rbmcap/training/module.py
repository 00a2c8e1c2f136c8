"""``RegressorLitModule``: the LightningModule that trains a
:class:`~rbmcap.model.regressor.PoseRegressor` (held as ``model``).

It adds what only training needs: the losses (weights in config: a rotation loss on the 24 local
rotations, geodesic by default, L1 on betas, L2 on translation, a forward-kinematics joint
position term and joint velocity and acceleration terms), marker dropout and hidden plates, the
seeding of each batch's randomness, the optimiser and its schedule, logging and the refusal to
save non-finite weights. Hyper-parameters are stored as plain data (the model's under ``model``)
so checkpoints load with ``torch.load(weights_only=True)``.

Under mixed precision (``trainer.precision=bf16-mixed`` or ``16-mixed``) only the network runs in
half precision: the model keeps its features and decoding in float32
(:func:`~rbmcap.model.regressor.full_precision`) and the losses run in float32 too.
"""

from __future__ import annotations

import math
from typing import Any

import lightning as L
import numpy as np
import roma
import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from rbmcap.errors import ConfigError, first_line
from rbmcap.metrics import global_orientation_error, joint_angle_error, mpjpe
from rbmcap.model.losses import betas_l1, rotation_loss, trans_l2
from rbmcap.model.regressor import (
    PoseRegressor,
    RegressorConfig,
    checked_section,
    full_precision,
    plain_data,
)
from rbmcap.training.distill import DISTILL_KEYS, Teacher
from rbmcap.training.dropout import drop_markers, hide_plates
from rbmcap.training.guards import check_finite_loss, check_finite_weights

LOSS_KEYS = (
    "rotation",
    "w_rotation",
    "w_betas",
    "w_trans",
    "w_joints",
    "w_velocity",
    "w_acceleration",
)
AUGMENT_KEYS = ("marker_dropout", "dropout_span", "hide_plates")
"""The keys of the ``loss`` and ``augment`` sections. Their values are written once, in the Hydra
tree (``rbmcap/conf/loss``, ``train.yaml``); the module has no defaults."""

OPTIM_KEYS = ("optimizer", "scheduler")
"""The ``optim`` section: the optimiser's and the schedule's Hydra nodes (``conf/optim``,
``conf/scheduler``), instantiated when training starts."""


class RegressorLitModule(L.LightningModule):
    """Training of a :class:`~rbmcap.model.regressor.PoseRegressor` (``self.model``).

    Every argument is required and keyword-only: they come from the Hydra configuration
    (``module`` in ``rbmcap/conf/train.yaml``, instantiated by
    :func:`rbmcap.training.run.build_model`, which adds the body's and the marker set's facts to
    ``model``).

    Args:
        model: the model's configuration as plain data (the fields of
            :class:`~rbmcap.model.regressor.RegressorConfig`).
        loss: ``{"rotation": name, "w_rotation", "w_betas", "w_trans", "w_joints",
            "w_velocity", "w_acceleration"}``.
        optim: ``{"optimizer", "scheduler"}``: Hydra nodes (``_target_`` and arguments, plain
            data) of a partial optimiser, called with the parameters, and of a partial schedule,
            called with the optimiser and the run's number of optimiser steps (e.g.
            :func:`rbmcap.training.schedule.warmup_step_decay`); instantiated when training
            starts.
        augment: ``{"marker_dropout", "dropout_span", "hide_plates"}``.
        seed: seed of the augmentation generator and of each batch's randomness.
        distill: ``{"teacher", "weight", "init"}`` (:mod:`rbmcap.training.distill`): a trained
            model whose representation the network learns too (``teacher`` null: none).
    """

    def __init__(
        self,
        *,
        model: dict[str, Any],
        loss: dict[str, Any],
        optim: dict[str, Any],
        augment: dict[str, Any],
        seed: int,
        distill: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        config = RegressorConfig.from_dict(model)
        self.loss_cfg = checked_section("loss", loss, LOSS_KEYS)
        self.optim_cfg = checked_section("optim", optim, OPTIM_KEYS)
        self.augment_cfg = checked_section("augment", augment, AUGMENT_KEYS)
        hparams = {
            "model": config.to_dict(),
            "loss": self.loss_cfg,
            "optim": self.optim_cfg,
            "augment": self.augment_cfg,
            "seed": seed,
        }
        if distill is not None:
            hparams["distill"] = checked_section("distill", distill, DISTILL_KEYS)
        self.save_hyperparameters(plain_data(hparams))
        self.model = PoseRegressor(config)
        # Held outside the module tree: the teacher is neither trained nor saved.
        teacher = None if distill is None else Teacher.from_config(distill, self.model)
        object.__setattr__(self, "teacher", teacher)
        self.rotation_loss = rotation_loss(self.loss_cfg["rotation"])
        self._generator = torch.Generator().manual_seed(seed)

    def forward(self, pos, rot, valid) -> dict[str, torch.Tensor]:
        """The model's answer for windows of observations (see
        :meth:`~rbmcap.model.regressor.PoseRegressor.forward`)."""
        return self.model(pos, rot, valid)

    # --------------------------------------------------------------------------- steps
    def _targets(self, batch):
        nb = self.model.num_betas
        true_rot = roma.rotvec_to_rotmat(batch["poses"])
        betas = batch["betas"][..., :nb]
        return true_rot, betas, batch["trans"], batch["joints"]

    def _losses(self, out, batch) -> dict[str, torch.Tensor]:
        with full_precision(batch["poses"]):
            return self._float_losses(out, batch)

    def _float_losses(self, out, batch) -> dict[str, torch.Tensor]:
        true_rot, betas, trans, joints = self._targets(batch)
        pred_joints = self.model.joint_model(out["rotmats"], out["betas"], out["trans"])
        terms = {
            "rotation": self.rotation_loss(out["rotmats"], true_rot),
            "betas": betas_l1(out["betas"], betas[..., None, :].expand_as(out["betas"])),
            "trans": trans_l2(out["trans"], trans),
            "joints": (pred_joints - joints).norm(dim=-1).mean(),
            "velocity": _velocity_error(pred_joints, joints),
            "acceleration": _difference_error(pred_joints, joints, order=2),
        }
        if "net_betas" in out:  # the plate fit's prior: the network's own estimate
            terms["betas"] = terms["betas"] + betas_l1(out["net_betas"], betas[..., None, :])
        terms["total"] = sum(self.loss_cfg[f"w_{k}"] * v for k, v in terms.items())
        return terms, pred_joints

    def batch_seed(self, batch_idx: int) -> int:
        """The seed of one training batch's randomness (marker dropout, the network's dropout):
        a function of the run's seed, the process rank, the epoch and the batch only, so a run
        resumed from a checkpoint draws exactly what the uninterrupted run drew."""
        trainer = self._trainer
        rank = trainer.global_rank if trainer is not None else 0
        key = [int(self.hparams["seed"]), rank, self.current_epoch, int(batch_idx)]
        return int(np.random.SeedSequence(key).generate_state(1, np.uint64)[0] >> np.uint64(1))

    def _augmented_valid(self, valid: torch.Tensor) -> torch.Tensor:
        aug = self.augment_cfg
        if float(aug["marker_dropout"]) > 0:
            valid = drop_markers(
                valid,
                float(aug["marker_dropout"]),
                int(aug["dropout_span"]),
                self._generator,
                protect=self.model.encoder.root,
            )
        if float(aug["hide_plates"]) > 0:
            valid = hide_plates(
                valid, float(aug["hide_plates"]), self._generator, protect=self.model.encoder.root
            )
        return valid

    def training_step(self, batch, batch_idx):
        seed = self.batch_seed(batch_idx)
        cuda = [self.device.index or 0] if self.device.type == "cuda" else []
        # The global generators (the network's dropout) are seeded per batch inside a fork, so
        # training leaves them as they were and a resumed run repeats the uninterrupted one.
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(seed)
            self._generator.manual_seed(seed)
            valid = self._augmented_valid(batch["valid"])
            out = self(batch["pos"], batch["rot"], valid)
        terms, _ = self._losses(out, batch)
        if self.teacher is not None:
            terms["distill"] = self.teacher.loss(batch["pos"], batch["rot"], valid)
            terms["total"] = terms["total"] + self.teacher.weight * terms["distill"]
        check_finite_loss(terms, self.current_epoch, self.global_step)
        for k, v in terms.items():
            self.log(
                f"train/{k}",
                v,
                prog_bar=k == "total",
                on_step=True,
                on_epoch=True,
                batch_size=valid.shape[0],
            )
        return terms["total"]

    def validation_step(self, batch, batch_idx):
        out = self(batch["pos"], batch["rot"], batch["valid"])
        with full_precision(batch["poses"]):
            self._log_validation(out, batch)

    def _log_validation(self, out, batch) -> None:
        terms, pred_joints = self._float_losses(out, batch)
        true_rot = roma.rotvec_to_rotmat(batch["poses"])
        n = batch["pos"].shape[0]
        self.log("val/loss", terms["total"], batch_size=n, sync_dist=True)
        self.log(
            "val/mpjpe_mm",
            1e3 * mpjpe(pred_joints, batch["joints"]).mean(),
            prog_bar=True,
            batch_size=n,
            sync_dist=True,
        )
        angle = joint_angle_error(out["rotmats"], true_rot).mean()
        self.log(
            "val/joint_angle_deg",
            math.degrees(1) * angle,
            prog_bar=True,
            batch_size=n,
            sync_dist=True,
        )
        root_err = global_orientation_error(out["rotmats"], true_rot).mean()
        self.log("val/root_angle_deg", math.degrees(1) * root_err, batch_size=n, sync_dist=True)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Refuse to save weights holding NaN or infinite values (DataError)."""
        check_finite_weights(checkpoint.get("state_dict", self.state_dict()))

    def configure_optimizers(self):
        """The optimiser and its per-step schedule, instantiated from ``optim``."""
        cfg = self.optim_cfg
        optimizer = _instantiate("optim.optimizer", cfg["optimizer"], self.parameters())
        total = max(1, int(self.trainer.estimated_stepping_batches))
        scheduler = _instantiate("optim.scheduler", cfg["scheduler"], optimizer, total)
        schedule = {"scheduler": scheduler, "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}


def _instantiate(name: str, node: dict[str, Any], *args):
    """Call the partial the Hydra node ``node`` describes with ``args``; ConfigError (one line
    naming ``name``) when it cannot be built."""
    try:
        return instantiate(node, _partial_=True)(*args)
    except (InstantiationException, TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: {first_line(exc)}") from exc


def _velocity_error(pred: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    """Mean distance (m per frame) between predicted and true joint velocities (..., T, J, 3):
    penalises frame-to-frame jitter that the per-frame terms cannot see."""
    return _difference_error(pred, true, order=1)


def _difference_error(pred: torch.Tensor, true: torch.Tensor, order: int) -> torch.Tensor:
    """Mean distance between the ``order``-th frame differences of predicted and true joints
    (..., T, J, 3): m per frame (velocity) for 1, m per frame² (acceleration) for 2; zero when
    the window is too short."""
    if pred.shape[-3] <= order:
        return pred.new_zeros(())
    d = pred.diff(n=order, dim=-3) - true.diff(n=order, dim=-3)
    return d.norm(dim=-1).mean()
