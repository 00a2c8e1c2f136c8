"""Accuracy metrics (docs/metrics.md), as pure batched torch functions.

The functions return SI units (metres, radians, m/s, m/s³) per frame, with any leading batch
dimensions; :func:`evaluate_sequence` converts to the units reports use (mm, degrees, mm/s) and
names every value with its unit (``mpjpe_mm``, ``joint_rotation_deg``, ...).

Every function, with its definition (details and units in its docstring):

- :func:`mpjpe`: mean joint distance, no alignment.
- :func:`root_aligned_mpjpe`: MPJPE after subtracting each skeleton's root (pelvis) joint.
- :func:`pa_mpjpe`: MPJPE after a per-frame rigid Procrustes alignment (rotation and
  translation, no scale).
- :func:`joint_angle_error`: mean geodesic angle of the local rotations of joints 1..23;
  :func:`global_orientation_error`: the same for joint 0, reported separately.
- :func:`legacy_mpjre`: mean absolute difference of axis-angle components (each wrapped into
  [−π, π]), root excluded, as in the sparse-tracker papers.
- :func:`v2v`: mean vertex distance over the whole mesh, no alignment.
- :func:`mpjve`: mean norm of the joint velocity error (first differences × fps).
- :func:`jitter`: mean norm of the third finite difference × fps³.
- :func:`region_errors`: MPJPE over each region of :data:`JOINT_REGIONS`.
- :func:`betas_error`: mean absolute difference of the shape coefficients.
"""

from rbmcap.metrics.positions import (
    mpjpe,
    pa_mpjpe,
    procrustes_align,
    region_errors,
    root_aligned_mpjpe,
    v2v,
)
from rbmcap.metrics.regions import BODY_JOINTS, JOINT_REGIONS
from rbmcap.metrics.rotations import (
    betas_error,
    global_orientation_error,
    joint_angle_error,
    legacy_mpjre,
)
from rbmcap.metrics.sequence import SequenceMetrics, average_metrics, evaluate_sequence
from rbmcap.metrics.temporal import finite_difference, jitter, mpjve

__all__ = [
    "BODY_JOINTS",
    "JOINT_REGIONS",
    "SequenceMetrics",
    "average_metrics",
    "betas_error",
    "evaluate_sequence",
    "finite_difference",
    "global_orientation_error",
    "jitter",
    "joint_angle_error",
    "legacy_mpjre",
    "mpjpe",
    "mpjve",
    "pa_mpjpe",
    "procrustes_align",
    "region_errors",
    "root_aligned_mpjpe",
    "v2v",
]
