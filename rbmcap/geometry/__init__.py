"""Shared geometry: pure, batched functions on tensors (in roma's style), one concern per module.

- :mod:`~rbmcap.geometry.rotations`: geodesic angle, rotation between two directions
  (antiparallel-safe), slerp of matrices and quaternions, rotations about an axis.
- :mod:`~rbmcap.geometry.registration`: rigid (Kabsch, no scale) registration of point sets,
  the nearest rotation to a matrix.
- :mod:`~rbmcap.geometry.kinematics`: global ↔ local rotations and forward kinematics on a tree.
- :mod:`~rbmcap.geometry.orthonormal`: rotation matrices read from files checked and
  re-orthonormalised (nearest rotation) within a reported tolerance.
- :mod:`~rbmcap.geometry.gaps`: occluded frames of a rigid-body tree filled from the nearest seen.
- :mod:`~rbmcap.geometry.plates_to_bones`: the one estimator of bone rotations from plates, used
  by the network's kinematic prior and the solver's start.
"""

from rbmcap.geometry.gaps import fill_gaps, nearest_seen, tree_order
from rbmcap.geometry.kinematics import (
    forward_kinematics,
    global_to_local,
    local_to_global,
    posed_joints,
)
from rbmcap.geometry.orthonormal import ROTATION_TOLERANCE, orthonormalize
from rbmcap.geometry.plates_to_bones import PELVIS_POINTS, TORSO_CHAIN, KinematicPrior
from rbmcap.geometry.registration import (
    nearest_rotation,
    points_rotation,
    rigid_align,
    rigid_registration,
)
from rbmcap.geometry.rotations import (
    axis_rotmat,
    rotation_between,
    rotmat_geodesic_angle,
    rotmat_slerp,
    unitquat_slerp,
)

__all__ = [
    "PELVIS_POINTS",
    "ROTATION_TOLERANCE",
    "TORSO_CHAIN",
    "KinematicPrior",
    "axis_rotmat",
    "fill_gaps",
    "forward_kinematics",
    "global_to_local",
    "local_to_global",
    "nearest_rotation",
    "nearest_seen",
    "orthonormalize",
    "points_rotation",
    "posed_joints",
    "rigid_align",
    "rigid_registration",
    "rotation_between",
    "rotmat_geodesic_angle",
    "rotmat_slerp",
    "tree_order",
    "unitquat_slerp",
]
