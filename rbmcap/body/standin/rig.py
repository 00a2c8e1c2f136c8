"""Rigging the stand-in mesh: skinning weights, joint regressor, shape and pose blend shapes.

All functions are pure numpy on the rest mesh (canonical frame, metres).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from rbmcap.body.standin.primitives import Part
from rbmcap.body.standin.surface import part_distances
from rbmcap.body.topology import vertex_adjacency
from rbmcap.skeleton import SMPL_PARENTS

CHILDREN = {j: [c for c, p in enumerate(SMPL_PARENTS) if p == j] for j in range(24)}
MAIN_CHILD = {0: 3, 9: 12}
"""Bones with several children are measured toward one of them (pelvis→spine, chest→neck)."""

WEIGHT_TEMPERATURE = 0.012
"""Metres over which a neighbouring bone's influence fades (skinning blend width)."""


def bone_ends(joints: np.ndarray) -> np.ndarray:
    """(24, 3) far end of each joint's bone: its (main) child, or a leaf's tip."""
    ends = np.empty_like(joints)
    leaf_tip = {10: (0.0, -0.01, 0.08), 15: (0.0, 0.2, 0.0), 22: (0.09, 0.0, 0.0)}
    for j in range(24):
        kids = CHILDREN[j]
        if j in MAIN_CHILD:
            ends[j] = joints[MAIN_CHILD[j]]
        elif len(kids) == 1:
            ends[j] = joints[kids[0]]
        else:
            key = {11: 10, 23: 22}.get(j, j)
            tip = np.array(leaf_tip[key])
            if key != j:
                tip[0] = -tip[0]
            ends[j] = joints[j] + tip
    return ends


def bone_projection(verts: np.ndarray, joints: np.ndarray):
    """Per vertex and bone: position along the bone s ∈ [0,1] (V,24) and closest point (V,24,3)."""
    a, b = joints, bone_ends(joints)
    ab = b - a
    s = np.einsum("vjc,jc->vj", verts[:, None] - a[None], ab) / (ab * ab).sum(-1)
    s = np.clip(s, 0.0, 1.0)
    return s, a[None] + s[..., None] * ab[None]


def skinning_weights(
    parts: tuple[Part, ...], verts: np.ndarray, faces: np.ndarray, smooth_steps: int = 2
) -> np.ndarray:
    """(V, 24) skinning weights from the parts around each vertex.

    The nearest part's bone owns a vertex; parts of its parent and child bones blend in as their
    distance approaches the nearest one's. Bones that are not neighbours in the tree never share
    a vertex (so the inner thighs do not follow the other leg).
    """
    d = part_distances(parts, verts)
    part_joint = np.array([p.joint for p in parts])
    owner = part_joint[d.argmin(axis=1)]
    adjacent = np.zeros((24, 24), dtype=bool)
    for j, p in enumerate(SMPL_PARENTS):
        adjacent[j, j] = True
        if p >= 0:
            adjacent[j, p] = adjacent[p, j] = True
    allowed = adjacent[owner][:, part_joint]  # (V, P)
    infl = np.exp(-(d - d.min(axis=1, keepdims=True)) / WEIGHT_TEMPERATURE) * allowed
    weights = np.zeros((len(verts), 24))
    np.add.at(weights.T, part_joint, infl.T)
    weights /= weights.sum(axis=1, keepdims=True)
    adj = vertex_adjacency(faces, len(verts)).astype(np.float64)
    mean = sp.diags(1.0 / np.asarray(adj.sum(axis=1)).ravel()) @ adj
    for _ in range(smooth_steps):
        weights = 0.5 * weights + 0.5 * (mean @ weights)
    weights[weights < 1e-4] = 0.0
    return weights / weights.sum(axis=1, keepdims=True)


def joint_regressor(verts: np.ndarray, weights: np.ndarray, joints: np.ndarray) -> np.ndarray:
    """(24, V) regressor with ``regressor @ verts == joints`` exactly.

    Each joint uses the ring of skin around it (a slab across its bone, on the two bones it
    connects); the weights are the minimum-norm correction of a uniform average that makes the
    weighted mean land exactly on the joint and sum to one.
    """
    reg = np.zeros((24, len(verts)))
    for j in range(24):
        p = SMPL_PARENTS[j]
        if p < 0:
            axis, bones = joints[3] - joints[0], [0, 1, 2, 3]
        else:
            axis, bones = joints[j] - joints[p], [j, p]
        axis = axis / np.linalg.norm(axis)
        rel = verts - joints[j]
        on_bones = weights[:, bones].sum(axis=1) > 0.5
        near = np.linalg.norm(rel, axis=1) < 0.25
        for half_width in (0.015, 0.025, 0.04, 0.06, 0.1):
            ring = np.flatnonzero((np.abs(rel @ axis) < half_width) & on_bones & near)
            if len(ring) >= 12:
                break
        a = np.vstack([verts[ring].T, np.ones(len(ring))])  # (4, K)
        w0 = np.full(len(ring), 1.0 / len(ring))
        target = np.append(joints[j], 1.0)
        w = w0 + a.T @ np.linalg.solve(a @ a.T, target - a @ w0)
        reg[j, ring] = w
    return reg


