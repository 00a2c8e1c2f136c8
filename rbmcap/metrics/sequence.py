"""Every metric of docs/metrics.md for one sequence, per frame and averaged, in report units."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import roma
import torch

from rbmcap.errors import DataError
from rbmcap.metrics.positions import mpjpe, pa_mpjpe, region_errors, root_aligned_mpjpe, v2v
from rbmcap.metrics.rotations import (
    betas_error,
    global_orientation_error,
    joint_angle_error,
    legacy_mpjre,
)
from rbmcap.metrics.temporal import jitter, mpjve

MM = 1e3
DEG = 180.0 / math.pi

METRIC_UNITS: dict[str, str] = {
    "mpjpe_mm": "mm",
    "root_aligned_mpjpe_mm": "mm",
    "pa_mpjpe_mm": "mm",
    "mpjpe20_mm": "mm",
    "pa_mpjpe20_mm": "mm",
    "mpjae20_deg": "deg",
    "joint_rotation_deg": "deg",
    "global_orientation_deg": "deg",
    "legacy_mpjre_deg": "deg",
    "v2v_mm": "mm",
    "mpjve_mm_s": "mm/s",
    "jitter_pred_m_s3": "m/s³",
    "jitter_true_m_s3": "m/s³",
    "root_mm": "mm",
    "upper_body_mm": "mm",
    "lower_body_mm": "mm",
    "hands_mm": "mm",
    "betas_error": "",
}
"""Every key :func:`evaluate_sequence` reports, with its unit."""

PAPER_JOINTS = tuple(j for j in range(22) if j not in (10, 11))
"""The RBM paper's evaluation joints: SMPL joints 0..21 from the pelvis to the wrists, less the
feet (10, 11); no hands (22, 23). 20 joints: the ``*20`` metrics."""


@dataclass
class SequenceMetrics:
    """Metrics of one sequence.

    Attributes:
        per_frame: metric key → (T,) float64 values (keys and units in :data:`METRIC_UNITS`).
            Velocity errors are placed at the later of their two frames and jitter at the last
            frame of its four, so the first 1 (MPJVE) or 3 (jitter) entries are NaN.
        mean: metric key → mean over the frames that have a value (NaN if none).
        frames: T.
    """

    per_frame: dict[str, np.ndarray]
    mean: dict[str, float] = field(default_factory=dict)
    frames: int = 0

    def __post_init__(self) -> None:
        if not self.mean:
            self.mean = {k: _nanmean(v) for k, v in self.per_frame.items()}
        if not self.frames and self.per_frame:
            self.frames = len(next(iter(self.per_frame.values())))


def evaluate_sequence(
    body,
    pred: Mapping,
    true: Mapping,
    fps: float = 60.0,
    *,
    vertices: bool = True,
    chunk_frames: int = 256,
) -> SequenceMetrics:
    """All metrics of a predicted sequence against the truth, per frame and averaged.
    Long because every metric is one line of one table.

    Args:
        body: the :class:`rbmcap.body.BodyModel` both sequences are posed with.
        pred, true: mappings with ``poses`` ((T, 24, 3) axis-angle or (T, 24, 3, 3) local
            rotations; ``rotmats`` is accepted for the latter), ``betas`` ((B,) per sequence or
            (T, B) per frame; default zeros) and ``trans`` ((T, 3) metres; default zeros).
            Numpy arrays or tensors.
        fps: frame rate (for MPJVE and jitter).
        vertices: compute V2V (a full mesh forward per frame; the costliest metric).
        chunk_frames: frames per full forward, to bound memory.

    Returns:
        :class:`SequenceMetrics` with the keys of :data:`METRIC_UNITS`: positions in mm
        (no alignment unless the name says so), angles in degrees, MPJVE in mm/s, jitter in m/s³
        for the prediction and the ground truth, betas error unitless.
    """
    p_rot, p_aa, p_betas, p_trans = _params(body, pred, "pred")
    t_rot, t_aa, t_betas, t_trans = _params(body, true, "true")
    num = p_rot.shape[0]
    if t_rot.shape[0] != num:
        raise DataError(f"pred has {num} frames, true has {t_rot.shape[0]}")
    with torch.no_grad():
        pj, pg = body.pose_joints(p_rot, p_betas, p_trans)
        tj, tg = body.pose_joints(t_rot, t_betas, t_trans)
        paper = list(PAPER_JOINTS)
        out: dict[str, torch.Tensor] = {
            "mpjpe_mm": MM * mpjpe(pj, tj),
            "root_aligned_mpjpe_mm": MM * root_aligned_mpjpe(pj, tj),
            "pa_mpjpe_mm": MM * pa_mpjpe(pj, tj),
            "mpjpe20_mm": MM * mpjpe(pj[:, paper], tj[:, paper]),
            "pa_mpjpe20_mm": MM * pa_mpjpe(pj[:, paper], tj[:, paper]),
            "mpjae20_deg": DEG * roma.rotmat_geodesic_distance(pg[:, paper], tg[:, paper]).mean(-1),
            "joint_rotation_deg": DEG * joint_angle_error(p_rot, t_rot),
            "global_orientation_deg": DEG * global_orientation_error(p_rot, t_rot),
            "legacy_mpjre_deg": DEG * legacy_mpjre(p_aa, t_aa),
        }
        if vertices:
            parts = []
            for a in range(0, num, chunk_frames):
                s = slice(a, a + chunk_frames)
                pv = body(p_rot[s], p_betas[s], p_trans[s]).vertices
                tv = body(t_rot[s], t_betas[s], t_trans[s]).vertices
                parts.append(v2v(pv, tv))
            out["v2v_mm"] = MM * torch.cat(parts)
        out["mpjve_mm_s"] = _pad_front(MM * mpjve(pj, tj, fps), num)
        out["jitter_pred_m_s3"] = _pad_front(jitter(pj, fps), num)
        out["jitter_true_m_s3"] = _pad_front(jitter(tj, fps), num)
        for name, err in region_errors(pj, tj).items():
            out[f"{name}_mm"] = MM * err
        out["betas_error"] = betas_error(p_betas, t_betas)
    per_frame = {k: v.detach().double().cpu().numpy() for k, v in out.items()}
    return SequenceMetrics(per_frame=per_frame, frames=num)


def average_metrics(items: Iterable[SequenceMetrics]) -> dict[str, float]:
    """Per-frame average over several sequences (every frame counts once, NaNs skipped)."""
    items = list(items)
    keys = sorted({k for m in items for k in m.per_frame})
    return {
        k: _nanmean(np.concatenate([m.per_frame[k] for m in items if k in m.per_frame]))
        for k in keys
    }


def _params(body, seq: Mapping, label: str):
    ref = body.v_template
    poses = seq.get("rotmats") if seq.get("poses") is None else seq.get("poses")
    if poses is None:
        raise DataError(f"{label}: needs 'poses' (axis-angle or rotation matrices)")
    poses = poses if torch.is_tensor(poses) else torch.from_numpy(np.array(poses))
    poses = poses.to(device=ref.device, dtype=ref.dtype)
    if poses.ndim == 4 and poses.shape[1:] == (24, 3, 3):
        rot, aa = poses, roma.rotmat_to_rotvec(poses)
    elif poses.ndim == 3 and poses.shape[1:] == (24, 3):
        rot, aa = roma.rotvec_to_rotmat(poses), poses
    else:
        raise DataError(
            f"{label}: poses of shape {tuple(poses.shape)}, expected (T, 24, 3) or (T, 24, 3, 3)"
        )
    num = poses.shape[0]
    betas = _tensor(seq.get("betas"), ref, (body.num_betas,))
    betas = betas[..., : body.num_betas]
    betas = betas.expand(num, betas.shape[-1]) if betas.ndim == 1 else betas
    trans = _tensor(seq.get("trans"), ref, (num, 3))
    if betas.shape[0] != num or trans.shape != (num, 3):
        raise DataError(
            f"{label}: betas {tuple(betas.shape)} / trans {tuple(trans.shape)} do "
            f"not match {num} frames"
        )
    return rot, aa, betas, trans


def _tensor(x, ref: torch.Tensor, default_shape: tuple[int, ...]) -> torch.Tensor:
    if x is None:
        return torch.zeros(default_shape, dtype=ref.dtype, device=ref.device)
    t = x if torch.is_tensor(x) else torch.from_numpy(np.array(x))
    return t.to(device=ref.device, dtype=ref.dtype)


def _pad_front(x: torch.Tensor, num: int) -> torch.Tensor:
    pad = torch.full((num - x.shape[0],), float("nan"), dtype=x.dtype, device=x.device)
    return torch.cat([pad, x]) if num >= x.shape[0] else x[:num]


def _nanmean(x: np.ndarray) -> float:
    x = np.asarray(x, dtype=np.float64)
    finite = x[~np.isnan(x)]
    return float(finite.mean()) if finite.size else float("nan")
