"""Posing SMPL motions on a body shape: joints, foot sole points and lowest points.

Everything the motion package measures on a body (floor contact, foot skate, penetration) goes
through :class:`MotionKinematics`, which wraps a :class:`rbmcap.body.BodyModel` (the stand-in
unless another is given) at one shape. Outputs are float64 numpy arrays in the world frame
(metres, Z up).
"""

from __future__ import annotations

import weakref
from functools import lru_cache

import numpy as np
import roma
import torch
from scipy.spatial import ConvexHull, QhullError

from rbmcap.body import load_body_model
from rbmcap.geometry import forward_kinematics
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

LEFT_ANKLE, RIGHT_ANKLE = (
    SMPL_JOINT_NAMES.index("left_ankle"),
    SMPL_JOINT_NAMES.index("right_ankle"),
)
LEFT_FOOT, RIGHT_FOOT = SMPL_JOINT_NAMES.index("left_foot"), SMPL_JOINT_NAMES.index("right_foot")
FOOT_JOINTS = (LEFT_FOOT, RIGHT_FOOT)

_FOOT_REGION_M = 0.03  # rest vertices this close above the sole are all contact candidates
_SOLE_BAND_M = 0.015  # rest vertices of the feet this close above the sole form the soles


@lru_cache(maxsize=4)
def standin_body(gender: str = "neutral"):
    """The stand-in body (built and cached on first use)."""
    return load_body_model("standin", gender=gender)


