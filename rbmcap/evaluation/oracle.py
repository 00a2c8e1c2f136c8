"""Oracle starts for the hybrid: how good must the network be for the hybrid claim to hold?

The hybrid's claim (docs/metrics.md#the-claims-a-report-checks) rests on the quality of its
start. To measure that dependency on one dataset without training networks of every quality,
the evaluation can also start the hybrid from the truth moved a fraction f of the way towards
the network's answer:

    R_j = R*_j · exp(f · log(R*_jᵀ R̂_j))   every joint rotation (geodesic interpolation)
    t = t* + f (t̂ − t*),  β = β* + f (β̂ − β*)

f = 1 is the network's own answer, f = 0 the truth. The start keeps the structure of this
network's errors (which joints, how they drift over time) at f times their size: "a network
with f times our error". It uses the truth, so it is a study, never a method.
"""

from __future__ import annotations

import numpy as np
import roma
import torch

from rbmcap.body.params import SMPLParams


def scaled_error_start(network: SMPLParams, truth: SMPLParams, fraction: float) -> SMPLParams:
    """The truth moved ``fraction`` of the way towards the network's answer.

    Args:
        network: the network's answer: ``poses`` (T, 24, 3) axis-angle, ``betas`` (B,),
            ``trans`` (T, 3) m.
        truth: the same (betas may have another length; the shorter is zero-padded).
        fraction: f ≥ 0 (0: the truth, 1: the network).

    Returns:
        ``poses`` (T, 24, 3), ``betas`` (max B,), ``trans`` (T, 3), float32 (computed in
        float64).
    """
    net, true = network.numpy(), truth.numpy()
    rt, rn = (
        roma.rotvec_to_rotmat(torch.from_numpy(np.array(x["poses"], dtype=np.float64)))
        for x in (true, net)
    )
    delta = roma.rotmat_to_rotvec(rt.transpose(-1, -2) @ rn)
    poses = roma.rotmat_to_rotvec(rt @ roma.rotvec_to_rotmat(fraction * delta))
    bt, bn = (np.asarray(x["betas"], dtype=np.float64).ravel() for x in (true, net))
    size = max(bt.size, bn.size)
    bt, bn = (np.pad(b, (0, size - b.size)) for b in (bt, bn))
    tt, tn = (np.asarray(x["trans"], dtype=np.float64) for x in (true, net))
    return SMPLParams.from_mapping(
        {
            "poses": poses.numpy().astype(np.float32),
            "betas": (bt + fraction * (bn - bt)).astype(np.float32),
            "trans": (tt + fraction * (tn - tt)).astype(np.float32),
        }
    )
