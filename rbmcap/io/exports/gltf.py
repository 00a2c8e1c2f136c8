"""Animated ``.glb`` (binary glTF 2.0) of an SMPL motion: one skinned mesh and its skeleton.

Why skinned: the file holds the rest mesh once, the 24 SMPL joints as nodes, linear-blend
skinning weights and one rotation track per joint (plus the root's translation), so a long
motion costs ~400 bytes a frame instead of a mesh a frame, and Blender, three.js or any glTF
viewer plays it. What it cannot hold: SMPL's pose correctives (a glTF skin is plain linear blend
skinning), so elbows and knees look as they do in plain LBS.

Frames: glTF is Y up, metres. The rest mesh and joints are SMPL's canonical frame at the motion's
betas (already Y up); the root node carries ``C R0`` and ``C (J0 + trans)``, C turning rbmcap's
Z-up world to Y up (as in :mod:`rbmcap.io.exports.bvh`). Joints keep at most the four largest
skinning weights per vertex (renormalised), as glTF's ``JOINTS_0``/``WEIGHTS_0`` allow. The
animation has one keyframe per frame at times k / fps (duration (T − 1) / fps), linear
interpolation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pygltflib as gl
import roma
import torch

from rbmcap.atomic import atomic_path
from rbmcap.io.exports.bvh import Z_UP_TO_Y_UP
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS, SMPLH_TO_SMPL

INFLUENCES = 4
_TYPES = {1: gl.SCALAR, 3: gl.VEC3, 4: gl.VEC4, 16: gl.MAT4}
_COMPONENTS = {
    np.dtype(np.float32): gl.FLOAT,
    np.dtype(np.uint32): gl.UNSIGNED_INT,
    np.dtype(np.uint16): gl.UNSIGNED_SHORT,
}


class _Blob:
    """The binary chunk, growing one accessor (and its buffer view) at a time."""

    def __init__(self, doc: gl.GLTF2) -> None:
        self.doc, self.parts, self.size = doc, [], 0

    def add(self, array: np.ndarray, target: int | None = None, bounds: bool = False) -> int:
        """Append ``array`` (count, width) and return its accessor index."""
        a = np.ascontiguousarray(array)
        width = a.shape[1] if a.ndim > 1 else 1
        data = a.tobytes()
        self.doc.bufferViews.append(
            gl.BufferView(buffer=0, byteOffset=self.size, byteLength=len(data), target=target)
        )
        pad = (-len(data)) % 4
        self.parts.append(data + b"\0" * pad)
        self.size += len(data) + pad
        acc = gl.Accessor(
            bufferView=len(self.doc.bufferViews) - 1,
            count=len(a),
            componentType=_COMPONENTS[a.dtype],
            type=_TYPES[width],
        )
        if bounds:
            flat = a.reshape(len(a), -1)
            acc.min, acc.max = flat.min(0).tolist(), flat.max(0).tolist()
        self.doc.accessors.append(acc)
        return len(self.doc.accessors) - 1

    def finish(self) -> None:
        self.doc.buffers.append(gl.Buffer(byteLength=self.size))
        self.doc.set_binary_blob(b"".join(self.parts))


def smpl_skin_weights(body) -> tuple[np.ndarray, np.ndarray]:
    """Per vertex the ``INFLUENCES`` strongest of the 24 SMPL joints: indices (V, 4) uint16 and
    weights (V, 4) float32 summing to 1. SMPL-H finger weights go to the nearest SMPL joint up
    the tree (the wrist, or the hand joint for the first index joint)."""
    w = body.lbs_weights.detach().cpu().double().numpy()
    if w.shape[1] != 24:
        to_smpl = {m: s for s, m in enumerate(SMPLH_TO_SMPL)}
        merged = np.zeros((len(w), 24))
        for m in range(w.shape[1]):
            k = m
            while k not in to_smpl:
                k = body.model_parents[k]
            merged[:, to_smpl[k]] += w[:, m]
        w = merged
    idx = np.argsort(-w, axis=1)[:, :INFLUENCES]
    top = np.take_along_axis(w, idx, axis=1)
    top /= top.sum(1, keepdims=True)
    return idx.astype(np.uint16), top.astype(np.float32)


def _rest(motion, body) -> tuple[np.ndarray, np.ndarray]:
    """Rest vertices (V, 3) and joints (24, 3) at the motion's betas, metres, canonical Y up."""
    body = body.with_joint_offsets(motion.joint_offsets)
    betas = torch.as_tensor(motion.betas, dtype=torch.float32)
    with torch.no_grad():
        out = body(torch.zeros(24, 3), betas)
    return out.vertices.cpu().numpy(), body.rest_joints(betas).detach().cpu().double().numpy()


