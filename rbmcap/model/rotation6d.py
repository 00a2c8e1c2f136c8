"""The 6D rotation representation: the first two columns of the rotation matrix.

Layout: ``x[..., 0:3]`` is the first column and ``x[..., 3:6]`` the second (column after column,
as in ``rbmcap.model.features``). Decoding orthonormalises the two columns with
``roma.special_gramschmidt`` and completes the frame with their cross product, so any 6D vector
whose two halves are non-zero and not parallel maps to a rotation; the map is continuous, which is
why networks regress it (Zhou et al., CVPR 2019).
"""

from __future__ import annotations

import roma
import torch


def matrix_to_rotation_6d(R: torch.Tensor) -> torch.Tensor:
    """Encode rotation matrices as their first two columns.

    Args:
        R: (..., 3, 3) rotation matrices.

    Returns:
        (..., 6): first column, then second column.
    """
    return R[..., :, :2].transpose(-1, -2).flatten(-2)


def rotation_6d_to_matrix(x: torch.Tensor) -> torch.Tensor:
    """Decode 6D vectors into rotation matrices by Gram-Schmidt.

    Args:
        x: (..., 6) two 3-vectors, first column then second column; they need not be unit or
            orthogonal, only non-zero and not parallel.

    Returns:
        (..., 3, 3) rotation matrices whose first column is ``x[..., :3]`` normalised and whose
        second column lies in the plane of the two inputs.
    """
    # roma.special_gramschmidt takes the two vectors as the *columns* of a (..., 3, 2) matrix.
    columns = x.unflatten(-1, (2, 3)).transpose(-1, -2)
    return roma.special_gramschmidt(columns)
