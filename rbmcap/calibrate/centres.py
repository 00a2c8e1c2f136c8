"""Joint centres from the plates' motion alone (the symmetrical centre of rotation, SCoRE).

A joint between two segments is a point fixed in both plates' frames: with plate a on the
proximal segment and plate b on the distal one, there are u_a, u_b (metres, plate frames) with

    p_a(t) + R_a(t) u_a = p_b(t) + R_b(t) u_b      for every frame t,

a linear least-squares problem in (u_a, u_b). Its answer needs the joint to turn about two axes
or more over the frames (a static or a pure hinge leaves it undetermined); the smallest singular
value of the stacked system says whether it is determined. Constant plate offsets do not change
where the joint is, so the centres give the skeleton's pose in every frame before any offset is
known.
"""

from __future__ import annotations

import numpy as np
import torch

MIN_TURN_RAD = 0.35
"""The joint must turn this much (in rotation-vector spread) for its centre to count as seen."""


def score_centre(pa, ra, pb, rb, valid) -> tuple[np.ndarray, float] | None:
    """The joint centre in each frame (T, 3) metres and the RMS misfit (m), or None when the
    frames do not determine it (the joint turns about fewer than two axes by
    :data:`MIN_TURN_RAD`).

    Along the axis of a joint that only bends about one axis (a knee in a walk) the system says
    nothing; a small ridge then takes the point on that axis nearest to the midpoint of the two
    plates.

    Args:
        pa, pb: (T, 3) plate positions (m); ra, rb: (T, 3, 3) world-from-plate; valid: (T,) bool
            frames where both plates are seen.
    """
    idx = np.flatnonzero(valid)
    if idx.size < 3:
        return None
    k = len(idx)
    a = np.concatenate([ra[idx], -rb[idx]], axis=2)  # (K, 3, 6)
    y = pb[idx] - pa[idx]  # (K, 3)
    sv = np.linalg.svd((a - a.mean(0)).reshape(-1, 6), compute_uv=False) / np.sqrt(k)
    if sv[-2] < MIN_TURN_RAD:
        return None
    mid = 0.5 * (pa[idx] + pb[idx])
    u0 = np.concatenate([np.einsum("tji,tj->i", ra[idx], mid - pa[idx]),
                         np.einsum("tji,tj->i", rb[idx], mid - pb[idx])]) / k  # fmt: skip
    lam = 1e-3 * k
    lhs = np.einsum("tia,tib->ab", a, a) + lam * np.eye(6)
    rhs = np.einsum("tia,ti->a", a, y) + lam * u0
    u = np.linalg.solve(lhs, rhs)
    ca = pa + np.einsum("tij,j->ti", ra, u[:3])
    cb = pb + np.einsum("tij,j->ti", rb, u[3:])
    misfit = float(np.sqrt(np.mean(np.sum((ca[idx] - cb[idx]) ** 2, -1))))
    return 0.5 * (ca + cb), misfit


def joint_centres(pos, rot, valid, parents: list[int], joints: list[int], smpl_parents):
    """Functional centres of the joints between plates on neighbouring segments.

    Args:
        pos: (T, N, 3); rot: (T, N, 3, 3); valid: (T, N) the plates.
        parents: each plate's parent plate (the marker set's tree, −1 for the root).
        joints: each plate's SMPL joint (the one its segment turns about).
        smpl_parents: SMPL's parent of each joint.

    Returns:
        {SMPL joint: (centre (T, 3) m, seen (T,) bool, misfit m)} for each child plate whose
        segment's joint is the SMPL child of its parent plate's joint and whose centre the
        frames determine.
    """
    out = {}
    for c, p in enumerate(parents):
        if p < 0 or smpl_parents[joints[c]] != joints[p]:
            continue
        both = valid[:, c] & valid[:, p]
        got = score_centre(pos[:, p], rot[:, p], pos[:, c], rot[:, c], both)
        if got is not None:
            out[int(joints[c])] = (torch.as_tensor(got[0]), torch.as_tensor(both), got[1])
    return out
