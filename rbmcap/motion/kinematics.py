"""Posing SMPL motions on a body shape: joints, foot sole points and lowest points.

Everything the motion package measures on a body (floor contact, foot skate, penetration) goes
through :class:`MotionKinematics`, which wraps a :class:`rbmcap.body.BodyModel` (the stand-in
unless another is given) at one shape. Outputs are float64 numpy arrays in the world frame
(metres, Z up).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import roma
import torch
from scipy.spatial import ConvexHull, QhullError

from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS, forward_kinematics

LEFT_ANKLE, RIGHT_ANKLE = SMPL_JOINT_NAMES.index("left_ankle"), SMPL_JOINT_NAMES.index("right_ankle")
LEFT_FOOT, RIGHT_FOOT = SMPL_JOINT_NAMES.index("left_foot"), SMPL_JOINT_NAMES.index("right_foot")
FOOT_JOINTS = (LEFT_FOOT, RIGHT_FOOT)
SOLE_POINT_JOINTS = (LEFT_ANKLE, LEFT_FOOT, RIGHT_ANKLE, RIGHT_FOOT)
"""Joint carrying each sole point: left heel, left ball, right heel, right ball."""

_FOOT_REGION_M = 0.15  # rest vertices this close above the sole are all contact candidates
_HEEL_BACK_M = 0.03  # the heel point sits this far behind the ankle joint


@lru_cache(maxsize=4)
def standin_body(gender: str = "neutral"):
    """The stand-in body (built and cached on first use)."""
    from rbmcap.body import load_body_model

    return load_body_model("standin", gender=gender)


class MotionKinematics:
    """Pose motions on one body at one shape.

    Args:
        body: a :class:`rbmcap.body.BodyModel`; default the stand-in.
        betas: (B,) shape; default zeros.
    """

    def __init__(self, body=None, betas: np.ndarray | None = None) -> None:
        self.body = body if body is not None else standin_body()
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
        heel = self.rest_joints[[LEFT_ANKLE, RIGHT_ANKLE]].copy()
        heel[:, 2] -= _HEEL_BACK_M
        ball = self.rest_joints[[LEFT_FOOT, RIGHT_FOOT]].copy()
        points = np.stack([heel[0], ball[0], heel[1], ball[1]])
        points[:, 1] = self.sole_height
        self.sole_points_rest = points
        """(4, 3) rest positions of the left heel, left ball, right heel, right ball."""
        self.candidate_vertices = _contact_candidates(
            rest_verts, self.body.lbs_weights.detach().double().numpy(), self.sole_height
        )

    # ------------------------------------------------------------------------------ posing
    def pose(self, poses: np.ndarray, trans: np.ndarray | None = None):
        """Joints (T, 24, 3) and global rotations (T, 24, 3, 3) of axis-angle poses (T, 24, 3)."""
        rot = roma.rotvec_to_rotmat(torch.as_tensor(np.asarray(poses), dtype=torch.float64))
        grot, joints = forward_kinematics(rot, torch.from_numpy(self.rest_joints), SMPL_PARENTS)
        joints = joints.numpy()
        if trans is not None:
            joints = joints + np.asarray(trans)[..., None, :]
        return joints, grot.numpy()

    def sole_points(self, joints: np.ndarray, grot: np.ndarray) -> np.ndarray:
        """(T, 4, 3) world positions of the heel and ball points (left heel, left ball, ...)."""
        idx = list(SOLE_POINT_JOINTS)
        offset = self.sole_points_rest - self.rest_joints[idx]
        return joints[..., idx, :] + np.einsum("...kab,kb->...ka", grot[..., idx, :, :], offset)

    def lowest_candidates(
        self, poses: np.ndarray, trans: np.ndarray | None = None, chunk: int = 512
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per frame, the lowest height (T,) over the contact-candidate vertices and its vertex id.

        The candidates are every vertex of the feet and the convex hull of every body segment,
        so for a standing body the result is the exact lowest mesh vertex.
        """
        ids = self.candidate_vertices
        heights, which = [], []
        poses_t = torch.as_tensor(np.asarray(poses), dtype=torch.float32)
        with torch.no_grad():
            for start in range(0, len(poses_t), chunk):
                v = self.body.skin_vertices(ids, poses_t[start : start + chunk], self.betas)
                z = v[..., 2].double().numpy()
                k = z.argmin(-1)
                heights.append(np.take_along_axis(z, k[:, None], -1)[:, 0])
                which.append(ids[k])
        z = np.concatenate(heights) if heights else np.zeros(0)
        if trans is not None:
            z = z + np.asarray(trans)[:, 2]
        return z, np.concatenate(which) if which else np.zeros(0, dtype=np.int64)

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


def _contact_candidates(rest_verts: np.ndarray, weights: np.ndarray, sole: float) -> np.ndarray:
    ids = set(np.nonzero(rest_verts[:, 1] < sole + _FOOT_REGION_M)[0].tolist())
    dominant = weights.argmax(-1)
    for j in np.unique(dominant):
        members = np.nonzero(dominant == j)[0]
        if len(members) >= 4:
            try:
                ids.update(members[ConvexHull(rest_verts[members]).vertices].tolist())
            except QhullError:  # flat or degenerate patch: keep all its vertices
                ids.update(members.tolist())
        else:
            ids.update(members.tolist())
    return np.array(sorted(ids), dtype=np.int64)
