"""A starting shape from bone lengths.

Markers give each carrying joint's world position (:func:`rbmcap.baseline.init.segment_estimates`).
The distance between a joint and its parent, or between two joints with the same parent (the two
hips), does not depend on the pose, only on the shape: SMPL's rest joints are linear in the betas,
J(β) = J₀ + S β. Fitting the betas to the median of those distances over the sequence starts the
solver near the right shape; without it, L-BFGS crawls along a long, flat valley where bone
lengths trade against joint angles.
"""

from __future__ import annotations

import torch

from rbmcap.baseline.init import rest_markers, segment_estimates
from rbmcap.skeleton import SMPL_PARENTS


def rigid_pairs(joints) -> list[tuple[int, int]]:
    """Pairs of ``joints`` whose distance is pose-independent: parent–child and siblings."""
    js = sorted(set(joints))
    pairs = [(SMPL_PARENTS[c], c) for c in js if SMPL_PARENTS[c] in js]
    pairs += [
        (a, b)
        for i, a in enumerate(js)
        for b in js[i + 1 :]
        if a > 0 and SMPL_PARENTS[a] == SMPL_PARENTS[b]
    ]
    return pairs


def bone_length_betas(
    body,
    topology,
    dominant,
    pos: torch.Tensor,
    rot: torch.Tensor | None,
    valid: torch.Tensor,
    *,
    ridge: float = 1e-4,
    rounds: int = 3,
) -> torch.Tensor | None:
    """Betas (B,) whose rest skeleton best matches the bone lengths the markers show.

    Args:
        body, topology, dominant: as for :func:`rbmcap.baseline.init.kinematic_rotations`.
        pos, rot, valid: observations (rot None for point markers).
        ridge: weight of ‖β‖² (m² per unit beta²) keeping directions the lengths do not
            determine at the mean shape.
        rounds: fixed-point rounds (the markers' rest offsets depend on the shape too).

    Returns:
        The betas, or None when fewer than two pose-independent distances are observed.
    """
    dt, dev = pos.dtype, pos.device
    shapedirs = body._joint_shapedirs[body._joint_map].to(dt)  # (24, 3, B)
    betas = torch.zeros(body.num_betas, dtype=dt, device=dev)
    for _ in range(rounds):
        with torch.no_grad():
            rest_pos, rest_rot = rest_markers(body, topology, betas)
            rest_joints = body.rest_joints(betas).to(dt)
            _, has, jpos = segment_estimates(
                dominant, pos, rot, valid, rest_pos, rest_rot, rest_joints
            )
        pairs = [(a, b) for a, b in rigid_pairs(jpos) if bool((has[a] & has[b]).any())]
        if len(pairs) < 2:
            return None
        target = torch.stack(
            [(jpos[a] - jpos[b]).norm(dim=-1)[has[a] & has[b]].median() for a, b in pairs]
        )
        # Gauss-Newton on L(β) = ‖J_a(β) − J_b(β)‖, linearised at the current betas.
        for _ in range(5):
            joints0 = body.rest_joints(betas).to(dt)
            d = torch.stack([joints0[a] - joints0[b] for a, b in pairs])
            length = d.norm(dim=-1)
            u = d / length[:, None]
            jac = torch.stack(
                [u[k] @ (shapedirs[a] - shapedirs[b]) for k, (a, b) in enumerate(pairs)]
            )
            lhs = jac.T @ jac + ridge * torch.eye(len(betas), dtype=dt, device=dev)
            rhs = jac.T @ (target - length) - ridge * betas
            betas = betas + torch.linalg.solve(lhs, rhs)
    return betas
