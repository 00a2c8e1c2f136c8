"""``RBMRegressor``: the LightningModule mapping RBM windows to SMPL parameters.

Network output per frame: 24 rotations in 6D (joint 0 in the feature frame, see
:mod:`rbmcap.model.features`), betas (averaged over the window, or over the past for causal
networks) and the pelvis position in the feature frame (SMPL trans follows from it and
J0(betas)). Losses (weights in config): a rotation loss on the 24 local
rotations (geodesic by default), L1 on betas, L2 on translation and a forward-kinematics joint
position term. Hyper-parameters are stored as plain data so checkpoints load with
``torch.load(weights_only=True)``.

Under mixed precision (``trainer.precision=bf16-mixed`` or ``16-mixed``) only the network runs in
half precision: the features, the decoding (rotations, the plate fit's linear solve, forward
kinematics) and the losses run in float32, since a rotation or a position in metres held in
bfloat16 is off by millimetres and the plate fit's solve has no half-precision kernel.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

import lightning as L
import numpy as np
import roma
import torch

from rbmcap.body.joints import JointModel
from rbmcap.errors import ConfigError, first_line
from rbmcap.geometry.kinematics import global_to_local
from rbmcap.metrics import global_orientation_error, joint_angle_error, mpjpe
from rbmcap.model.features import FeatureEncoder
from rbmcap.model.losses import betas_l1, rotation_loss, trans_l2
from rbmcap.model.networks import build_network
from rbmcap.model.platefit import PlateFit
from rbmcap.model.rotation6d import rotation_6d_to_matrix
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

IDENTITY_6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
"""Added to the network's 6D outputs so an untrained network starts near the identity rotation
(and never at the degenerate all-zero 6D vector)."""


class RBMRegressor(L.LightningModule):
    """Regression network from RBM observations to SMPL parameters.

    Every argument is required and keyword-only: the hyper-parameters come
    from the Hydra configuration (``module`` in ``rbmcap/conf/train.yaml``, instantiated by
    :func:`rbmcap.training.run.build_model`), the rest from the body and marker set.

    Args:
        markers: plain description of the marker set: ``name``, ``parents`` (N,), ``joints`` (N,)
            SMPL joint carrying each plate.
        plate_rest_rot: (N, 3, 3) nested lists or tensor: each plate's rest orientation on the body.
        plate_rest_pos: (N, 3) each plate's rest position (canonical frame, zero betas, m); the
            kinematic prior places the pelvis with it.
        joint_template, joint_shapedirs: the body's joint model (see :class:`JointModel`).
        body_id: identity of the body the data was made with.
        features: one of :data:`rbmcap.model.features.FEATURE_KINDS`.
        rotations: what the network's 24 rotations mean: 'global' (each bone's rotation in the
            feature frame, turned into local rotations through the tree: no error accumulates
            down the chain, and a plate's bone estimate is a direct answer) or 'local'.
        network: ``{"name": ..., **kwargs}`` for :func:`rbmcap.model.networks.build_network`.
        loss: ``{"rotation": name, "w_rotation", "w_betas", "w_trans", "w_joints"}``.
        optim: ``{"optimizer", "scheduler"}``: Hydra nodes (``_target_`` and arguments, plain
            data) of a partial optimiser, called with the parameters, and of a partial schedule,
            called with the optimiser and the run's number of optimiser steps (e.g.
            :func:`rbmcap.training.schedule.warmup_step_decay`); instantiated when training
            starts.
        augment: ``{"marker_dropout", "dropout_span"}``.
        num_betas: betas predicted.
        seed: seed of the augmentation generator.
        plate_shapedirs: (N, 3, B) change of the plate rest positions per unit beta.
        plate_fit: ``{"enabled", "prior_weight"}``: fit shape and translation to the plates in
            closed form from the predicted rotations (:mod:`rbmcap.model.platefit`); needs
            ``plate_rest_pos``, ``plate_shapedirs``, heading-frame features and global rotations.
        fps: frame rate of the training data (Hz), the rate inference resamples captures to.

    With the kinematic prior and global rotations the output layer starts at zero, so the
    untrained network answers with the prior itself and training learns corrections to it.
    """

    def __init__(
        self,
        *,
        markers: dict[str, Any],
        plate_rest_rot,
        joint_template,
        joint_shapedirs,
        body_id: str,
        num_betas: int,
        features: str,
        rotations: str,
        network: dict[str, Any],
        loss: dict[str, Any],
        optim: dict[str, Any],
        augment: dict[str, Any],
        seed: int,
        plate_fit: dict[str, Any],
        fps: float,
        plate_rest_pos: Any,
        plate_shapedirs: Any,
    ) -> None:
        super().__init__()
        rest = torch.as_tensor(plate_rest_rot, dtype=torch.float32)
        jt = torch.as_tensor(joint_template, dtype=torch.float32)
        js = torch.as_tensor(joint_shapedirs, dtype=torch.float32)
        rest_pos = torch.as_tensor(plate_rest_pos, dtype=torch.float32)
        network = dict(network)
        self.loss_cfg = _section("loss", loss, LOSS_KEYS)
        self.optim_cfg = _section("optim", optim, OPTIM_KEYS)
        self.augment_cfg = _section("augment", augment, AUGMENT_KEYS)
        hparams = {
            "markers": markers,
            "plate_rest_rot": rest,
            "joint_template": jt,
            "joint_shapedirs": js,
            "body_id": body_id,
            "features": features,
            "rotations": rotations,
            "network": network,
            "loss": self.loss_cfg,
            "optim": self.optim_cfg,
            "augment": self.augment_cfg,
            "num_betas": num_betas,
            "seed": seed,
            "plate_rest_pos": rest_pos,
            "plate_shapedirs": plate_shapedirs,
            "plate_fit": plate_fit,
            "fps": float(fps),
        }
        self.save_hyperparameters(_plain_data(hparams))
        self.num_betas = num_betas
        self.global_rotations = _global_rotations(rotations)
        self._build_encoder_and_network(features, markers, rest, rest_pos, jt, network)
        self.joint_model = JointModel(jt, js)
        self.plate_fit = self._build_plate_fit(plate_fit, rest_pos, plate_shapedirs)
        self._register_constants()
        self.rotation_loss = rotation_loss(self.loss_cfg["rotation"])
        self._generator = torch.Generator().manual_seed(seed)

    def _build_encoder_and_network(
        self,
        features: str,
        markers: dict[str, Any],
        rest: torch.Tensor,
        rest_pos: torch.Tensor,
        rest_joints: torch.Tensor,
        network: dict[str, Any],
    ) -> None:
        """``self.encoder`` of the plates' features and ``self.net`` from them to the
        ``self.out_dim`` outputs, started at the kinematic prior where the encoder has one.

        ``rest`` (N, 3, 3) and ``rest_pos`` (N, 3) are the plates' rest orientations and
        positions (m), ``rest_joints`` (24, 3) the body's rest joints at zero betas (m)."""
        self.encoder = FeatureEncoder(
            features,
            markers["parents"],
            rest,
            markers.get("joints"),
            plate_rest_pos=rest_pos,
            rest_joints=rest_joints,
        )
        net_kwargs = dict(network)
        name = net_kwargs.pop("name")
        self.out_dim = 24 * 6 + self.num_betas + 3
        self.net = build_network(name, self.encoder.dim, self.out_dim, **net_kwargs)
        if self.encoder.prior is not None and self.is_causal:
            self.encoder.prior.fill = False
        if self.global_rotations and self.encoder.has_prior:
            _zero_output_layer(self.net, self.out_dim)

    def _build_plate_fit(self, cfg, rest_pos, shapedirs) -> PlateFit | None:
        """The closed-form shape and translation fit ``cfg`` asks for (None when off)."""
        if not cfg["enabled"]:
            return None
        if not (self.encoder.predicts_in_heading_frame and self.global_rotations):
            raise ConfigError(
                "plate_fit needs heading-frame features (canonical, kinematic, bones, "
                "anchored, reach) and global rotations"
            )
        sd = torch.as_tensor(shapedirs, dtype=torch.float32)
        jm = self.joint_model
        return PlateFit(
            self.hparams["markers"]["joints"],
            rest_pos,
            sd,
            jm.joint_template,
            jm.joint_shapedirs,
            float(cfg["prior_weight"]),
        )

    def _register_constants(self) -> None:
        """Decoding's constant tensors, as buffers (they follow the module's device; not saved)."""
        self.register_buffer("identity_6d", torch.tensor(IDENTITY_6D), persistent=False)

    @property
    def is_causal(self) -> bool:
        return bool(getattr(self.net, "is_causal", False))

    # ------------------------------------------------------------------------------ forward
    def forward(self, pos, rot, valid) -> dict[str, torch.Tensor]:
        """Predict SMPL parameters for windows of observations.

        Args: pos (B, T, N, 3), rot (B, T, N, 3, 3), valid (B, T, N) bool.

        Returns: ``rotmats`` (B, T, 24, 3, 3) local rotations (joint 0 global, world frame),
        ``betas`` (B, T, num_betas), ``trans`` (B, T, 3), and ``raw_root`` / ``raw_trans`` in
        the network's own frame, with ``context`` for the loss.
        """
        with full_precision(pos):
            x, ctx = self.encoder(pos, rot, valid)
        y = self.net(x)
        with full_precision(pos):
            return self.decode_outputs(y.float(), ctx)

    def decode_outputs(
        self, y: torch.Tensor, ctx, betas: torch.Tensor | None = None, fit_carry=None
    ) -> dict[str, torch.Tensor]:
        """Network outputs (B, T, out_dim) → SMPL parameters in the world (see :meth:`forward`).

        ``betas`` (B, T, num_betas), when given, replaces the average of the window's betas
        outputs (a stream passes the running mean over its past, see :meth:`betas_outputs`);
        ``fit_carry`` is the plate fit's running sums over a stream's past (see
        :class:`~rbmcap.model.platefit.PlateFit`). With the plate fit, ``net_betas`` holds the
        network's own betas and ``fit_carry`` the sums up to the last frame.
        """
        sixd = y[..., : 24 * 6].unflatten(-1, (24, 6)) + self.identity_6d
        rots = rotation_6d_to_matrix(sixd.float())
        if self.global_rotations and ctx.prior is not None:
            rots = ctx.prior @ rots  # the network corrects the plates' bone estimates
        out: dict[str, torch.Tensor] = {}
        if betas is None:
            betas = self._window_betas(self.betas_outputs(y))
        pelvis_offset, fit = y[..., -3:], None
        if self.plate_fit is not None and ctx.plates is not None:
            fit = self.plate_fit(rots, *ctx.plates, betas, causal=self.is_causal, carry=fit_carry)
            out["net_betas"], out["fit_carry"] = betas, fit.carry
            betas = fit.betas
        rest_pelvis = self.joint_model.rest_joints(betas)[..., 0, :]
        if fit is not None:
            fitted = fit.trans + rest_pelvis
            if ctx.pelvis is not None:
                fitted = fitted - ctx.pelvis
            pelvis_offset = torch.where(fit.seen[..., None], fitted, pelvis_offset)
        if self.global_rotations:
            rots = global_to_local(rots)
        # The network places the pelvis joint (rotation-equivariant, unlike SMPL's trans, which
        # is the pelvis minus its rest position J0(betas) in the fixed canonical frame).
        root, pelvis = FeatureEncoder.decode_root(rots[..., 0, :, :], pelvis_offset, ctx)
        trans = pelvis - rest_pelvis
        rotmats = torch.cat([root[..., None, :, :], rots[..., 1:, :, :]], dim=-3)
        return {**out, "rotmats": rotmats, "betas": betas, "trans": trans}

    def _window_betas(self, b: torch.Tensor) -> torch.Tensor:
        """Per-frame betas outputs (..., T, B) → the window's mean, or for a causal network the
        running mean over the frames so far."""
        if self.is_causal:
            steps = torch.arange(1, b.shape[-2] + 1, device=b.device, dtype=b.dtype)[:, None]
            return b.cumsum(dim=-2) / steps
        return b.mean(dim=-2, keepdim=True).expand_as(b)

    def betas_outputs(self, y: torch.Tensor) -> torch.Tensor:
        """The per-frame betas (..., T, num_betas) among network outputs (..., T, out_dim)."""
        return y[..., 24 * 6 : 24 * 6 + self.num_betas]

    # --------------------------------------------------------------------------- steps
    def _targets(self, batch):
        nb = self.num_betas
        true_rot = roma.rotvec_to_rotmat(batch["poses"])
        betas = batch["betas"][..., :nb]
        return true_rot, betas, batch["trans"], batch["joints"]

    def _losses(self, out, batch) -> dict[str, torch.Tensor]:
        with full_precision(batch["poses"]):
            return self._float_losses(out, batch)

    def _float_losses(self, out, batch) -> dict[str, torch.Tensor]:
        true_rot, betas, trans, joints = self._targets(batch)
        pred_joints = self.joint_model(out["rotmats"], out["betas"], out["trans"])
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
                protect=self.encoder.root,
            )
        if float(aug["hide_plates"]) > 0:
            valid = hide_plates(
                valid, float(aug["hide_plates"]), self._generator, protect=self.encoder.root
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


def full_precision(like: torch.Tensor) -> contextlib.AbstractContextManager:
    """A block where autocast is off on ``like``'s device: everything in it runs in the inputs'
    own precision (float32) under a mixed-precision trainer."""
    return torch.autocast(device_type=like.device.type, enabled=False)


def _instantiate(name: str, node: dict[str, Any], *args):
    """Call the partial the Hydra node ``node`` describes with ``args``; ConfigError (one line
    naming ``name``) when it cannot be built."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

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


def _plain_data(value):
    """``value`` with tensors and tuples turned into (nested) lists, recursively: checkpoints
    then hold plain data only and load with ``torch.load(weights_only=True)``."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_data(v) for v in value]
    return value


def _section(name: str, values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``values`` as a plain dict holding exactly ``keys``; ConfigError names what is missing or
    unknown."""
    values = dict(values)
    missing = [k for k in keys if k not in values]
    unknown = sorted(set(values) - set(keys))
    if missing or unknown:
        parts = [f"missing {', '.join(missing)}"] if missing else []
        parts += [f"unknown {', '.join(unknown)}"] if unknown else []
        raise ConfigError(f"{name}: {'; '.join(parts)} (expected keys: {', '.join(keys)})")
    return values


def _global_rotations(rotations: str) -> bool:
    """Whether the network's rotations are 'global' (else 'local'); ConfigError for others."""
    if rotations not in ("global", "local"):
        raise ConfigError(f"rotations={rotations!r}: expected 'global' or 'local'")
    return rotations == "global"


def _zero_output_layer(net: torch.nn.Module, out_dim: int) -> None:
    """Zero the last linear layer that produces the network's output (weights and bias)."""
    linear = torch.nn.Linear
    last = [m for m in net.modules() if isinstance(m, linear) and m.out_features == out_dim]
    if not last:
        raise ConfigError(f"{type(net).__name__}: no linear output layer of width {out_dim}")
    with torch.no_grad():
        last[-1].weight.zero_()
        if last[-1].bias is not None:
            last[-1].bias.zero_()
