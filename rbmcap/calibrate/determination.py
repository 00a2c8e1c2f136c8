"""What the frames of a calibration fit determine, for the poses.

The fit's Gauss–Newton information (finite differences of the residuals, each frame's pose
eliminated by its Schur complement, the pose prior's curvature included) gives the offsets'
posterior covariance C. An offset is a means to the poses: an error δo in it is taken up by the
poses fitted to the plates, δθ_f = −A_f⁻¹ H_f δo (A_f the frame's information, H_f its cross term
with the offsets), which moves the joints by J_f δθ_f. Pushed through, C gives each joint's
spread: :func:`determination` gives per plate the largest, over the joints, root-mean-square over
the frames fitted (its offset's share), and the same for all offsets together.

It also names the offset directions whose spread the data alone (no pose prior) shrink by less
than half: each plate's twist about its segment (SMPL's joints turn freely, so a constant twist
of a bone and the opposite twist of its plate fit the plates equally) and the shifts that the
unplated joints take up, each with the spread the pose prior leaves and how far that moves the
joints (a twist moves none); and, in one still pose, the shift of all plates together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import roma
import torch

from rbmcap.skeleton import SMPL_PARENTS

PRIOR_SHARE = 0.25
"""An offset direction counts as decided by a prior when its posterior variance is more than
this fraction of the offsets' prior's (the data did not halve the spread)."""


@dataclass
class Determination:
    """What the frames fitted determine (module docstring).

    Attributes:
        plates: plate -> (joints_mm, joint index): how far the remaining uncertainty of its
            offset moves the fitted body's joints (the joint moved most).
        joints_mm, joint: the same for every offset together.
        left_open: sentences naming the offset directions the data alone left to a prior.
    """

    plates: dict[str, tuple[float, int]]
    joints_mm: float
    joint: int
    left_open: list[str]


def determination(fit, state, step: float = 1e-6) -> Determination:
    """What the data determine, from the fit's own information (module docstring): the offsets'
    posterior with the data alone and with the pose prior, each frame's pose eliminated, and how
    far the posterior's spread moves the joints once the poses are fitted again."""
    a, b, prior_frame, prior_s = _jacobians(fit, state, step)
    prior_var = 1.0 / prior_s
    cov_data = torch.linalg.inv(_schur(a, b, torch.full_like(prior_frame, 1e-6)) + prior_s.diag())
    cov_pose = torch.linalg.inv(_schur(a, b, prior_frame) + prior_s.diag())
    gain = _joint_gain(fit, state, a, b, prior_frame, step)
    n = len(fit.names)
    plates = {}
    for i, name in enumerate(fit.names):
        idx = [3 * i + c for c in range(3)] + [3 * n + 3 * i + c for c in range(3)]
        plates[name] = joint_spread_mm(gain, cov_pose, idx)
    total, joint = joint_spread_mm(gain, cov_pose, list(range(6 * n)))
    with torch.no_grad():
        jp, _ = fit.body.pose_joints(state.rotmats[:1], state.betas, state.trans[:1])
        _, vr = fit.virtual(state.rotmats[:1], state.betas, state.trans[:1])
    groups: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for kind, base, unit, scale in (
        ("position", 3 * n, "mm", 1000.0),
        ("rotation", 0, "°", math.degrees(1.0)),
    ):
        for i, name in enumerate(fit.names):
            sl = slice(base + 3 * i, base + 3 * i + 3)
            evals, evecs = torch.linalg.eigh(cov_data[sl, sl])
            if evals[-1] / prior_var[sl].max() <= PRIOR_SHARE:
                continue
            u = torch.zeros(6 * n, dtype=torch.float64)
            u[sl] = evecs[:, -1]
            var = float(u @ cov_pose @ u)
            pinned = var / float(prior_var[sl].max()) <= PRIOR_SHARE
            where = _segment_words(int(fit.dominant[i]), vr[0, i] @ u[sl], jp[0], kind)
            who = "the pose prior" if pinned else "the offsets' prior"
            moved, _ = joint_spread_mm(gain, torch.outer(u, u) * var, list(range(6 * n)))
            groups.setdefault((f"{kind} offset {where}", who), []).append(
                (f"{name} ±{scale * math.sqrt(var):.0f} {unit}", moved)
            )
    left_open = [
        f"{what}: the data leave it to {who}, which fixes it to "
        f"{', '.join(p for p, _ in items)}; that moves the joints by "
        f"±{max(m for _, m in items):.0f} mm at most"
        for (what, who), items in groups.items()
    ]
    # a shift of every plate together, in the world frame of the first frame used
    for d, label in zip(torch.eye(3, dtype=torch.float64), "xyz"):
        u = torch.zeros(6 * n, dtype=torch.float64)
        for i in range(n):
            u[3 * n + 3 * i : 3 * n + 3 * i + 3] = vr[0, i].T @ d
        u = u / u.norm()
        post = float(u @ cov_pose @ u)
        if post / float(u @ (prior_var * u)) > PRIOR_SHARE:
            left_open.append(
                f"all plates shifted together along world {label} (±{1000 * math.sqrt(post):.0f}"
                f" mm): one still pose cannot tell it from where the body stands; the offsets' "
                f"prior decided"
            )
    return Determination(plates, total, joint, left_open)


def _segment_words(joint: int, axis: torch.Tensor, joints: torch.Tensor, kind: str) -> str:
    """Where a direction (3,) in the world points relative to the plate's segment: for a
    position 'along' or 'across the segment', for a rotation axis 'about' or 'across'."""
    children = [k for k, p in enumerate(SMPL_PARENTS) if p == joint]
    if children:
        bone = joints[children[0]] - joints[joint]
    else:  # a leaf segment continues its parent's bone
        bone = joints[joint] - joints[SMPL_PARENTS[joint]]
    cos = abs(float(bone @ axis / (bone.norm() * axis.norm()).clamp_min(1e-12)))
    along = cos > 0.8
    if kind == "rotation":
        return "about the segment's axis" if along else "about an axis across the segment"
    return "along the segment" if along else "across the segment"


