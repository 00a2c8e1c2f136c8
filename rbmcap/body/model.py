"""``BodyModel``: one interface over SMPL and SMPL-H files (real or the stand-in), via smplx.

The model's arrays are loaded by rbmcap (``.npz``, or ``.pkl`` without chumpy through an
allow-list, :mod:`rbmcap.body.files`), checked, and handed to smplx as its ``data_struct``, so
smplx owns the buffers and the full forward is ``smplx.lbs.lbs``.
rbmcap adds what smplx lacks: any leading batch dimensions, rotation-matrix or axis-angle poses,
the SMPL 24-joint view of SMPL-H, and *sparse* skinning of a handful of vertices.

Why sparse skinning is hand-written: marker synthesis and marker losses need ~100 vertices, while
smplx always blends the pose correctives and skinning transforms of every vertex. Skinning only the
requested vertices (with joints from a pre-multiplied joint regressor) is far cheaper and equal
to the full forward to float precision (``rbmcap bench skinning``, docs/benchmarks.md).
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import roma
import smplx
import torch
from smplx.lbs import lbs
from smplx.utils import Struct

from rbmcap.body.files import check_model_arrays
from rbmcap.body.topology import one_rings, with_one_rings
from rbmcap.errors import DataError, ModelError
from rbmcap.geometry import forward_kinematics
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS, SMPLH_PARENTS, SMPLH_TO_SMPL

_BASES = {"smpl": smplx.SMPL, "smplh": smplx.SMPLH}


@dataclass
class _SparseSubset:
    """Model arrays for a fixed set of K vertices: template (K,3), shapedirs (K,3,B), the
    non-zero pose-corrective columns posedirs (K,3,P') with their indices, the skinning
    weights (K,J') of the J' joints that influence these vertices, and per vertex and model
    joint m the weight of the joints m turns (m and its descendants), ``subtree`` (K,Jm,J'), and
    the pose correctives as one block per model joint after the root, ``pose_blocks``
    (Jm-1,K,3,9) (joint m's block reads its R_m − I)."""

    template: torch.Tensor
    shapedirs: torch.Tensor
    posedirs: torch.Tensor
    pose_columns: torch.Tensor
    weights: torch.Tensor
    joints: torch.Tensor
    subtree: torch.Tensor
    pose_blocks: torch.Tensor


@dataclass
class BodyOutput:
    """Posed body. ``vertices`` (..., V, 3) and ``joints`` (..., 24, 3), metres, world frame."""

    vertices: torch.Tensor
    joints: torch.Tensor


class BodyModel(torch.nn.Module):
    """An SMPL-family body: shape, pose and translation to a posed mesh and 24 SMPL joints.

    Args:
        arrays: model arrays (``v_template``, ``f``, ``weights``, ``J_regressor``,
            ``kintree_table``, ``shapedirs``, ``posedirs``) as read by
            :func:`rbmcap.body.files.read_model_arrays`.
        gender: 'neutral', 'male' or 'female' (recorded, the arrays decide the body).
        source: where the arrays came from ('standin' or a path), for messages and ``info``.
        num_betas: shape coefficients to use; default all in the file (SMPL-H up to 16).
        identity: a short id for manifests and checkpoints, e.g. 'standin-v1/neutral'.
    """

    def __init__(
        self,
        arrays: dict[str, np.ndarray],
        *,
        gender: str = "neutral",
        source: str = "",
        num_betas: int | None = None,
        identity: str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        arrays = dict(arrays)
        self.kind = check_model_arrays(arrays, source or "model")
        file_betas = arrays["shapedirs"].shape[-1]
        if num_betas is not None and not 1 <= num_betas <= file_betas:
            raise ModelError(f"{source}: num_betas={num_betas}, the file has 1..{file_betas}")
        self.gender = gender
        self.source = str(source)
        self.identity = identity or f"{self.kind}:{self.source}/{gender}"
        if self.kind == "smplh":
            # AMASS's SMPL+H .npz has no hand PCA; smplx insists on the keys.
            for side in "lr":
                arrays.setdefault(f"hands_components{side}", np.eye(45))
                arrays.setdefault(f"hands_mean{side}", np.zeros(45))
        # smplx caps betas at 10 unless the class's shape space is at least the file's.
        cls = type(
            _BASES[self.kind].__name__, (_BASES[self.kind],), {"SHAPE_SPACE_DIM": file_betas}
        )
        extra = {"use_pca": False, "flat_hand_mean": True} if self.kind == "smplh" else {}
        self.smplx_model = cls(
            model_path=self.source,
            data_struct=Struct(**arrays),
            num_betas=num_betas or file_betas,
            gender=gender,
            dtype=dtype,
            batch_size=1,
            **extra,
        )
        m = self.smplx_model
        self.model_parents: tuple[int, ...] = SMPL_PARENTS if self.kind == "smpl" else SMPLH_PARENTS
        self._joint_map = list(range(24)) if self.kind == "smpl" else list(SMPLH_TO_SMPL)
        nv, nb = m.v_template.shape[0], m.num_betas
        self.register_buffer("_posedirs_v", m.posedirs.T.reshape(nv, 3, -1).contiguous(), False)
        self.register_buffer("_joint_template", m.J_regressor @ m.v_template, persistent=False)
        j_shapedirs = torch.einsum("jv,vcb->jcb", m.J_regressor, m.shapedirs)
        self.register_buffer("_joint_shapedirs", j_shapedirs.reshape(-1, 3, nb), persistent=False)
        offsets = torch.zeros(self.num_model_joints, 3, dtype=m.v_template.dtype)
        self.register_buffer("_joint_offsets", offsets, persistent=False)
        self._faces_np = np.asarray(arrays["f"], dtype=np.int64)
        self._sparse_cache: dict = {}
        self._offset = False

    # ----------------------------------------------------------------------------- accessors
    @property
    def num_betas(self) -> int:
        return int(self.smplx_model.num_betas)

    @property
    def num_vertices(self) -> int:
        return int(self.smplx_model.v_template.shape[0])

    @property
    def num_model_joints(self) -> int:
        """Joints of the underlying model (24 SMPL, 52 SMPL-H)."""
        return len(self.model_parents)

    @property
    def num_joints(self) -> int:
        """Joints of rbmcap's SMPL view (always 24)."""
        return 24

    @property
    def faces(self) -> torch.Tensor:
        """(F, 3) long vertex indices."""
        return self.smplx_model.faces_tensor

    @property
    def parents(self) -> tuple[int, ...]:
        """Parent of each of the 24 SMPL joints (-1 for the pelvis)."""
        return SMPL_PARENTS

    @property
    def joint_names(self) -> tuple[str, ...]:
        return SMPL_JOINT_NAMES

    @property
    def v_template(self) -> torch.Tensor:
        """(V, 3) rest mesh at zero betas, canonical frame (Y up), metres."""
        return self.smplx_model.v_template

    @property
    def lbs_weights(self) -> torch.Tensor:
        """(V, J_model) skinning weights."""
        return self.smplx_model.lbs_weights

    @cached_property
    def _rings(self) -> list[np.ndarray]:
        return one_rings(self._faces_np, self.num_vertices)

    def one_ring(self, vertex_id: int) -> np.ndarray:
        """Ids of the vertices sharing an edge with ``vertex_id``."""
        self._check_vertex_ids([vertex_id])
        return self._rings[int(vertex_id)]

    def with_one_rings(self, vertex_ids) -> np.ndarray:
        """The given vertices plus their one-rings, unique and sorted."""
        self._check_vertex_ids(vertex_ids)
        return with_one_rings(vertex_ids, self._rings)

    def rest_joints(self, betas: torch.Tensor | None = None) -> torch.Tensor:
        """Rest-pose joint positions (..., 24, 3) for betas (..., B) (default zeros), with this
        body's joint offsets (:meth:`with_joint_offsets`)."""
        return self._model_rest_joints(self._betas(betas, ()))[..., self._joint_map, :]

    @property
    def joint_offsets(self) -> np.ndarray:
        """(24, 3) m: how far each SMPL joint sits from where the model's regressor puts it, in
        the rest frame (zeros but for :meth:`with_joint_offsets`)."""
        return self._joint_offsets[self._joint_map].detach().cpu().double().numpy()

    def with_joint_offsets(self, offsets) -> BodyModel:
        """This body with its joints moved from where the model's joint regressor puts them: a
        subject's joint correction (a calibration's ``joint_offsets``, in the spirit of MoSh's
        per-subject adjustments).

        Each SMPL joint j's rest position becomes ``J_j(betas) + offsets[j]``: the joint and the
        joints under it move, and the skin each joint turns turns about the moved centre (at
        rest the mesh is unchanged). Every method of the returned body applies them; the arrays
        are shared with this one.

        Args:
            offsets: (24, 3) m in the rest frame (the model's canonical axes), or None (this
                body as it is).
        """
        if offsets is None:
            return self
        d = np.asarray(offsets, dtype=np.float64)
        if d.shape != (24, 3) or not np.isfinite(d).all():
            raise DataError(f"joint offsets of shape {d.shape}: expected (24, 3) finite metres")
        body = copy.copy(self)
        body._buffers = dict(self._buffers)
        full = torch.zeros_like(self._joint_offsets)
        full[self._joint_map] = self._tensor(d)
        body._buffers["_joint_offsets"] = full
        body._offset = bool(d.any())
        if body._offset:
            tag = hashlib.sha256(np.round(d, 9).tobytes()).hexdigest()[:12]
            body.identity = f"{self.identity.split('+joints:')[0]}+joints:{tag}"
        return body

    # ------------------------------------------------------------------------------- posing
    def forward(self, poses, betas=None, trans=None) -> BodyOutput:
        """Full forward: smplx's linear blend skinning of every vertex (with joint offsets,
        :meth:`skin_vertices_and_joints` of every vertex, the same skinning).

        Args:
            poses: (..., 24, 3) axis-angle or (..., 24, 3, 3) local rotations (SMPL-H also takes
                its 52 joints); SMPL's hand joints map onto SMPL-H's first index joints.
            betas: (..., B) or (B,) shape, B ≤ num_betas (missing ones are zero); default zeros.
            trans: (..., 3) translation in metres; default zero.

        Returns:
            BodyOutput with vertices (..., V, 3) and the 24 SMPL joints (..., 24, 3).
        """
        if self._offset:  # smplx's lbs takes its joints from the regressor alone
            verts, joints = self.skin_vertices_and_joints(self._all_vertices, poses, betas, trans)
            return BodyOutput(vertices=verts, joints=joints)
        rot = self._model_rotmats(poses)
        batch = rot.shape[:-3]
        betas = self._betas(betas, batch)
        n = int(np.prod(batch)) if batch else 1
        m = self.smplx_model
        verts, joints = lbs(
            betas.reshape(n, -1),
            rot.reshape(n, -1, 3, 3),
            m.v_template,
            m.shapedirs,
            m.posedirs,
            m.J_regressor,
            m.parents,
            m.lbs_weights,
            pose2rot=False,
        )
        verts = verts.reshape(*batch, -1, 3)
        joints = joints[:, self._joint_map].reshape(*batch, 24, 3)
        if trans is not None:
            t = self._tensor(trans)[..., None, :]
            verts, joints = verts + t, joints + t
        return BodyOutput(vertices=verts, joints=joints)

    def pose_joints(self, poses, betas=None, trans=None) -> tuple[torch.Tensor, torch.Tensor]:
        """Posed joints only (no mesh): joints (..., 24, 3) and global rotations (..., 24, 3, 3)."""
        rot = self._model_rotmats(poses)
        rest = self._model_rest_joints(self._betas(betas, rot.shape[:-3]))
        grot, joints = forward_kinematics(rot, rest, self.model_parents)
        joints = joints[..., self._joint_map, :]
        if trans is not None:
            joints = joints + self._tensor(trans)[..., None, :]
        return joints, grot[..., self._joint_map, :, :]

    def skin_vertices(self, vertex_ids, poses, betas=None, trans=None) -> torch.Tensor:
        """Sparse linear blend skinning of only ``vertex_ids``.

        Same arguments as :meth:`forward`; returns (..., K, 3) positions of the K requested
        vertices, equal to ``forward(...).vertices[..., vertex_ids, :]`` to float precision.
        """
        return self.skin_vertices_and_joints(vertex_ids, poses, betas, trans)[0]

    def skin_vertices_and_joints(
        self, vertex_ids, poses, betas=None, trans=None, joint_offsets=None
    ):
        """Sparse skinning and the 24 posed joints from one forward-kinematics pass.

        ``joint_offsets``: None, or (..., 24, 3) m moving the joints further, per pose (several
        subjects' joint corrections in one batch; :meth:`with_joint_offsets` for one).

        Returns (vertices (..., K, 3), joints (..., 24, 3)), metres, world frame.
        """
        sub = self._sparse(vertex_ids)
        rot = self._model_rotmats(poses)
        betas = self._betas(betas, rot.shape[:-3])
        out, _, _, gpos, _, _ = self._skin(sub, rot, betas, joint_offsets)
        joints = gpos[..., self._joint_map, :]
        if trans is not None:
            t = self._tensor(trans)[..., None, :]
            out, joints = out + t, joints + t
        return out, joints

    def skin_vertex_tangents(
        self, vertex_ids, poses, axes, betas=None, trans=None, joint_offsets=None
    ):
        """Sparse skinning of ``vertex_ids`` and the joints, and how they move, to first order, as
        each joint turns about each of three axes.

        Turning SMPL joint j about the axis φ (in its own frame: R_j → R_j exp([φ]ₓ) per unit
        step) swings the skin its subtree moves about the joint's centre c_j, at the world
        angular velocity ω = G_j φ (G_j the joint's global rotation), and changes the pose
        correctives:

            ∂v/∂s = ω × Σ_{k under j} w_k (G_k v' + s_k − c_j) + B ∂v'/∂s

        with w_k the vertex's skinning weights, G_k v' + s_k joint k's skinning transform of the
        vertex's rest position v' (shape and pose correctives applied), B its blended rotation
        and ∂v'/∂s the correctives' change (linear in R_j − I, with ∂R_j = R_j [φ]ₓ). These are
        the exact derivatives of :meth:`skin_vertices`, at the cost of one skinning pass.

        Args:
            vertex_ids, poses: the K vertices; (..., 24, 3) axis-angle or (..., 24, 3, 3).
            axes: (..., 24, 3, 3) each joint's three axes (columns), in its own frame.
            betas, trans, joint_offsets: as :meth:`skin_vertices_and_joints`.

        Returns:
            (vertices (..., K, 3), their tangents (..., 24, 3, K, 3), the 24 joints (..., 24, 3),
            their tangents (..., 24, 3, 24, 3)): turning joint j about its a-th axis moves the
            vertices by tangents[..., j, a] and the joints by joint tangents[..., j, a] (metres
            per radian of turn).
        """
        sub = self._sparse(vertex_ids)
        rot = self._model_rotmats(poses)
        out, v, grot, gpos, shift, blend_rot = self._skin(
            sub, rot, self._betas(betas, rot.shape[:-3]), joint_offsets
        )
        j = sub.joints
        # the SMPL joints' subtrees: each joint's skinning transform of each vertex, summed
        # under each joint, about the joint's centre
        smpl = self._joint_map
        subtree = sub.subtree[:, smpl]  # (K, 24, J')
        moved = torch.einsum("...jab,...kb->...kja", grot[..., j, :, :], v) + shift[..., None, j, :]
        arm = torch.einsum("kmj,...kja->...mka", subtree, moved)
        arm = arm - subtree.sum(-1).T[..., None] * gpos[..., smpl, None, :]  # (..., 24, K, 3)
        axes = self._tensor(axes)
        omega = (grot[..., smpl, :, :] @ axes).transpose(-1, -2)  # (..., 24, 3 axes, 3)
        swing = torch.linalg.cross(omega[..., :, None, :], arm[..., None, :, :], dim=-1)
        # pose correctives: joint j's block of (R − I) changes by R_j [φ]ₓ
        turned = rot[..., smpl[1:], None, :, :] @ _skew(axes[..., 1:, :, :].transpose(-1, -2))
        blocks = sub.pose_blocks[[m - 1 for m in smpl[1:]]]  # (23, K, 3, 9)
        d_rest = torch.einsum("jkcn,...jan->...jakc", blocks, turned.flatten(-2))
        d_skin = (blend_rot[..., None, None, :, :, :] @ d_rest[..., None])[..., 0]
        tangents = torch.cat([swing[..., :1, :, :, :], swing[..., 1:, :, :, :] + d_skin], dim=-4)
        # the joints: joint j's turn swings the joints under it about c_j
        joints = gpos[..., smpl, :]
        offsets = joints[..., None, :, :] - joints[..., :, None, :]  # (..., 24 j, 24 k, 3)
        offsets = offsets * self._smpl_below(offsets)[..., None]
        joint_tangents = torch.linalg.cross(omega[..., None, :], offsets[..., None, :, :], dim=-1)
        if trans is not None:
            t = self._tensor(trans)[..., None, :]
            out, joints = out + t, joints + t
        return out, tangents, joints, joint_tangents

    def _skin(self, sub: _SparseSubset, rot: torch.Tensor, betas: torch.Tensor, offsets=None):
        """Sparse skinning of ``sub``'s vertices at model rotations ``rot`` (..., Jm, 3, 3)
        (``offsets``: None or (..., 24, 3) m added to the SMPL joints' rest positions):
        (posed vertices (..., K, 3) without translation, their rest positions with shape and
        pose correctives v' (..., K, 3), the joints' global rotations (..., Jm, 3, 3) and
        positions (..., Jm, 3), the skinning transforms' shifts (..., Jm, 3), the vertices'
        blended rotations (..., K, 3, 3))."""
        rest = self._model_rest_joints(betas)
        if offsets is not None:
            rest = rest + self._smpl_to_model(self._tensor(offsets))
        grot, gpos = forward_kinematics(rot, rest, self.model_parents)
        # Skinning transform of joint j maps a rest point x to grot_j (x - rest_j) + gpos_j.
        shift = gpos - (grot @ rest[..., None])[..., 0]
        eye = torch.eye(3, dtype=rot.dtype, device=rot.device)
        pose_feature = (rot[..., 1:, :, :] - eye).flatten(-3)[..., sub.pose_columns]
        v = sub.template + torch.einsum("kcb,...b->...kc", sub.shapedirs, betas)
        v = v + torch.einsum("kcp,...p->...kc", sub.posedirs, pose_feature)
        j = sub.joints  # only the joints that move these vertices
        blend_rot = torch.einsum("kj,...jab->...kab", sub.weights, grot[..., j, :, :])
        blend_shift = torch.einsum("kj,...ja->...ka", sub.weights, shift[..., j, :])
        out = (blend_rot @ v[..., None])[..., 0] + blend_shift
        return out, v, grot, gpos, shift, blend_rot

    def _smpl_below(self, like: torch.Tensor) -> torch.Tensor:
        """(24, 24) 1 where SMPL joint k (column) is joint j (row) or under it in the model's
        tree, else 0, as ``like``'s dtype and device."""
        smpl = self._joint_map
        below = self._below[np.ix_(smpl, smpl)]
        return torch.as_tensor(below, dtype=like.dtype, device=like.device)

    def _smpl_to_model(self, values: torch.Tensor) -> torch.Tensor:
        """(..., 24, 3) per SMPL joint as (..., Jm, 3) per model joint (zero where SMPL has
        none)."""
        if self.kind == "smpl":
            return values
        pick = torch.zeros(self.num_model_joints, 24, dtype=values.dtype, device=values.device)
        pick[self._joint_map, torch.arange(24)] = 1.0
        return torch.einsum("mj,...jc->...mc", pick, values)

    @cached_property
    def _all_vertices(self) -> np.ndarray:
        return np.arange(self.num_vertices)

    @cached_property
    def _below(self) -> np.ndarray:
        """(Jm, Jm) 1 where model joint k (column) is joint m (row) or under it, else 0."""
        below = np.eye(self.num_model_joints)
        for k, parent in enumerate(self.model_parents):
            if parent >= 0:
                below[:, k] = np.maximum(below[:, k], below[:, parent])
        return below

    def _sparse(self, vertex_ids) -> _SparseSubset:
        """The model arrays restricted to ``vertex_ids`` (cached per id list and device)."""
        ids = np.asarray(vertex_ids, dtype=np.int64).reshape(-1)
        key = (ids.tobytes(), str(self.faces.device), self.v_template.dtype)
        cached = self._sparse_cache.get(key)
        if cached is None:
            self._check_vertex_ids(ids)
            cached = self._sparse_cache[key] = self._build_sparse(ids)
        return cached

    def _build_sparse(self, ids: np.ndarray) -> _SparseSubset:
        # Normal tensors even when first asked for under torch.inference_mode (synthesis): the
        # cache is shared with later autograd users (solvers, losses).
        with torch.inference_mode(False), torch.no_grad():
            m = self.smplx_model
            idx = torch.as_tensor(ids, device=self.faces.device)
            posedirs = self._posedirs_v[idx]
            cols = torch.nonzero(posedirs.abs().amax(dim=(0, 1)) > 0).flatten()
            weights = m.lbs_weights[idx]
            joints = torch.nonzero(weights.abs().amax(dim=0) > 0).flatten()
            below = torch.as_tensor(self._below[:, joints.cpu().numpy()], dtype=weights.dtype)
            return _SparseSubset(
                template=m.v_template[idx],
                shapedirs=m.shapedirs[idx],
                posedirs=posedirs[..., cols],
                pose_columns=cols,
                weights=weights[:, joints],
                joints=joints,
                subtree=weights[:, None, joints] * below.to(weights.device),
                pose_blocks=posedirs.reshape(len(ids), 3, -1, 9).permute(2, 0, 1, 3),
            )

    # ------------------------------------------------------------------------------ helpers
    def _tensor(self, x) -> torch.Tensor:
        ref = self.smplx_model.v_template
        return torch.as_tensor(x, dtype=ref.dtype, device=ref.device)

    def _model_rest_joints(self, betas: torch.Tensor) -> torch.Tensor:
        shaped = torch.einsum("jcb,...b->...jc", self._joint_shapedirs, betas)
        return self._joint_template + self._joint_offsets + shaped

    def _betas(self, betas, batch: tuple[int, ...]) -> torch.Tensor:
        nb = self.num_betas
        if betas is None:
            return self._tensor(torch.zeros(nb)).expand(*batch, nb)
        b = self._tensor(betas)
        if b.shape[-1] < nb:
            b = torch.cat([b, b.new_zeros(*b.shape[:-1], nb - b.shape[-1])], dim=-1)
        b = b[..., :nb]  # extra betas beyond the model's shape space are ignored
        return b.expand(*torch.broadcast_shapes(batch, b.shape[:-1]), nb)

    def _model_rotmats(self, poses) -> torch.Tensor:
        p = self._tensor(poses)
        if p.ndim >= 3 and p.shape[-2:] == (3, 3) and p.shape[-3] in (24, self.num_model_joints):
            rot = p
        elif p.ndim >= 2 and p.shape[-1] == 3 and p.shape[-2] in (24, self.num_model_joints):
            rot = roma.rotvec_to_rotmat(p)
        else:
            raise DataError(
                f"poses of shape {tuple(p.shape)}: expected (..., 24, 3) axis-angle or "
                f"(..., 24, 3, 3) rotation matrices"
            )
        if rot.shape[-3] == self.num_model_joints:
            return rot
        full = torch.eye(3, dtype=rot.dtype, device=rot.device).expand(
            *rot.shape[:-3], self.num_model_joints, 3, 3
        )
        full = full.clone()
        full[..., self._joint_map, :, :] = rot
        return full

    def _check_vertex_ids(self, vertex_ids) -> None:
        ids = np.asarray(vertex_ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_vertices):
            raise ModelError(
                f"vertex id {int(ids.max() if ids.max() >= self.num_vertices else ids.min())} "
                f"is out of range for {self.identity} ({self.num_vertices} vertices)"
            )

    def extra_repr(self) -> str:
        return (
            f"kind={self.kind}, gender={self.gender}, vertices={self.num_vertices}, "
            f"betas={self.num_betas}, source={self.source!r}"
        )


def _skew(v: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) cross-product matrices [v]ₓ of (..., 3) vectors."""
    zero = torch.zeros_like(v[..., 0])
    x, y, z = v.unbind(-1)
    return torch.stack(
        [
            torch.stack([zero, -z, y], dim=-1),
            torch.stack([z, zero, -x], dim=-1),
            torch.stack([-y, x, zero], dim=-1),
        ],
        dim=-2,
    )
