"""``PoseRegressor``: the network that poses frames, from windows of plate observations to SMPL.

Network output per frame: 24 rotations in 6D (joint 0 in the feature frame, see
:mod:`rbmcap.model.features`), betas (averaged over the window, or over the past for causal
networks) and the pelvis position in the feature frame (SMPL trans follows from it and
J0(betas)). The model is built from a :class:`RegressorConfig`, plain data that a checkpoint
keeps (``torch.load(weights_only=True)`` reads it back).

Under mixed precision only the network runs in half precision: the features and the decoding
(rotations, the plate fit's linear solve, forward kinematics) run in float32 inside
:func:`full_precision`, since a rotation or a position in metres held in bfloat16 is off by
millimetres and the plate fit's solve has no half-precision kernel.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from rbmcap.body.joints import JointModel
from rbmcap.errors import ConfigError
from rbmcap.geometry.kinematics import global_to_local
from rbmcap.model.features import FeatureEncoder
from rbmcap.model.networks import build_network
from rbmcap.model.platefit import PlateFit
from rbmcap.model.rotation6d import rotation_6d_to_matrix

IDENTITY_6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
"""Added to the network's 6D outputs so an untrained network starts near the identity rotation
(and never at the degenerate all-zero 6D vector)."""


@dataclass(frozen=True)
class RegressorConfig:
    """Everything that builds a :class:`PoseRegressor`, as plain data (tensors are held as nested
    lists, tuples as lists).

    Attributes:
        markers: the marker set: ``name``, plate ``names`` (N,), ``parents`` (N,), ``joints``
            (N,) SMPL joint carrying each plate.
        plate_rest_rot: (N, 3, 3) each plate's rest orientation on the body.
        plate_rest_pos: (N, 3) each plate's rest position (canonical frame, zero betas, m); the
            kinematic prior places the pelvis with it.
        plate_shapedirs: (N, 3, B) change of the plate rest positions per unit beta (m).
        joint_template: (24, 3) the body's rest joints at zero betas (m).
        joint_shapedirs: (24, 3, B) their change per unit beta (m).
        body_id: identity of the body the data was made with.
        num_betas: betas predicted.
        features: one of :data:`rbmcap.model.features.FEATURE_KINDS`.
        rotations: what the network's 24 rotations mean: 'global' (each bone's rotation in the
            feature frame, turned into local rotations through the tree: no error accumulates
            down the chain, and a plate's bone estimate is a direct answer) or 'local'.
        network: ``{"name": ..., **kwargs}`` for :func:`rbmcap.model.networks.build_network`.
        plate_fit: ``{"enabled", "prior_weight"}``: fit shape and translation to the plates in
            closed form from the predicted rotations (:mod:`rbmcap.model.platefit`); needs
            heading-frame features and global rotations.
        fps: frame rate of the training data (Hz), the rate inference resamples captures to.
    """

    markers: dict[str, Any]
    plate_rest_rot: list
    plate_rest_pos: list
    plate_shapedirs: list
    joint_template: list
    joint_shapedirs: list
    body_id: str
    num_betas: int
    features: str
    rotations: str
    network: dict[str, Any]
    plate_fit: dict[str, Any]
    fps: float

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            object.__setattr__(self, field.name, plain_data(getattr(self, field.name)))
        if isinstance(self.fps, (int, float)) and not isinstance(self.fps, bool):
            object.__setattr__(self, "fps", float(self.fps))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The names of the configuration's fields, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegressorConfig:
        """The configuration ``data`` (a mapping holding exactly :meth:`field_names`) describes;
        ConfigError names what is missing or unknown."""
        checked_section("model", data, cls.field_names())
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain data (a new dict of nested lists, dicts and scalars)."""
        return {k: plain_data(getattr(self, k)) for k in self.field_names()}


