"""Rotation helpers the motion package uses; they live in :mod:`rbmcap.geometry.rotations`.

Kept as names for callers of the motion package (``unitquat_slerp_pairwise`` and
``rotmat_slerp_pairwise`` are :func:`~rbmcap.geometry.unitquat_slerp` and
:func:`~rbmcap.geometry.rotmat_slerp`).
"""

from __future__ import annotations

from rbmcap.geometry.rotations import axis_rotmat, rotation_between, rotmat_slerp, unitquat_slerp

unitquat_slerp_pairwise = unitquat_slerp
rotmat_slerp_pairwise = rotmat_slerp

__all__ = [
    "axis_rotmat",
    "rotation_between",
    "rotmat_slerp_pairwise",
    "unitquat_slerp_pairwise",
]
