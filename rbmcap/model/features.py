"""Input features: RBM observations → network inputs, and network outputs → world SMPL.

Seven encodings (docs/architecture.md#the-network), chosen by config:

- ``raw``: world positions and rotations (6D) of every plate.
- ``paper``: positions relative to the root (chest) plate, orientations relative to the parent
  plate, the root plate's global rotation and position appended.
- ``canonical``: a heading frame is taken from the root plate (its yaw about world Z, at its
  position); every position and rotation is expressed in it, so the features are invariant to a
  global yaw and a translation; the root orientation and translation are predicted in that frame
  and composed back.
- ``kinematic``: as ``canonical``, but each plate's rotation is first turned into an estimate of
  its bone's global rotation (plate rotation times the inverse of the plate's rest orientation on
  the body, so a rigidly carried plate gives the bone's rotation exactly), and the relative
  rotations between parent and child plates' bones (the local rotations of the joints they span)
  are added.
- ``bones``: as ``kinematic``, but the prior is only each plate's bone rotation, handed down to
  the joints without a plate (no pelvis fit from the hips, no swung collars or interpolated
  spine, no pelvis position): a few batched operations per frame instead of a few hundred, for
  live streams, where a frame's cost is the count of operations (the plate fit of
  :mod:`rbmcap.model.platefit` places the body instead).
- ``anchored``: between the two: as ``kinematic`` for the plated bones and the pelvis (fitted to
  the hips and spine, and placed), while every unplated joint (spine1-2, neck, collars) starts
  from its nearest estimated ancestor's rotation, as in ``bones``. ``kinematic``'s rules for those
  joints (interpolated spine, swung neck and collars) are the procedural rig's own, so a network
  trained mostly on procedural motion learns to leave them alone, and on real motion, whose rig
  shares a turn differently between those joints, it keeps the procedural split; with
  ``anchored`` it learns those joints from the plates everywhere (docs/history.md, "Which
  prior").
- ``reach``: as ``anchored``, with each plate's position relative to its parent plate expressed
  in the parent's bone frame (the parent plate's rotation times the inverse of its rest
  orientation) added: the arm from one plate to the next as the parent segment sees it, which
  turns with the joint between them and not with the body, and does not depend on how the child
  plate is turned on its segment (docs/history.md, "Positions in the parent's frame").

Every encoding appends the validity mask per plate and zeroes a missing plate's features, so a
missing marker is *masked*, never zeros posing as data; the reference is the root plate, so
masking a plate changes no other plate's features except its children's relative rotations.
(The design's ``paper`` uses the marker centroid as the position reference; a centroid moves
whenever any marker drops out, which would corrupt every feature during occlusions, so rbmcap
uses the root plate instead.)

Shapes: ``pos (..., T, N, 3)`` metres, ``rot (..., T, N, 3, 3)`` world-from-plate, ``valid
(..., T, N)`` bool; features ``(..., T, F)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rbmcap.errors import ConfigError
from rbmcap.geometry.plates_to_bones import KinematicPrior
from rbmcap.model.rotation6d import matrix_to_rotation_6d as matrix_to_6d

FEATURE_KINDS = ("raw", "paper", "canonical", "kinematic", "bones", "anchored", "reach")
KINEMATIC_KINDS = ("kinematic", "bones", "anchored", "reach")
"""Kinds whose features and prior start from each plate's bone rotation."""


def heading_frame(root_rot: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) rotation about world Z that carries the root plate's heading.

    The heading is the horizontal direction of the plate's x axis (its outward normal: forward
    for a chest plate); where that is near vertical the plate's z axis takes over smoothly.
    """
    fwd = root_rot[..., :, 0] + 0.1 * root_rot[..., :, 2]
    fx, fy = fwd[..., 0], fwd[..., 1]
    norm = torch.sqrt(fx * fx + fy * fy).clamp_min(1e-8)
    cos_sin = fwd[..., :2] / norm[..., None]
    # [[c, -s, 0], [s, c, 0], [0, 0, 1]] as c·A + s·B + C: products by 0 and ±1, so exact
    cos, sin = cos_sin[..., 0, None, None], cos_sin[..., 1, None, None]
    a, b, c = _HEADING_BASIS.to(root_rot)
    return cos * a + sin * b + c


_HEADING_BASIS = torch.tensor(
    [
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]],
        [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
    ]
)
"""The heading rotation's cos, sin and constant parts (see :func:`heading_frame`)."""