class PoseRegressor(torch.nn.Module):
    """Regression network from plate observations to SMPL parameters.

    Holds the feature encoder (``encoder``), the sequence network (``net``), the body's joint
    model (``joint_model``) and, when the configuration asks for it, the closed-form plate fit
    (``plate_fit``). With the kinematic prior and global rotations the output layer starts at
    zero, so the untrained network answers with the prior itself and training learns
    corrections to it.
    """

    def __init__(self, config: RegressorConfig) -> None:
        super().__init__()
        self.config = config
        self.num_betas = int(config.num_betas)
        self.global_rotations = _global_rotations(config.rotations)
        rest = torch.as_tensor(config.plate_rest_rot, dtype=torch.float32)
        rest_pos = torch.as_tensor(config.plate_rest_pos, dtype=torch.float32)
        jt = torch.as_tensor(config.joint_template, dtype=torch.float32)
        js = torch.as_tensor(config.joint_shapedirs, dtype=torch.float32)
        self._build_encoder_and_network(rest, rest_pos, jt)
        self.joint_model = JointModel(jt, js)
        self.plate_fit = self._build_plate_fit(rest_pos)
        # Decoding's constant (follows the module's device; not saved).
        self.register_buffer("identity_6d", torch.tensor(IDENTITY_6D), persistent=False)

    def _build_encoder_and_network(
        self, rest: torch.Tensor, rest_pos: torch.Tensor, rest_joints: torch.Tensor
    ) -> None:
        """``self.encoder`` of the plates' features and ``self.net`` from them to the
        ``self.out_dim`` outputs, started at the kinematic prior where the encoder has one.

        ``rest`` (N, 3, 3) and ``rest_pos`` (N, 3) are the plates' rest orientations and
        positions (m), ``rest_joints`` (24, 3) the body's rest joints at zero betas (m)."""
        cfg = self.config
        self.encoder = FeatureEncoder(
            cfg.features,
            cfg.markers["parents"],
            rest,
            cfg.markers.get("joints"),
            plate_rest_pos=rest_pos,
            rest_joints=rest_joints,
        )
        net_kwargs = dict(cfg.network)
        name = net_kwargs.pop("name")
        self.out_dim = 24 * 6 + self.num_betas + 3
        self.net = build_network(name, self.encoder.dim, self.out_dim, **net_kwargs)
        if self.encoder.prior is not None and self.is_causal:
            self.encoder.prior.fill = False
        if self.global_rotations and self.encoder.has_prior:
            _zero_output_layer(self.net, self.out_dim)

    def _build_plate_fit(self, rest_pos: torch.Tensor) -> PlateFit | None:
        """The closed-form shape and translation fit the configuration asks for (None when
        off)."""
        cfg = self.config.plate_fit
        if not cfg["enabled"]:
            return None
        if not (self.encoder.predicts_in_heading_frame and self.global_rotations):
            raise ConfigError(
                "plate_fit needs heading-frame features (canonical, kinematic, bones, "
                "anchored, reach) and global rotations"
            )
        jm = self.joint_model
        return PlateFit(
            self.config.markers["joints"],
            rest_pos,
            torch.as_tensor(self.config.plate_shapedirs, dtype=torch.float32),
            jm.joint_template,
            jm.joint_shapedirs,
            float(cfg["prior_weight"]),
        )

    @property
    def is_causal(self) -> bool:
        """Whether the network's answer for a frame depends on past frames only."""
        return bool(getattr(self.net, "is_causal", False))

    def forward(self, pos, rot, valid) -> dict[str, torch.Tensor]:
        """Predict SMPL parameters for windows of observations.

        Args: pos (B, T, N, 3) m, rot (B, T, N, 3, 3), valid (B, T, N) bool.

        Returns: ``rotmats`` (B, T, 24, 3, 3) local rotations (joint 0 global, world frame),
        ``betas`` (B, T, num_betas), ``trans`` (B, T, 3) m; with the plate fit also
        ``net_betas`` and ``fit_carry`` (see :meth:`decode_outputs`).
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


def full_precision(like: torch.Tensor) -> contextlib.AbstractContextManager:
    """A block where autocast is off on ``like``'s device: everything in it runs in the inputs'
    own precision (float32) under a mixed-precision trainer."""
    return torch.autocast(device_type=like.device.type, enabled=False)


def plain_data(value):
    """``value`` with tensors and tuples turned into (nested) lists, recursively: a checkpoint
    then holds plain data only and loads with ``torch.load(weights_only=True)``."""
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, Mapping):
        return {k: plain_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_data(v) for v in value]
    return value


def checked_section(name: str, values: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``values`` as a plain dict holding exactly ``keys``; ConfigError names the section
    ``name`` and what is missing or unknown."""
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