def _chain(weights, s, delta_joints: np.ndarray) -> np.ndarray:
    """Displacement of the skin when joints move by ``delta_joints`` (24,3): each bone's skin
    follows its two ends, interpolated along the bone, blended by the skinning weights."""
    ends = np.array(
        [MAIN_CHILD.get(j, CHILDREN[j][0] if len(CHILDREN[j]) == 1 else j) for j in range(24)]
    )
    d_start, d_end = delta_joints, delta_joints[ends]
    per_bone = (1 - s)[..., None] * d_start[None] + s[..., None] * d_end[None]  # (V,24,3)
    return np.einsum("vj,vjc->vc", weights, per_bone)


def _radial(weights, verts, closest, gains: dict[tuple[int, ...], float]) -> np.ndarray:
    g = np.zeros(24)
    for joints, gain in gains.items():
        g[list(joints)] = gain
    return np.einsum("vj,j,vjc->vc", weights, g, verts[:, None] - closest)


def _sided(values: dict[tuple[int, ...], tuple[float, float, float]]) -> np.ndarray:
    """(24,3) joint offsets; left joints as given, right joints mirrored in x."""
    out = np.zeros((24, 3))
    left_to_right = {1: 2, 4: 5, 7: 8, 10: 11, 13: 14, 16: 17, 18: 19, 20: 21, 22: 23}
    for joints, v in values.items():
        for j in joints:
            out[j] = v
            if j in left_to_right:
                out[left_to_right[j]] = (-v[0], v[1], v[2])
    return out


SHAPE_NAMES = (
    "height",
    "girth",
    "leg_length",
    "arm_length",
    "shoulder_width",
    "hip_width",
    "torso_length",
    "belly",
    "head_size",
    "muscularity",
)
"""Meaning of the stand-in's ten betas (+1 is about one standard deviation of adults)."""


def shape_blend_shapes(verts, normals, weights, joints) -> np.ndarray:
    """(V, 3, 10) shape directions, one per entry of :data:`SHAPE_NAMES`."""
    s, closest = bone_projection(verts, joints)
    x = verts[:, :1] * np.array([[1.0, 0.0, 0.0]])
    front = np.clip(normals[:, 2:3], 0, 1) ** 2 * normals
    dirs = [
        0.045 * (verts - joints[0]),
        _radial(
            weights,
            verts,
            closest,
            {
                (0, 3, 6, 9): 0.10,
                (12,): 0.08,
                (13, 14): 0.05,
                (1, 2, 4, 5, 16, 17, 18, 19): 0.09,
                (7, 8, 10, 11, 20, 21, 22, 23, 15): 0.02,
            },
        ),
        _chain(weights, s, _sided({(4,): (0, -0.025, 0), (7, 10): (0, -0.05, 0)})),
        _chain(
            weights, s, _sided({(18,): (0.018, 0, 0), (20,): (0.036, 0, 0), (22,): (0.042, 0, 0)})
        ),
        _chain(weights, s, _sided({(13,): (0.008, 0, 0), (16, 18, 20, 22): (0.022, 0, 0)}))
        + 0.10 * weights[:, [9]] * x,
        _chain(weights, s, _sided({(1, 4, 7, 10): (0.015, 0, 0)})) + 0.12 * weights[:, [0]] * x,
        _chain(
            weights,
            s,
            _sided(
                {
                    (6,): (0, 0.012, 0),
                    (9,): (0, 0.025, 0),
                    (12, 15, 13, 16, 18, 20, 22): (0, 0.04, 0),
                }
            ),
        ),
        0.035 * (weights[:, [3]] + weights[:, [6]]) * front,
        0.08 * weights[:, [15]] * (verts - (joints[15] + np.array([0, 0.09, 0.0]))),
        _radial(weights, verts, closest, {(16, 17, 18, 19): 0.10, (1, 2, 4, 5): 0.06})
        + 0.02 * weights[:, [9]] * front,
    ]
    return np.stack(dirs, axis=-1)


CORRECTIVE_BULGE = 0.008
"""Metres the skin at a joint swells outward when the joint bends by 90° (pose correctives)."""


def pose_blend_shapes(normals: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(V, 3, 207) pose correctives in SMPL's layout (features: (R_j − I) for joints 1..23).

    A bend by angle θ changes the trace of R − I by 2(cos θ − 1), so a direction placed on the
    three diagonal features swells the skin shared by a joint's two bones by
    ``CORRECTIVE_BULGE · (1 − cos θ)`` along the normal, a simple volume-preservation corrective.
    """
    out = np.zeros((len(normals), 3, 207))
    for j in range(1, 24):
        shared = np.clip(4.0 * weights[:, j] * weights[:, SMPL_PARENTS[j]], 0.0, 1.0)
        direction = -0.5 * CORRECTIVE_BULGE * shared[:, None] * normals
        for diag in (0, 4, 8):
            out[:, :, 9 * (j - 1) + diag] = direction
    return out
