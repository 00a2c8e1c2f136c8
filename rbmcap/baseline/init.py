"""Starting points for the solver, read off the observations.

``kinematic``: a plate (or a cluster of ≥ 3 point markers) sits on one segment, where one joint's
skinning weight dominates, so it moves rigidly with that joint: the joint's global rotation is
≈ R_obs · R_restᵀ (a plate; several on one segment are averaged) or the Kabsch rotation of the
markers' rest positions onto their observed ones (points), and its position follows from the
markers' rest offsets (:func:`segment_estimates`). Each such segment is then one rigid body for
the plates → bones estimator the network's prior also uses
(:class:`rbmcap.geometry.plates_to_bones.KinematicPrior`): it fixes the pelvis from the hip and
spine joints, interpolates the spine, swings unmarked joints towards a marked child and fills
occluded frames from the nearest seen one. ``rest``: the rest pose, rigidly aligned to all
markers. Translation then comes from the mean marker residual.
"""

from __future__ import annotations

import numpy as np
import torch

from rbmcap.geometry.gaps import nearest_seen
from rbmcap.geometry.kinematics import global_to_local
from rbmcap.geometry.plates_to_bones import KinematicPrior
from rbmcap.geometry.registration import nearest_rotation, points_rotation
from rbmcap.markers.plates import plate_frames
from rbmcap.skeleton import SMPL_PARENTS


def dominant_joints(body, vertex_ids) -> np.ndarray:
    """SMPL joint (N,) that carries each marker vertex: the largest skinning weight, mapped to
    the SMPL 24-joint view (an SMPL-H finger joint maps to its SMPL ancestor)."""
    w = body.lbs_weights[torch.as_tensor(np.asarray(vertex_ids, dtype=np.int64))]
    model_joint = w.argmax(dim=-1).tolist()
    to_smpl = {m: s for s, m in enumerate(body._joint_map)}
    out = []
    for j in model_joint:
        while j not in to_smpl:
            j = body.model_parents[j]
        out.append(to_smpl[j])
    return np.asarray(out, dtype=np.int64)


def rest_markers(body, topology, betas: torch.Tensor | None = None):
    """Plate frames at the rest pose (zero rotations and translation): pos (N, 3), rot (N, 3, 3).

    ``betas`` (B,) or (T, B) shapes the body (default zeros); the result gets the same batch.
    """
    ref = body.v_template
    batch = () if betas is None or betas.ndim == 1 else betas.shape[:-1]
    eye = torch.eye(3, dtype=ref.dtype, device=ref.device).expand(*batch, 24, 3, 3)
    skinned = body.skin_vertices(topology.skin_ids, eye, betas)
    return plate_frames(skinned, topology)