class MotionKinematics:
    """Pose motions on one body at one shape.

    Args:
        body: a :class:`rbmcap.body.BodyModel` (required: there is no silent stand-in; pass
            ``standin_body()`` for the stand-in).
        betas: (B,) shape; default zeros.
    """

    def __init__(self, body, betas: np.ndarray | None = None) -> None:
        if body is None:
            raise TypeError("MotionKinematics needs a body model (e.g. standin_body())")
        self.body = body
        nb = self.body.num_betas
        b = np.zeros(nb) if betas is None else np.asarray(betas, dtype=np.float64).reshape(-1)
        b = np.concatenate([b, np.zeros(max(0, nb - len(b)))])[:nb]
        self.betas = torch.as_tensor(b, dtype=torch.float32)
        with torch.no_grad():
            self.rest_joints = self.body.rest_joints(self.betas).double().numpy()
            zero = torch.zeros(24, 3)
            rest_verts = self.body.forward(zero, self.betas).vertices.double().numpy()
        self.sole_height = float(rest_verts[:, 1].min())
        """Rest height (canonical Y) of the soles: the lowest rest vertex."""
        self.sole_vertices, self.sole_side, self.candidate_vertices = _vertex_sets(self.body)
        """(K,) ids of the vertices on the soles and (K,) their foot: 0 left, 1 right; and the
        vertices searched for the lowest point (see :meth:`lowest_candidates`)."""
        self._sole_in_candidates = np.searchsorted(self.candidate_vertices, self.sole_vertices)

    # ------------------------------------------------------------------------------ posing
    def pose(self, poses: np.ndarray, trans: np.ndarray | None = None):
        """Joints (T, 24, 3) and global rotations (T, 24, 3, 3) of axis-angle poses (T, 24, 3)."""
        rot = roma.rotvec_to_rotmat(torch.as_tensor(np.asarray(poses), dtype=torch.float64))
        grot, joints = forward_kinematics(rot, torch.from_numpy(self.rest_joints), SMPL_PARENTS)
        joints = joints.numpy()
        if trans is not None:
            joints = joints + np.asarray(trans)[..., None, :]
        return joints, grot.numpy()

    def soles(self, poses: np.ndarray, trans: np.ndarray | None = None) -> np.ndarray:
        """(T, K, 3) world positions of the sole vertices (see ``sole_vertices``)."""
        return self._skin(self.sole_vertices, poses, trans)

    def contact_points(self, poses: np.ndarray, trans: np.ndarray | None = None):
        """Both :meth:`lowest_candidates` and :meth:`soles` from one skinning pass:
        (lowest (T,), its vertex id (T,), soles (T, K, 3))."""
        pts = self._skin(self.candidate_vertices, poses, trans)
        k = pts[..., 2].argmin(-1)
        lowest = np.take_along_axis(pts[..., 2], k[:, None], -1)[:, 0]
        return lowest, self.candidate_vertices[k], pts[:, self._sole_in_candidates]

    def _skin(self, ids: np.ndarray, poses: np.ndarray, trans, chunk: int = 512) -> np.ndarray:
        out = []
        poses_t = torch.as_tensor(np.asarray(poses), dtype=torch.float32)
        with torch.no_grad():
            for start in range(0, len(poses_t), chunk):
                v = self.body.skin_vertices(ids, poses_t[start : start + chunk], self.betas)
                out.append(v.double().numpy())
        pts = np.concatenate(out) if out else np.zeros((0, len(ids), 3))
        return pts + np.asarray(trans)[:, None, :] if trans is not None else pts

    def lowest_candidates(
        self, poses: np.ndarray, trans: np.ndarray | None = None, chunk: int = 512
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per frame, the lowest height (T,) over the contact-candidate vertices and its vertex id.

        The candidates cover the feet completely and the rest of the body sparsely, so for a
        body standing on its feet the result is the exact lowest mesh vertex (elsewhere it is
        within a few millimetres).
        """
        ids = self.candidate_vertices
        z = self._skin(ids, poses, None, chunk)[..., 2]
        k = z.argmin(-1)
        lowest = np.take_along_axis(z, k[:, None], -1)[:, 0]
        if trans is not None:
            lowest = lowest + np.asarray(trans)[:, 2]
        return lowest, ids[k]

    def lowest_vertex_heights(
        self, poses: np.ndarray, trans: np.ndarray | None = None, chunk: int = 256
    ) -> np.ndarray:
        """Per frame, the height (T,) of the lowest vertex of the full posed mesh."""
        out = []
        poses_t = torch.as_tensor(np.asarray(poses), dtype=torch.float32)
        with torch.no_grad():
            for start in range(0, len(poses_t), chunk):
                v = self.body.forward(poses_t[start : start + chunk], self.betas).vertices
                out.append(v[..., 2].min(-1).values.double().numpy())
        z = np.concatenate(out) if out else np.zeros(0)
        return z + np.asarray(trans)[:, 2] if trans is not None else z

    def vertex_side_foot(self, vertex_ids: np.ndarray) -> np.ndarray:
        """0 for a left-foot vertex, 1 for right-foot, -1 otherwise (by dominant skin weight)."""
        dominant = self.body.lbs_weights.detach().numpy()[np.asarray(vertex_ids)].argmax(-1)
        # SMPL-H models have finger joints after 21; foot joints are the same in both.
        side = np.full(dominant.shape, -1)
        side[np.isin(dominant, (LEFT_ANKLE, LEFT_FOOT))] = 0
        side[np.isin(dominant, (RIGHT_ANKLE, RIGHT_FOOT))] = 1
        return side


_VERTEX_SETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _vertex_sets(body) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sole vertices, their side, and lowest-point candidates of a body's mesh (chosen once per
    body on its template: they depend on the topology, not on the shape)."""
    if body not in _VERTEX_SETS:
        verts = body.v_template.detach().double().numpy()
        weights = body.lbs_weights.detach().double().numpy()
        sole = float(verts[:, 1].min())
        ids, side = _sole_vertices(verts, weights, sole)
        candidates = np.union1d(_contact_candidates(verts, weights, sole), ids)
        _VERTEX_SETS[body] = (ids, side, candidates)
    return _VERTEX_SETS[body]


def _sole_vertices(
    rest_verts: np.ndarray, weights: np.ndarray, sole: float
) -> tuple[np.ndarray, np.ndarray]:
    dominant = weights.argmax(-1)
    low = rest_verts[:, 1] < sole + _SOLE_BAND_M
    ids, side = [], []
    for s, joints in enumerate(((LEFT_ANKLE, LEFT_FOOT), (RIGHT_ANKLE, RIGHT_FOOT))):
        found = np.nonzero(low & np.isin(dominant, joints))[0]
        ids.append(found)
        side.append(np.full(len(found), s))
    return np.concatenate(ids), np.concatenate(side)


def _contact_candidates(rest_verts: np.ndarray, weights: np.ndarray, sole: float) -> np.ndarray:
    """Vertices that can be the lowest point: every foot vertex near the sole, each foot
    segment's convex hull, and every 4th hull vertex of the other segments (a smooth surface's
    lowest point then lies within millimetres of a sampled one)."""
    ids = set(np.nonzero(rest_verts[:, 1] < sole + _FOOT_REGION_M)[0].tolist())
    dominant = weights.argmax(-1)
    feet = (LEFT_ANKLE, RIGHT_ANKLE, LEFT_FOOT, RIGHT_FOOT)
    for j in np.unique(dominant):
        members = np.nonzero(dominant == j)[0]
        try:
            hull = members[ConvexHull(rest_verts[members]).vertices]
        except (QhullError, ValueError):  # too few or flat: keep them all
            hull = members
        ids.update((hull if j in feet else np.sort(hull)[::4]).tolist())
    return np.array(sorted(ids), dtype=np.int64)
