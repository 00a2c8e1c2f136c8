"""A body layer as a skinned mesh: the rest mesh once, then 24 bone poses per frame.

The browser skins the mesh itself (three.js linear blend skinning), so a frame costs 24 bone
poses instead of a whole mesh, live and in a saved recording alike. Bone j is bound at
(identity, rest joint J̄_j) and posed at (global rotation G_j, posed joint p_j), so a rest vertex
v̄ goes to Σ_j w_j (G_j (v̄ − J̄_j) + p_j): SMPL's skinning without the pose correctives (a few
millimetres on the stand-in; :func:`skinned_vertices` is that formula, for tests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.skeleton import SMPL_PARENTS, SMPLH_TO_SMPL


@dataclass(frozen=True)
class SkinnedMesh:
    """Rest mesh and bone poses of one body layer (metres, world Z up).

    Attributes:
        vertices: (V, 3) float32 rest vertices (zero pose, the motion's betas, SMPL's Y-up frame).
        faces: (F, 3) uint32.
        weights: (V, 24) float32 skinning weights on the 24 SMPL joints.
        rest_joints: (24, 3) float32 bind positions of the bones.
        bone_wxyz: (T, 24, 4) float32 global joint rotations as unit quaternions, w first.
        joints: (T, 24, 3) float32 posed joint positions (the bone positions).
    """

    vertices: np.ndarray
    faces: np.ndarray
    weights: np.ndarray
    rest_joints: np.ndarray
    bone_wxyz: np.ndarray
    joints: np.ndarray


def skin_motion(body, motion) -> SkinnedMesh:
    """The skinned mesh of ``motion`` (an SMPLMotion) on ``body`` (a BodyModel)."""
    body = body.with_joint_offsets(motion.joint_offsets)
    betas = torch.as_tensor(motion.betas, dtype=torch.float32)
    with torch.no_grad():
        rest = body(torch.zeros(24, 3), betas).vertices
        rest_joints = body.rest_joints(betas)
        joints, grot = body.pose_joints(
            torch.as_tensor(motion.poses, dtype=torch.float32), betas, torch.as_tensor(motion.trans)
        )
        xyzw = roma.rotmat_to_unitquat(grot)
    return SkinnedMesh(
        vertices=rest.numpy().astype(np.float32),
        faces=body.faces.cpu().numpy().astype(np.uint32),
        weights=smpl_skin_weights(body),
        rest_joints=rest_joints.numpy().astype(np.float32),
        bone_wxyz=xyzw[..., [3, 0, 1, 2]].numpy().astype(np.float32),
        joints=joints.numpy().astype(np.float32),
    )


def smpl_skin_weights(body) -> np.ndarray:
    """(V, 24) skinning weights on the 24 SMPL joints: an SMPL-H joint outside SMPL's view (the
    fingers but the first index joints) hands its weight to its nearest ancestor inside it, which
    moves it rigidly since motions leave finger joints at rest."""
    weights = body.lbs_weights.detach().cpu().numpy().astype(np.float32)
    parents = body.model_parents
    if len(parents) == 24:
        return weights
    smpl_of = {m: s for s, m in enumerate(SMPLH_TO_SMPL)}
    out = np.zeros((len(weights), 24), np.float32)
    for j in range(len(parents)):
        a = j
        while a not in smpl_of:
            a = parents[a]
        out[:, smpl_of[a]] += weights[:, j]
    return out


def skinned_vertices(mesh: SkinnedMesh, frame: int) -> np.ndarray:
    """(V, 3) vertices of ``frame`` as the browser skins them (the module docstring's formula)."""
    xyzw = torch.as_tensor(mesh.bone_wxyz[frame][:, [1, 2, 3, 0]])
    rot = roma.unitquat_to_rotmat(xyzw).numpy()
    local = mesh.vertices[:, None, :] - mesh.rest_joints[None]  # (V, 24, 3)
    posed = np.einsum("jab,vjb->vja", rot, local) + mesh.joints[frame][None]
    return np.einsum("vj,vja->va", mesh.weights, posed)


def bone_segments(joints: np.ndarray) -> np.ndarray:
    """(..., 23, 2, 3) parent-to-child segments of the SMPL skeleton from joints (..., 24, 3)."""
    child = np.arange(1, 24)
    parent = np.asarray(SMPL_PARENTS)[child]
    return np.stack([joints[..., parent, :], joints[..., child, :]], axis=-2)