def _jacobians(fit, state, step: float):
    """Finite-difference Jacobians of the scaled residuals (:meth:`SessionFit.residual_vector`)
    at ``state``: per frame ``a`` (F, R, 75) against the frame's own parameters (root 0–2, body
    3–71, translation 72–74, the same one moved in every frame) and ``b`` (F, R, 6N) against the
    offsets [rotation (3N) | position (3N)]; with the pose prior's curvature per frame parameter
    (75,) and the offsets' prior's (6N,), in the objective's units (½ Hessian)."""
    n = len(fit.names)
    base = fit.residual_vector(state)  # (F, R)
    frame_cols = [
        (fit.residual_vector(_perturb_frame(state, k, step)) - base) / step for k in range(75)
    ]
    shared_cols = [
        (fit.residual_vector(_perturb_offset(state, k, step)) - base) / step for k in range(6 * n)
    ]
    wt = fit.weights
    prior_frame = torch.zeros(75, dtype=torch.float64)
    if fit.prior is not None and wt.prior > 0:
        prior_frame[3:72] = 0.5 * wt.prior * fit.prior.precision_diagonal().double()
    prior_frame[3:72] += wt.pose_l2
    prior_frame[:3] += 1e-6
    prior_frame[72:] += 1e-6
    prior_s = torch.cat(
        [
            torch.full((3 * n,), 1.0 / math.radians(wt.offset_sigma_deg) ** 2, dtype=torch.float64),
            torch.full((3 * n,), 1.0 / wt.offset_sigma_m**2, dtype=torch.float64),
        ]
    )
    return torch.stack(frame_cols, -1), torch.stack(shared_cols, -1), prior_frame, prior_s


def _schur(a: torch.Tensor, b: torch.Tensor, diag: torch.Tensor) -> torch.Tensor:
    """Information (6N, 6N) of the offsets with each frame's pose eliminated (Schur complement),
    the frame parameters' curvature ``diag`` (75,) added to the data's."""
    ata = a.transpose(-1, -2) @ a
    hab = a.transpose(-1, -2) @ b
    s = (b.transpose(-1, -2) @ b).sum(0)
    s = s - (hab.transpose(-1, -2) @ torch.linalg.solve(ata + torch.diag(diag), hab)).sum(0)
    return 0.5 * (s + s.T)


def _joint_gain(fit, state, a, b, prior_frame, step: float) -> torch.Tensor:
    """(F, 72, 6N): how each frame's 24 joints (m) move per unit of each offset parameter, the
    pose re-fitted to the plates (δθ_f = −A_f⁻¹ H_f δo, with A_f the frame's information and
    the pose prior, H_f its cross term with the offsets)."""
    with torch.no_grad():
        base, _ = fit.body.pose_joints(state.rotmats, state.betas, state.trans)
        cols = []
        for k in range(75):
            s = _perturb_frame(state, k, step)
            moved, _ = fit.body.pose_joints(s.rotmats, s.betas, s.trans)
            cols.append(((moved - base)[:, :24] / step).reshape(len(base), -1))
    jac = torch.stack(cols, -1)  # (F, 72, 75)
    info = a.transpose(-1, -2) @ a + torch.diag(prior_frame)
    return -jac @ torch.linalg.solve(info, a.transpose(-1, -2) @ b)


def joint_spread_mm(gain: torch.Tensor, cov: torch.Tensor, idx) -> tuple[float, int]:
    """(spread mm, joint): the largest, over the joints, root-mean-square over frames of the
    joint's displacement (norm of its 3-vector's standard deviation) that the offsets' posterior
    covariance ``cov`` on the parameters ``idx`` causes through ``gain`` (:func:`_joint_gain`)."""
    g = gain[:, :, idx]
    var = ((g @ cov[idx][:, idx]) * g).sum(-1).clamp_min(0.0)  # (F, 72)
    per_joint = var.reshape(len(g), 24, 3).sum(-1).mean(0).sqrt() * 1000.0  # (24,)
    k = int(per_joint.argmax())
    return float(per_joint[k]), k


def _perturb_frame(state, k: int, step: float):
    """``state`` with frame parameter k (root 0–2, body 3–71, translation 72–74) moved by
    ``step`` in every frame."""
    rot = state.rotmats.clone()
    trans = state.trans.clone()
    if k < 3:
        d = torch.zeros(3, dtype=torch.float64)
        d[k] = step
        rot[:, 0] = roma.rotvec_to_rotmat(d) @ rot[:, 0]
    elif k < 72:
        j, c = divmod(k - 3, 3)
        rv = roma.rotmat_to_rotvec(rot[:, 1 + j])
        rv[:, c] += step
        rot[:, 1 + j] = roma.rotvec_to_rotmat(rv)
    else:
        trans[:, k - 72] += step
    return replace(state, rotmats=rot, trans=trans)


def _perturb_offset(state, k: int, step: float):
    """``state`` with offset parameter k (rotations 0..3N−1, positions 3N..6N−1) moved."""
    n = state.r_off.shape[0]
    r_off, t_off = state.r_off.clone(), state.t_off.clone()
    if k < 3 * n:
        i, c = divmod(k, 3)
        d = torch.zeros(3, dtype=torch.float64)
        d[c] = step
        r_off[i] = roma.rotvec_to_rotmat(d) @ r_off[i]
    else:
        i, c = divmod(k - 3 * n, 3)
        t_off[i, c] += step
    return replace(state, r_off=r_off, t_off=t_off)