def _add_mesh(doc: gl.GLTF2, blob: _Blob, body, verts: np.ndarray, joints: np.ndarray) -> None:
    """The skinned mesh (node 24) and its skin over joint nodes 0..23."""
    idx, w = smpl_skin_weights(body)
    attrs = gl.Attributes(
        POSITION=blob.add(verts.astype(np.float32), gl.ARRAY_BUFFER, bounds=True),
        JOINTS_0=blob.add(idx, gl.ARRAY_BUFFER),
        WEIGHTS_0=blob.add(w, gl.ARRAY_BUFFER),
    )
    faces = body.faces.cpu().numpy().astype(np.uint32).reshape(-1)
    prim = gl.Primitive(attributes=attrs, indices=blob.add(faces, gl.ELEMENT_ARRAY_BUFFER))
    doc.meshes.append(gl.Mesh(primitives=[prim], name="body"))
    ibm = np.tile(np.eye(4, dtype=np.float32), (24, 1, 1))
    ibm[:, :3, 3] = -joints  # bind pose: joint j at J_j, unrotated
    ibm_acc = blob.add(ibm.transpose(0, 2, 1).reshape(24, 16))  # glTF is column-major
    doc.skins.append(gl.Skin(inverseBindMatrices=ibm_acc, joints=list(range(24)), skeleton=0))
    doc.nodes.append(gl.Node(name="body", mesh=0, skin=0))


def _add_skeleton(doc: gl.GLTF2, joints: np.ndarray) -> None:
    """Nodes 0..23: SMPL's joints with their rest offsets from the parent (m)."""
    children: list[list[int]] = [[] for _ in range(24)]
    for j, p in enumerate(SMPL_PARENTS):
        if p >= 0:
            children[p].append(j)
    for j, p in enumerate(SMPL_PARENTS):
        offset = joints[j] - (joints[p] if p >= 0 else 0.0)
        doc.nodes.append(
            gl.Node(
                name=SMPL_JOINT_NAMES[j], translation=offset.tolist(), children=children[j] or None
            )
        )


def _add_animation(doc: gl.GLTF2, blob: _Blob, motion, joints: np.ndarray) -> None:
    """One rotation track per joint and the root's translation track, a key per frame."""
    rot = roma.rotvec_to_rotmat(torch.from_numpy(motion.poses)).numpy()
    rot[:, 0] = Z_UP_TO_Y_UP @ rot[:, 0]
    quats = roma.rotmat_to_unitquat(torch.from_numpy(rot)).numpy().astype(np.float32)  # XYZW
    root = ((motion.trans + joints[0]) @ Z_UP_TO_Y_UP.T).astype(np.float32)
    times = (np.arange(motion.num_frames) / motion.fps).astype(np.float32)
    t_acc = blob.add(times, bounds=True)
    anim = gl.Animation(name=motion.name or "motion")
    tracks = [(j, "rotation", quats[:, j]) for j in range(24)] + [(0, "translation", root)]
    for node, path, values in tracks:
        anim.samplers.append(
            gl.AnimationSampler(input=t_acc, output=blob.add(values), interpolation=gl.ANIM_LINEAR)
        )
        target = gl.AnimationChannelTarget(node=node, path=path)
        anim.channels.append(gl.AnimationChannel(sampler=len(anim.samplers) - 1, target=target))
    doc.animations.append(anim)


def write_motion_glb(path: str | Path, motion, body) -> Path:
    """Write ``motion`` as an animated, skinned ``.glb`` on ``body`` at the motion's betas (see
    the module docstring). Written atomically."""
    verts, joints = _rest(motion, body)
    doc = gl.GLTF2(asset=gl.Asset(generator="rbmcap"))
    blob = _Blob(doc)
    _add_skeleton(doc, joints)
    _add_mesh(doc, blob, body, verts, joints)
    _add_animation(doc, blob, motion, joints)
    blob.finish()
    doc.scenes.append(gl.Scene(nodes=[0, 24]))
    doc.scene = 0
    with atomic_path(path) as tmp:
        doc.save_binary(str(tmp))
    return Path(path)
