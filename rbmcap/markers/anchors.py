"""Topology-free marker anchors: find "the same spot on the body" on any mesh.

An anchor names the SMPL joint whose segment carries the marker, a position ``along`` that
segment's bone and an outward ``direction`` in the rest pose (SMPL canonical frame: Y up, facing
+Z, subject's left +X). Resolution on a rest mesh: cast a ray from the bone point along the
direction, take the first surface hit, then the nearest vertex whose dominant skinning weight is
that joint (so the marker moves with the intended segment).

The bone of joint j runs from j to its child (pelvis → spine1 and spine3 → neck where there are
several); a leaf joint's bone (head, hands, feet) continues its parent bone by the same length.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import trimesh

from rbmcap.config.values import finite_float, finite_vector, short_repr
from rbmcap.errors import ConfigError, ModelError
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

MAIN_CHILD = {0: 3, 9: 12}
"""Child that ends the bone of a joint with several children (pelvis → spine1, spine3 → neck)."""


@dataclass(frozen=True)
class Anchor:
    """Where a marker sits, independent of mesh topology.

    Attributes:
        joint: SMPL joint index (0..23) whose segment carries the marker.
        along: 0..1 from the joint toward the end of its bone.
        direction: (3,) unit outward direction in the rest pose, canonical SMPL frame.
    """

    joint: int
    along: float
    direction: tuple[float, float, float]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Anchor:
        if not isinstance(data, Mapping):
            raise ConfigError("expected a mapping with joint, along and direction")
        joint = data.get("joint")
        if isinstance(joint, str):
            if joint not in SMPL_JOINT_NAMES:
                raise ConfigError(f"unknown joint {short_repr(joint)}; expected an SMPL joint name")
            joint = SMPL_JOINT_NAMES.index(joint)
        if isinstance(joint, bool) or not isinstance(joint, int) or not 0 <= joint < 24:
            raise ConfigError(
                f"joint {short_repr(joint)}: expected an SMPL joint name or index 0..23"
            )
        along = finite_float(data.get("along", 0.5))
        if along is None or not 0.0 <= along <= 1.0:
            raise ConfigError(
                f"along={short_repr(data.get('along'))}: expected a fraction in [0, 1]"
            )
        d = finite_vector(data.get("direction"), 3, bound=np.inf)  # any size: normalised
        if d is not None:
            d = d / max(float(np.abs(d).max()), 1e-300)  # scaled first: no overflow, no underflow
        if d is None or np.abs(d).max() < 1e-9:
            raise ConfigError(
                f"direction {short_repr(data.get('direction'))}: expected a non-zero 3-vector "
                "of finite numbers"
            )
        d = d / np.linalg.norm(d)
        return cls(joint=int(joint), along=along, direction=(float(d[0]), float(d[1]), float(d[2])))

    def to_dict(self) -> dict[str, Any]:
        return {
            "joint": SMPL_JOINT_NAMES[self.joint],
            "along": self.along,
            "direction": [round(c, 6) for c in self.direction],
        }


def bone_end(rest_joints: np.ndarray, joint: int) -> np.ndarray:
    """End point (3,) of ``joint``'s bone in the rest pose; ``rest_joints`` is (24, 3)."""
    children = [c for c, p in enumerate(SMPL_PARENTS) if p == joint]
    if children:
        child = MAIN_CHILD.get(joint, children[0])
        return rest_joints[child]
    parent = SMPL_PARENTS[joint]
    return 2.0 * rest_joints[joint] - rest_joints[parent]


def bone_point(rest_joints: np.ndarray, anchor: Anchor) -> np.ndarray:
    """The anchor's point (3,) on its bone in the rest pose."""
    start = rest_joints[anchor.joint]
    return start + anchor.along * (bone_end(rest_joints, anchor.joint) - start)


def dominant_smpl_joint(lbs_weights: np.ndarray) -> np.ndarray:
    """SMPL joint (0..23) with the largest skinning weight, per vertex.

    ``lbs_weights`` is (V, 24) for SMPL or (V, 52) for SMPL-H, whose finger joints count as the
    SMPL hand joint of their side.
    """
    w = np.asarray(lbs_weights)
    if w.shape[1] == 52:
        w = np.concatenate(
            [w[:, :22], w[:, 22:37].sum(1, keepdims=True), w[:, 37:].sum(1, keepdims=True)], 1
        )
    elif w.shape[1] != 24:
        raise ModelError(f"skinning weights for {w.shape[1]} joints: expected 24 or 52")
    return w.argmax(axis=1)


def first_hits(
    vertices: np.ndarray, faces: np.ndarray, origins: np.ndarray, directions: np.ndarray
) -> np.ndarray:
    """First intersection (R, 3) of each ray with the mesh; NaN where a ray misses."""
    mesh = trimesh.Trimesh(vertices=vertices, faces=faces, process=False)
    locations, ray_idx, _ = mesh.ray.intersects_location(origins, directions, multiple_hits=True)
    out = np.full(origins.shape, np.nan)
    best = np.full(len(origins), np.inf)
    for loc, r in zip(locations, ray_idx, strict=True):
        t = float(np.dot(loc - origins[r], directions[r]))
        if 0.0 <= t < best[r]:
            best[r], out[r] = t, loc
    return out


def resolve_anchors(body, anchors: tuple[Anchor, ...] | list[Anchor]) -> np.ndarray:
    """Vertex id (N,) on ``body``'s rest mesh for each anchor.

    Args:
        body: a body model with ``v_template`` (V, 3), ``faces`` (F, 3), ``lbs_weights``
            (V, 24|52) and ``rest_joints()`` (24, 3), all in the canonical rest frame. A body's
            joint offsets (a subject's joint correction) are left out: the plates stay on the
            vertices the model's own joints place them on.
        anchors: the anchors to place.

    Raises:
        ModelError: when no vertex of the body is skinned mostly to an anchor's joint.
    """
    verts = _numpy(body.v_template).astype(np.float64)
    faces = _numpy(body.faces).astype(np.int64)
    joints = _numpy(body.rest_joints()).astype(np.float64).reshape(24, 3)
    joints = joints - np.asarray(getattr(body, "joint_offsets", 0.0))
    owner = dominant_smpl_joint(_numpy(body.lbs_weights))
    origins = np.stack([bone_point(joints, a) for a in anchors])
    dirs = np.asarray([a.direction for a in anchors], dtype=np.float64)
    hits = first_hits(verts, faces, origins, dirs)
    ids = np.empty(len(anchors), dtype=np.int64)
    for i, anchor in enumerate(anchors):
        candidates = np.flatnonzero(owner == anchor.joint)
        if candidates.size == 0:
            raise ModelError(
                f"no vertex of the body is skinned mostly to joint "
                f"{SMPL_JOINT_NAMES[anchor.joint]!r}; cannot place an anchor there"
            )
        rel = verts[candidates] - origins[i]
        if np.all(np.isfinite(hits[i])):
            dist = np.linalg.norm(verts[candidates] - hits[i], axis=1)
        else:  # the bone point is outside the mesh: take the vertex closest to the ray
            t = rel @ dirs[i]
            dist = np.linalg.norm(rel - t[:, None] * dirs[i], axis=1) + np.where(t > 0, 0, 1e3)
        ids[i] = candidates[int(np.argmin(dist))]
    return ids


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)
