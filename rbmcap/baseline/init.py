"""Starting points for the solver, read off the observations.

``kinematic``: a plate (or a cluster of ≥ 3 point markers) sits on one segment, where one joint's
skinning weight dominates, so it moves rigidly with that joint: the joint's global rotation is
≈ R_obs · R_restᵀ (a plate) or the Kabsch rotation of the markers' rest positions onto their
observed ones (points), and its position follows from the markers' rest offsets. Without pelvis
markers, the pelvis is aligned to the hip and spine joint positions the other markers give. Local
rotations follow down the tree; a joint without markers is swung to point its bone at a child
whose position is known (e.g. a thigh carrying a single point marker, towards the knee), else
keeps its parent's orientation; a frame where a joint's markers are all occluded takes the
joint's local rotation from the nearest frame that has one. ``rest``: the rest pose, rigidly
aligned to all markers. Translation then comes from the mean marker residual.
"""

from __future__ import annotations

import numpy as np
import roma
import torch

from rbmcap.markers.plates import plate_frames
from rbmcap.model.prior import nearest_seen, rotation_between
from rbmcap.skeleton import SMPL_PARENTS

TORSO_CHAIN: tuple[int, ...] = (0, 3, 6, 9, 12, 15)
"""Joints whose estimate can stand in for the global orientation, best first (pelvis, spine
1–3, neck, head)."""


PELVIS_FRAME: tuple[int, ...] = (1, 2, 3, 6, 9)
"""Joints whose positions, where markers give them, fix the pelvis orientation (hips, spine)."""


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


def kabsch_rotation(obs: torch.Tensor, rest: torch.Tensor, weight: torch.Tensor):
    """Rotation (T, 3, 3) best mapping rest points (N, 3) onto observed (T, N, 3) (weights (T, N)),
    and whether it is determined (≥ 3 weighted points)."""
    w = weight[..., None]
    wsum = w.sum(-2).clamp_min(1e-12)
    mo = (obs * w).sum(-2) / wsum
    mr = (rest * w).sum(-2) / wsum
    cov = torch.einsum("tni,tnj->tij", (obs - mo[..., None, :]) * w, rest - mr[..., None, :])
    return _project(cov), (weight > 0).sum(-1) >= 3


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
    g_all, ok_all = kabsch_rotation(pos, rest_pos, w)
    if rot is not None:
        cov = torch.einsum("tn,tnij,nkj->tik", w, rot, rest_rot)
        g_all, ok_all = _project(cov), w.sum(-1) > 0
    g_all = torch.where(ok_all[:, None, None], g_all, eye)
    local = eye.repeat(num, 24, 1, 1)
    if mode == "rest":
        local[:, 0] = g_all
        return local
    rest_joints = body.rest_joints(betas).to(dt)
    est, has, jpos = segment_estimates(dominant, pos, rot, valid, rest_pos, rest_rot, rest_joints)
    root = g_all.clone()
    for j in reversed(TORSO_CHAIN):
        if j in est:
            root = torch.where(has[j][:, None, None], est[j], root)
    if 0 not in est:
        # The hips' and spine's joint positions (e.g. from thigh and chest plates) pin the pelvis.
        near = [j for j in PELVIS_FRAME if j in jpos]
        if len(near) >= 3:
            wn = torch.stack([has[j] for j in near], -1).to(dt)
            fit, ok = kabsch_rotation(
                torch.stack([jpos[j] for j in near], 1), rest_joints[near], wn
            )
            root = torch.where(ok[:, None, None], fit, root)
    children = {j: [c for c in range(24) if SMPL_PARENTS[c] == j] for j in range(24)}
    glob: list[torch.Tensor] = [root] + [eye.expand(num, 3, 3)] * 23
    where: list[torch.Tensor | None] = [None] * 24  # world joint positions, where derivable
    known = [torch.zeros(num, dtype=torch.bool, device=dev) for _ in range(24)]
    local[:, 0] = root
    for j in range(24):
        p = SMPL_PARENTS[j]
        if j > 0:
            parent = glob[p]
            if where[p] is not None:
                where[j] = where[p] + parent @ (rest_joints[j] - rest_joints[p])
                known[j] = known[p].clone()
            if j in est:
                idx, any_ = nearest_valid_index(has[j])
                if any_:
                    local[:, j] = (parent.transpose(-1, -2) @ est[j])[idx]
            else:
                local[:, j] = _swing_towards_child(
                    j, children[j], parent, where[j], known[j], jpos, has, rest_joints
                )
            glob[j] = parent @ local[:, j]
        if j in jpos:
            where[j] = (
                jpos[j] if where[j] is None else torch.where(has[j][:, None], jpos[j], where[j])
            )
            known[j] = known[j] | has[j]
    return local


def _swing_towards_child(j, kids, parent, here, known, jpos, has, rest_joints) -> torch.Tensor:
    """Local rotation of a joint without its own markers: the smallest rotation that points its
    bone at a child joint whose position the child's markers give (identity where none does)."""
    eye = torch.eye(3, dtype=parent.dtype, device=parent.device).expand_as(parent)
    for c in kids:
        if c not in jpos or here is None:
            continue
        ok = known & has[c]
        bone = rest_joints[c] - rest_joints[j]  # in the parent's frame, before the swing
        target = (parent.transpose(-1, -2) @ (jpos[c] - here)[..., None])[..., 0]
        swing = rotation_between(bone.expand_as(target), target)
        idx, any_ = nearest_valid_index(ok)
        if any_:
            return swing[idx]
    return eye


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
            est[j], has[j] = _project(cov), wj.sum(-1) > 0
        elif len(m) >= 3:
            est[j], has[j] = kabsch_rotation(pos[:, m], rest_pos[m], wj)
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


def _project(m: torch.Tensor) -> torch.Tensor:
    """Nearest rotation to each (…, 3, 3) matrix (a zero matrix gives some rotation)."""
    return roma.special_procrustes(m + 1e-12 * torch.eye(3, dtype=m.dtype, device=m.device))
