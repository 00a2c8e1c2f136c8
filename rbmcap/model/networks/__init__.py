"""Sequence-to-sequence networks: (B, T, in_dim) features → (B, T, out_dim) outputs."""

from rbmcap.model.networks.base import SequenceNetwork
from rbmcap.model.networks.gru import BiGRU, CausalGRU
from rbmcap.model.networks.mlp import ResidualMLP
from rbmcap.model.networks.registry import NETWORKS, build_network
from rbmcap.model.networks.transformer import RelPosTransformer, relative_position_bucket

__all__ = [
    "NETWORKS",
    "BiGRU",
    "CausalGRU",
    "RelPosTransformer",
    "ResidualMLP",
    "SequenceNetwork",
    "build_network",
    "relative_position_bucket",
]
