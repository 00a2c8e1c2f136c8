"""The network that poses frames (``PoseRegressor``, built from a ``RegressorConfig``), its
sequence networks, rotation and body losses, and the 6D rotation representation."""

from rbmcap.model.losses import (
    ROTATION_LOSSES,
    axis_angle_mse,
    betas_l1,
    chordal_loss,
    geodesic_loss,
    rotation_loss,
    rotmat_mse,
    sixd_mse,
    trans_l2,
)
from rbmcap.model.networks import (
    NETWORKS,
    BiGRU,
    CausalGRU,
    RelPosTransformer,
    ResidualMLP,
    SequenceNetwork,
    build_network,
)
from rbmcap.model.regressor import PoseRegressor, RegressorConfig
from rbmcap.model.rotation6d import matrix_to_rotation_6d, rotation_6d_to_matrix

__all__ = [
    "NETWORKS",
    "ROTATION_LOSSES",
    "BiGRU",
    "CausalGRU",
    "PoseRegressor",
    "RegressorConfig",
    "RelPosTransformer",
    "ResidualMLP",
    "SequenceNetwork",
    "axis_angle_mse",
    "betas_l1",
    "build_network",
    "chordal_loss",
    "geodesic_loss",
    "matrix_to_rotation_6d",
    "rotation_6d_to_matrix",
    "rotation_loss",
    "rotmat_mse",
    "sixd_mse",
    "trans_l2",
]
