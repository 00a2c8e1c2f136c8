"""The per-frame error readout: each body's MPJPE against the truth, per timeline step.

MPJPE is :func:`rbmcap.metrics.mpjpe` (mean joint distance over the 24 SMPL joints, no
alignment), as ``rbmcap eval`` reports it, so a sequence's average over its frames is the
evaluation's ``mpjpe_mm``.
"""

from __future__ import annotations

import numpy as np
import torch

from rbmcap.metrics import mpjpe


def frame_errors_mm(joints: dict[str, np.ndarray], truth: str | None) -> dict[str, np.ndarray]:
    """MPJPE (mm) per step of every body but the truth.

    Args:
        joints: body key → (S, 24, 3) joint positions (metres) at each of the S timeline steps.
        truth: the key of the reference body, or None (then there is nothing to compare).

    Returns:
        body key → (S,) millimetres, in ``joints``' order; empty without a truth.
    """
    if truth is None:
        return {}
    ref = torch.as_tensor(joints[truth], dtype=torch.float64)
    return {
        key: mpjpe(torch.as_tensor(j, dtype=torch.float64), ref).numpy() * 1000.0
        for key, j in joints.items()
        if key != truth
    }


def error_table(errors: dict[str, np.ndarray], labels: dict[str, str], step: int) -> str:
    """The readout at ``step`` as a Markdown table (method, MPJPE mm)."""
    if not errors:
        return "*no truth to compare against*"
    rows = [f"| {labels[k]} | {e[step]:.1f} |" for k, e in errors.items()]
    return "\n".join(["| method | MPJPE mm |", "|---|---:|", *rows])
