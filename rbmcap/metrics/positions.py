"""Position metrics: MPJPE and its aligned variants, V2V and per-region errors (metres)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from rbmcap.geometry.registration import rigid_align
from rbmcap.metrics.regions import JOINT_REGIONS


def mpjpe(pred_joints: torch.Tensor, true_joints: torch.Tensor) -> torch.Tensor:
    """Mean per-joint position error: mean Euclidean joint distance, no alignment.

    Args:
        pred_joints, true_joints: (..., J, 3) positions in metres, same frame.

    Returns:
        (...) metres (×1000 for the mm reports use).
    """
    return (pred_joints - true_joints).norm(dim=-1).mean(dim=-1)


def root_aligned_mpjpe(
    pred_joints: torch.Tensor, true_joints: torch.Tensor, root: int = 0
) -> torch.Tensor:
    """MPJPE after translating each skeleton so its root joint is at the origin.

    Removes the translation error (the root joint's own error becomes 0), not the orientation.

    Args:
        pred_joints, true_joints: (..., J, 3) metres; root: index of the root joint (pelvis).

    Returns:
        (...) metres.
    """
    pred = pred_joints - pred_joints[..., root : root + 1, :]
    true = true_joints - true_joints[..., root : root + 1, :]
    return mpjpe(pred, true)


def procrustes_align(
    pred: torch.Tensor, true: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rigid motion (rotation and translation, no scale) that best maps ``pred`` onto ``true``.

    Solves min over R ∈ SO(3), t of Σ_j ‖R p_j + t − q_j‖² in closed form (Kabsch: SVD of the
    cross-covariance, with the reflection case excluded; :func:`rbmcap.geometry.rigid_align`).

    Args:
        pred, true: (..., J, 3) point sets in correspondence (J ≥ 3, not all collinear for a
            unique answer).

    Returns:
        aligned (..., J, 3) = R pred + t, R (..., 3, 3) and t (..., 3).
    """
    return rigid_align(pred, true)


def pa_mpjpe(pred_joints: torch.Tensor, true_joints: torch.Tensor) -> torch.Tensor:
    """Procrustes-aligned MPJPE: MPJPE after the per-frame rigid alignment of
    :func:`procrustes_align` (rotation and translation, no scale).

    Args:
        pred_joints, true_joints: (..., J, 3) metres; each leading index is aligned on its own.

    Returns:
        (...) metres.
    """
    aligned, _, _ = procrustes_align(pred_joints, true_joints)
    return mpjpe(aligned, true_joints)


def v2v(pred_vertices: torch.Tensor, true_vertices: torch.Tensor) -> torch.Tensor:
    """Vertex-to-vertex error: mean Euclidean distance over all mesh vertices, no alignment.

    Args:
        pred_vertices, true_vertices: (..., V, 3) posed meshes of the same topology, metres.

    Returns:
        (...) metres.
    """
    return (pred_vertices - true_vertices).norm(dim=-1).mean(dim=-1)


def region_errors(
    pred_joints: torch.Tensor,
    true_joints: torch.Tensor,
    regions: Mapping[str, Sequence[int]] = JOINT_REGIONS,
) -> dict[str, torch.Tensor]:
    """MPJPE (no alignment) over the joints of each region.

    Args:
        pred_joints, true_joints: (..., 24, 3) metres.
        regions: region name → joint indices (default :data:`JOINT_REGIONS`).

    Returns:
        region name → (...) metres.
    """
    out = {}
    for name, joints in regions.items():
        idx = torch.as_tensor(list(joints), device=pred_joints.device)
        out[name] = mpjpe(pred_joints[..., idx, :], true_joints[..., idx, :])
    return out
