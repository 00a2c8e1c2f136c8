"""Accuracy metrics of design §7, as pure batched torch functions.

The functions return SI units (metres, radians, m/s, m/s³) per frame, with any leading batch
dimensions; :func:`evaluate_sequence` converts to the units reports use (mm, degrees, mm/s) and
names every value with its unit (``mpjpe_mm``, ``joint_rotation_deg``, ...).

=====================  ==============================================================  =========
metric                 definition                                                      function
=====================  ==============================================================  =========
MPJPE                  mean joint distance, no alignment                               :func:`mpjpe`
root-aligned MPJPE     MPJPE after subtracting each skeleton's root (pelvis) joint     :func:`root_aligned_mpjpe`
PA-MPJPE               MPJPE after per-frame rigid Procrustes (rotation+translation)   :func:`pa_mpjpe`
joint rotation error   mean geodesic angle of the local rotations of joints 1..23      :func:`joint_angle_error`
global orientation     geodesic angle of joint 0's rotation                            :func:`global_orientation_error`
legacy MPJRE           mean |Δ| of axis-angle components (wrapped), root excluded      :func:`legacy_mpjre`
V2V                    mean vertex distance over the whole mesh, no alignment          :func:`v2v`
MPJVE                  mean norm of the joint velocity error                           :func:`mpjve`
jitter                 mean norm of the third finite difference × fps³                 :func:`jitter`
region errors          MPJPE over the joints of each region of :data:`JOINT_REGIONS`   :func:`region_errors`
betas error            mean absolute difference of the shape coefficients              :func:`betas_error`
=====================  ==============================================================  =========
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
    rotation_angle,
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
    "rotation_angle",
    "v2v",
]
