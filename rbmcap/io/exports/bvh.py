"""BVH export of an SMPL motion on the SMPL skeleton, for Blender and MotionBuilder.

The file is **Y up, centimetres**, joints named as SMPL's 24 (``pelvis`` … ``right_hand``):

- offsets are the body's rest joints at the motion's betas (J_j − J_parent, SMPL's canonical
  frame, which is already Y up), so at zero channels the file shows SMPL's rest pose;
- the root (``pelvis``) has 6 channels, the position of the pelvis ``C (J0 + trans)`` and the
  rotation ``C R0``, where C turns rbmcap's Z-up world into Y up (x, y, z) → (x, z, −y); every
  other joint has 3 rotation channels, its SMPL local rotation unchanged (rest frames are the
  canonical frame, so no re-basing is needed);
- Euler angles in degrees, intrinsic ZYX (``Zrotation Yrotation Xrotation``, R = Rz Ry Rx);
- leaves (feet, head, hands) get an ``End Site`` continuing their bone by half its length, so
  Blender gives them a real bone instead of a zero-length one.

The joint positions of the file (FK in cm) are the body model's joints (``pose_joints``) turned
by C and scaled by 100; pose correctives and skinning are not part of a BVH.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.atomic import atomic_path
from rbmcap.motion.bvh import write_bvh
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

Z_UP_TO_Y_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
"""C: rbmcap's world (Z up) to the BVH world (Y up); a rotation of −90° about x."""
CM_PER_M = 100.0
EULER_ORDER = "ZYX"


def bvh_offsets(rest_joints: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """Offsets (24, 3) cm from rest joints (24, 3) m (canonical frame), and the leaves' end
    sites (joint → (3,) cm): half the leaf's own offset, continuing its bone."""
    rest = np.asarray(rest_joints, dtype=np.float64) * CM_PER_M
    offsets = rest.copy()
    for j, p in enumerate(SMPL_PARENTS):
        if p >= 0:
            offsets[j] = rest[j] - rest[p]
    leaves = set(range(24)) - set(SMPL_PARENTS)
    return offsets, {j: 0.5 * offsets[j] for j in sorted(leaves)}


def bvh_channels(motion, rest_joints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Local rotations (T, 24, 3, 3) of the BVH (root turned to Y up) and root positions (T, 3)
    in cm, Y up, for ``motion`` on a body with ``rest_joints`` (24, 3) m."""
    rot = roma.rotvec_to_rotmat(torch.from_numpy(motion.poses)).numpy()
    rot[:, 0] = Z_UP_TO_Y_UP @ rot[:, 0]
    root = (motion.trans + np.asarray(rest_joints, dtype=np.float64)[0]) @ Z_UP_TO_Y_UP.T
    return rot, root * CM_PER_M


def write_motion_bvh(path: str | Path, motion, body) -> Path:
    """Write ``motion`` (an :class:`~rbmcap.motion.smpl_motion.SMPLMotion`) as a BVH on ``body``'s
    skeleton at the motion's betas (see the module docstring). Written atomically."""
    body = body.with_joint_offsets(motion.joint_offsets)
    with torch.no_grad():
        rest = body.rest_joints(torch.as_tensor(motion.betas, dtype=torch.float32))
    rest = rest.double().cpu().numpy()
    offsets, ends = bvh_offsets(rest)
    rot, root = bvh_channels(motion, rest)
    with atomic_path(path) as tmp:
        write_bvh(
            tmp,
            list(SMPL_JOINT_NAMES),
            list(SMPL_PARENTS),
            offsets,
            rot,
            root,
            1.0 / motion.fps,
            order=EULER_ORDER,
            end_sites=ends,
        )
    return Path(path)