@dataclass
class FrameContext:
    """What decoding needs from the inputs: reference position (..., T, 3), frame (..., T, 3, 3)."""

    origin: torch.Tensor
    frame: torch.Tensor
    prior: torch.Tensor | None = None
    """(..., T, 24, 3, 3) kinematic prior of every bone's global rotation in the feature frame
    (see :class:`rbmcap.geometry.plates_to_bones.KinematicPrior`), or None."""
    pelvis: torch.Tensor | None = None
    """(..., T, 3) the prior's pelvis position in the feature frame (relative to ``origin``), or
    None: the network's translation output is an offset from it."""
    plates: tuple[torch.Tensor, torch.Tensor] | None = None
    """(pos (..., T, N, 3) in the feature frame, valid (..., T, N)): the plates seen, for a fit
    of shape and translation (:class:`rbmcap.model.platefit.PlateFit`), or None."""


class FeatureEncoder(torch.nn.Module):
    """Encodes RBM observations for a given marker set.

    Args:
        kind: one of :data:`FEATURE_KINDS`.
        parents: parent plate index per plate (-1 for the root), the marker set's tree.
        plate_rest_rot: (N, 3, 3) each plate's rotation on the body in the rest pose
            (canonical frame, zero betas); needed by ``kinematic``.
        marker_joints: (N,) SMPL joint carrying each plate; with ``kinematic`` it yields a prior
            for every bone's global rotation (see
            :class:`rbmcap.geometry.plates_to_bones.KinematicPrior`).
        plate_rest_pos: (N, 3) plate origins at rest (canonical frame, zero betas) and
        rest_joints: (24, 3) rest joints at zero betas: with both, the prior also places the
            pelvis (orientation from the hips and spine, and position), and its pelvis estimate
            is appended to the features.
    """

    def __init__(
        self,
        kind: str,
        parents,
        plate_rest_rot: torch.Tensor | None = None,
        marker_joints=None,
        plate_rest_pos=None,
        rest_joints=None,
    ) -> None:
        super().__init__()
        if kind not in FEATURE_KINDS:
            raise ConfigError(f"unknown input features {kind!r}; expected one of {FEATURE_KINDS}")
        roots = [i for i, p in enumerate(parents) if p < 0]
        if len(roots) != 1:
            raise ConfigError(f"marker tree must have exactly one root, got {len(roots)}")
        self.kind = kind
        self.root = roots[0]
        self.parents = [int(p) for p in parents]
        self.num_markers = len(self.parents)
        if kind in KINEMATIC_KINDS:
            if plate_rest_rot is None:
                raise ConfigError("kinematic features need the plates' rest orientations")
            self.register_buffer("rest_inv", plate_rest_rot.transpose(-1, -2).contiguous())
        parent_idx = torch.tensor([p if p >= 0 else i for i, p in enumerate(self.parents)])
        self.register_buffer("parent_idx", parent_idx, persistent=False)
        self.register_buffer("eye", torch.eye(3), persistent=False)
        self.has_prior = kind in KINEMATIC_KINDS and marker_joints is not None
        self.prior = None
        if self.has_prior:
            placed = kind != "bones"  # the pelvis fitted and placed
            self.prior = KinematicPrior(
                marker_joints,
                self.root,
                plate_rest_pos if placed else None,
                rest_joints if placed else None,
                parents=self.parents,
                interpolate=kind == "kinematic",
                swing=kind == "kinematic",
            )
        self.prior_features = 9 if self.has_prior and self.prior.has_position else 0

    @property
    def dim(self) -> int:
        """Feature size per frame."""
        n = self.num_markers
        per_marker = {"reach": 19}.get(self.kind, 16 if self.kind in KINEMATIC_KINDS else 10)
        extra = 9 if self.kind == "paper" else 0 if self.kind == "raw" else 1
        return n * per_marker + extra + self.prior_features

    @property
    def predicts_in_heading_frame(self) -> bool:
        return self.kind in ("canonical", *KINEMATIC_KINDS)

    def forward(self, pos, rot, valid) -> tuple[torch.Tensor, FrameContext]:
        mask = valid.to(pos.dtype)[..., None]
        rot = torch.where(valid[..., None, None], rot, self.eye.to(rot.dtype))
        pos = torch.where(valid[..., None], pos, 0.0)
        root_pos, root_rot = pos[..., self.root, :], rot[..., self.root, :, :]
        if self.kind == "raw":
            ctx = FrameContext(
                torch.zeros_like(root_pos), self.eye.to(pos.dtype).expand_as(root_rot)
            )
            feats = [pos, matrix_to_6d(rot)]
            extra = []
        elif self.kind == "paper":
            ctx = FrameContext(root_pos, self.eye.to(pos.dtype).expand_as(root_rot))
            rel_rot = rot[..., self.parent_idx, :, :].transpose(-1, -2) @ rot
            root_mask = mask[..., self.root, :]
            rel_rot[..., self.root, :, :] = root_rot
            rel_pos = (pos - root_pos[..., None, :]) * mask * root_mask[..., None, :]
            feats = [rel_pos, matrix_to_6d(rel_rot)]
            extra = [root_pos, matrix_to_6d(root_rot)]
        else:
            frame = heading_frame(root_rot)
            ht = frame.transpose(-1, -2)[..., None, :, :]
            local_pos = (ht @ (pos - root_pos[..., None, :])[..., None])[..., 0]
            ctx = FrameContext(root_pos, frame, plates=(local_pos, valid))
            local_pos = local_pos * mask * mask[..., self.root : self.root + 1, :]
            if self.kind == "canonical":
                feats = [local_pos, matrix_to_6d(ht @ rot)]
            else:
                bone = rot @ self.rest_inv
                parent_bones_t = bone[..., self.parent_idx, :, :].transpose(-1, -2)
                spans = parent_bones_t @ bone
                both = mask * mask[..., self.parent_idx, :]
                heading_bone = ht @ bone
                feats = [local_pos, matrix_to_6d(heading_bone), matrix_to_6d(spans) * both]
                if self.kind == "reach":
                    arm = (pos - pos[..., self.parent_idx, :])[..., None]
                    feats.append((parent_bones_t @ arm)[..., 0] * both)
            extra = [root_pos[..., 2:3]]
            if self.prior is not None:
                ctx.prior, ctx.pelvis = self.prior(heading_bone, local_pos, valid)
                if ctx.pelvis is not None:
                    extra = [matrix_to_6d(ctx.prior[..., 0, :, :]), ctx.pelvis, *extra]
        per_marker = torch.cat([*feats, mask], dim=-1) * mask
        per_marker = torch.cat([per_marker[..., :-1], mask], dim=-1)
        x = torch.cat([per_marker.flatten(-2), *extra], dim=-1)
        return x, ctx

    @staticmethod
    def decode_root(root_rot: torch.Tensor, trans_offset: torch.Tensor, ctx: FrameContext):
        """Network-frame root rotation (..., T, 3, 3) and translation offset (..., T, 3) → world."""
        world_rot = ctx.frame @ root_rot
        if ctx.pelvis is not None:
            trans_offset = trans_offset + ctx.pelvis
        trans = ctx.origin + (ctx.frame @ trans_offset[..., None])[..., 0]
        return world_rot, trans

    @staticmethod
    def encode_root(world_rot: torch.Tensor, trans: torch.Tensor, ctx: FrameContext):
        """Inverse of :meth:`decode_root` (targets in the network's frame)."""
        ft = ctx.frame.transpose(-1, -2)
        offset = (ft @ (trans - ctx.origin)[..., None])[..., 0]
        if ctx.pelvis is not None:
            offset = offset - ctx.pelvis
        return ft @ world_rot, offset