def nearest_valid_index(has: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """For each frame, the nearest frame where ``has`` (T,) is true; and whether any is."""
    idx, seen = nearest_seen(has)
    return idx, bool(seen.any())


def kinematic_rotations(
    body,
    topology,
    dominant: np.ndarray,
    pos: torch.Tensor,
    rot: torch.Tensor | None,
    valid: torch.Tensor,
    betas: torch.Tensor | None = None,
    mode: str = "kinematic",
) -> torch.Tensor:
    """Initial local rotations (T, 24, 3, 3) from observations.

    Args:
        body, topology: the body and the markers' plate topology.
        dominant: (N,) the joint carrying each marker (:func:`dominant_joints`).
        pos: (T, N, 3) observed positions; rot: (T, N, 3, 3) observed plate rotations, or None
            for point markers; valid: (T, N) bool.
        betas: (B,) shape used for the rest markers (default zeros).
        mode: 'kinematic' or 'rest' (rest body pose, rigid global alignment only).
    """
    dt, dev = pos.dtype, pos.device
    num = pos.shape[0]
    rest_pos, rest_rot = rest_markers(body, topology, betas)
    w = valid.to(dt)
    eye = torch.eye(3, dtype=dt, device=dev)
    # Rigid fit of the whole rest body: the fallback global orientation.
    if rot is None:
        g_all, ok_all = points_rotation(rest_pos, pos, w)
    else:
        g_all = nearest_rotation(torch.einsum("tn,tnij,nkj->tik", w, rot, rest_rot))
        ok_all = w.sum(-1) > 0
    g_all = torch.where(ok_all[:, None, None], g_all, eye)
    rest_pose = torch.cat([g_all[:, None], eye.expand(num, 23, 3, 3)], dim=1)
    if mode == "rest":
        return rest_pose
    rest_joints = body.rest_joints(betas).to(dt)
    est, has, jpos = segment_estimates(dominant, pos, rot, valid, rest_pos, rest_rot, rest_joints)
    joints = sorted(est)
    if not joints:
        return rest_pose
    # Each estimated segment is a rigid body sitting at its joint (no rest offset).
    estimator = KinematicPrior(
        joints,
        root_marker=0,
        plate_rest_pos=rest_joints[joints],
        rest_joints=rest_joints,
        parents=_nearest_estimated_ancestors(joints),
        dtype=dt,
    ).to(dev)
    glob, _ = estimator(
        torch.stack([est[j] for j in joints], 1),
        torch.stack([jpos[j] for j in joints], 1),
        torch.stack([has[j] for j in joints], 1),
        fallback=g_all,
    )
    return global_to_local(glob)


def _nearest_estimated_ancestors(joints: list[int]) -> list[int]:
    """Index in ``joints`` of each joint's nearest ancestor among them (-1 for none)."""
    out = []
    for j in joints:
        a = SMPL_PARENTS[j]
        while a >= 0 and a not in joints:
            a = SMPL_PARENTS[a]
        out.append(joints.index(a) if a >= 0 else -1)
    return out


def segment_estimates(dominant, pos, rot, valid, rest_pos, rest_rot, rest_joints):
    """Per joint carrying markers: its global rotation (T, 3, 3), where it is known (T,) and its
    world position (T, 3), from the markers it carries.

    A plate gives the rotation R_obs R_restᵀ; ≥ 3 points give the Kabsch rotation. The position
    is carried rigidly with the markers: p_obs − G (p_rest − J_rest).

    Returns:
        dicts est, has, jpos keyed by SMPL joint.
    """
    w = valid.to(pos.dtype)
    est, has, jpos = {}, {}, {}
    for j in np.unique(dominant).tolist():
        m = torch.as_tensor(np.flatnonzero(dominant == j), device=pos.device)
        wj = w[:, m]
        if rot is not None:
            cov = torch.einsum("tn,tnij,nkj->tik", wj, rot[:, m], rest_rot[m])
            est[j], has[j] = nearest_rotation(cov), wj.sum(-1) > 0
        elif len(m) >= 3:
            est[j], has[j] = points_rotation(rest_pos[m], pos[:, m], wj)
        else:
            continue
        offset = rest_pos[m] - rest_joints[j]
        guess = pos[:, m] - torch.einsum("tij,nj->tni", est[j], offset)
        jpos[j] = (guess * wj[..., None]).sum(1) / wj.sum(1).clamp_min(1e-12)[:, None]
    return est, has, jpos


def fit_translation(
    body,
    topology,
    rotmats: torch.Tensor,
    betas: torch.Tensor | None,
    pos: torch.Tensor,
    valid: torch.Tensor,
) -> torch.Tensor:
    """Translation (T, 3) that best aligns the posed markers with the observations (the mean
    residual over valid markers; frames without any take the nearest frame's)."""
    with torch.no_grad():
        pred, _ = plate_frames(body.skin_vertices(topology.skin_ids, rotmats, betas), topology)
    w = valid.to(pos.dtype)[..., None]
    count = w.sum(-2)
    trans = ((pos - pred) * w).sum(-2) / count.clamp_min(1.0)
    idx, any_ = nearest_valid_index(count[:, 0] > 0)
    return trans[idx] if any_ else torch.zeros_like(trans)
