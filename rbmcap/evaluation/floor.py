"""The floor of a joint-centre comparison: SMPL fitted directly to reference joint centres.

SMPL's joints are not another model's joint centres (other definitions, other proportions), so
even a perfect motion leaves a distance to them. :func:`fit_joint_centres` measures how much: it
fits the body's betas (shared over the take), each frame's pose and translation to the reference
points, by L-BFGS, minimising

    E = Σ_t Σ_j v_tj ‖J_j(θ_t, β) + τ_t − r_tj‖² / σ²  +  λ_p Σ_t −log p(θ_t)  +  λ_β ‖β‖²

with J the body's posed joints (forward kinematics of the rest skeleton of β), r the reference
points, v their validity, p the Gaussian-mixture pose prior (it settles what the points leave
free: the spine's share of the torso's bend, the hands, the feet, the twist of a straight limb)
and a shape prior that keeps β inside the body model's range. σ = 10 mm, λ_p = 0.1, λ_β = 1:
the prior weights are the solver's (``conf/baseline/default.yaml``), and σ makes a 10 mm
residual cost one unit per joint: the residual left then belongs to the joint definitions, not
to the priors' pull.

The start: each frame's root rotation and translation are the rigid fit (Kabsch) of the rest
skeleton's hips and shoulders onto the reference's (every mapped joint where those are not all
seen), the body in its rest pose, betas zero.

The fit is a function of its inputs alone, so its answer is kept in the cache folder
(:func:`rbmcap.paths.cache_dir`, ``floor/<key>.npz``), keyed by a SHA-256 of everything it reads:
the points and their validity, the joints, the body's rest skeleton as a function of the betas,
the prior's mixture, the iterations and the scales. A second evaluation of the same capture reads
it back instead of fitting again.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.atomic import atomic_path
from rbmcap.baseline.prior import default_pose_prior, load_pose_prior
from rbmcap.errors import DataError
from rbmcap.geometry.kinematics import forward_kinematics
from rbmcap.geometry.registration import rigid_registration
from rbmcap.paths import cache_dir
from rbmcap.skeleton import SMPL_PARENTS

SIGMA_MM = 10.0
PRIOR_WEIGHT = 0.1
BETAS_WEIGHT = 1.0
ITERATIONS = 1000
TORSO_JOINTS = (1, 2, 16, 17)
"""SMPL hips and shoulders: the rigid start's points (they move least with the limbs)."""
CACHE_VERSION = b"floor-fit-1"
"""Part of every cache key: change it when the fit changes, so old answers are not read back."""
FIELDS = ("joints", "poses", "trans", "betas", "iterations")


@dataclass
class FloorFit:
    """The floor fit: ``joints`` (T, J, 3) float64 m at the fitted joints (the order given),
    ``poses`` (T, 24, 3) axis-angle, ``trans`` (T, 3) m, ``betas`` (B,), ``iterations`` run."""

    joints: np.ndarray
    poses: np.ndarray
    trans: np.ndarray
    betas: np.ndarray
    iterations: int


def fit_joint_centres(
    body,
    points,
    valid,
    joints: list[int],
    *,
    prior=None,
    iterations: int = ITERATIONS,
    sigma_mm: float = SIGMA_MM,
    prior_weight: float = PRIOR_WEIGHT,
    betas_weight: float = BETAS_WEIGHT,
    cache: bool = True,
) -> FloorFit:
    """Fit SMPL (shared betas, per-frame pose and translation) to reference joint centres
    (module docstring).

    Args:
        body: the :class:`~rbmcap.body.BodyModel`.
        points: (T, J, 3) reference joint centres (m, world frame); valid: (T, J) bool.
        joints: the J SMPL joint indices the points stand for.
        prior: a :class:`~rbmcap.baseline.prior.GaussianMixturePrior`, a path to one, or None
            (the shipped one).
        iterations: L-BFGS iterations.
        sigma_mm, prior_weight, betas_weight: the objective's scales.
        cache: read the answer from the cache folder when it is there, else fit and write it
            (atomically); False: always fit, write nothing.

    Raises:
        DataError: shapes do not agree, or no point is valid.
    """
    ref, seen = _checked_points(points, valid, joints)
    prior = _pose_prior(prior)
    scales = (iterations, sigma_mm, prior_weight, betas_weight)
    path = _cache_path(body, ref, seen, joints, prior, scales) if cache else None
    found = _read_cached(path)
    if found is not None:
        return found
    fit = _fit(body, ref, seen, joints, prior, *scales)
    if path is not None:
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **{k: getattr(fit, k) for k in FIELDS})
    return fit


def _fit(
    body, ref, seen, joints, prior, iterations, sigma_mm, prior_weight, betas_weight
) -> FloorFit:
    """The L-BFGS fit of :func:`fit_joint_centres` on checked points (T, J, 3) and seen (T, J)."""
    root0, trans0 = _rigid_start(body, ref, seen, joints)
    x = _Unknowns(root0, trans0, body.num_betas)
    w = seen.float() / (sigma_mm * 1e-3) ** 2

    def closure():
        opt.zero_grad()
        pred, _ = x.posed(body, joints)
        data = (w * ((pred - ref) ** 2).sum(-1)).sum()
        loss = data + prior_weight * prior(x.pose).sum() + betas_weight * (x.betas**2).sum()
        loss.backward()
        return loss

    opt = torch.optim.LBFGS(
        x.params,
        lr=1.0,
        max_iter=iterations,
        history_size=50,
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
        line_search_fn="strong_wolfe",
    )
    opt.step(closure)
    with torch.no_grad():
        pred, rot = x.posed(body, joints)
    return FloorFit(
        joints=pred.double().numpy(),
        poses=roma.rotmat_to_rotvec(rot).double().numpy(),
        trans=x.trans.detach().double().numpy(),
        betas=x.betas.detach().double().numpy(),
        iterations=int(opt.state[x.params[0]].get("n_iter", 0)),
    )


def _cache_path(body, ref, seen, joints, prior, scales):
    """``cache_dir()/floor/<key>.npz``, the key a SHA-256 of the fit's inputs (module docstring).
    The rest skeleton is linear in the betas, so it is fixed by its value at zero and at each
    unit beta."""
    h = hashlib.sha256(CACHE_VERSION)
    with torch.no_grad():
        basis = torch.cat([torch.zeros(1, body.num_betas), torch.eye(body.num_betas)])
        skeleton = torch.stack([body.rest_joints(b) for b in basis])
    arrays = [ref, seen, skeleton, prior.weights, prior.means, prior.covariances]
    for a in arrays:
        a = np.ascontiguousarray(torch.as_tensor(a).detach().cpu().numpy())
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(a.tobytes())
    h.update(repr((list(joints), list(prior.joints), [float(x) for x in scales])).encode())
    return cache_dir() / "floor" / f"{h.hexdigest()[:32]}.npz"


def _read_cached(path) -> FloorFit | None:
    """The fit stored at ``path``, or None where there is none or it cannot be read."""
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            out = {k: z[k] for k in FIELDS}
    except Exception:  # a damaged cache entry is fitted again and rewritten
        return None
    return FloorFit(
        **{k: v for k, v in out.items() if k != "iterations"}, iterations=int(out["iterations"])
    )


class _Unknowns:
    """The fit's variables: a correction ω (T, 3) of the rigid start's root rotation root0
    (T, 3, 3), the body pose (T, 23, 3) axis-angle, the translation (T, 3) m and betas (B,)."""

    def __init__(self, root0: torch.Tensor, trans0: torch.Tensor, num_betas: int) -> None:
        t = root0.shape[0]
        self.root0 = root0
        self.omega = torch.zeros(t, 3, requires_grad=True)
        self.pose = torch.zeros(t, 23, 3, requires_grad=True)
        self.trans = trans0.clone().requires_grad_(True)
        self.betas = torch.zeros(num_betas, requires_grad=True)
        self.params = [self.omega, self.pose, self.trans, self.betas]

    def posed(self, body, joints: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """(joints (T, J, 3) m, local rotations (T, 24, 3, 3)). The SMPL tree of 24 joints on
        the body's rest joints (differentiable in betas): the model's own tree may be SMPL-H's
        52 joints, twice the work for nothing here."""
        rest = body.rest_joints(self.betas)
        root = roma.rotvec_to_rotmat(self.omega) @ self.root0
        rot = torch.cat([root[:, None], roma.rotvec_to_rotmat(self.pose)], dim=1)
        _, posed = forward_kinematics(rot, rest, SMPL_PARENTS)
        return posed[:, joints] + self.trans[:, None], rot


def _checked_points(points, valid, joints) -> tuple[torch.Tensor, torch.Tensor]:
    """(points (T, J, 3) float32 with zeros where not seen, seen (T, J) bool)."""
    ref = torch.as_tensor(np.asarray(points), dtype=torch.float32)
    seen = torch.as_tensor(np.asarray(valid), dtype=torch.bool)
    if ref.ndim != 3 or ref.shape[1:] != (len(joints), 3) or seen.shape != ref.shape[:2]:
        raise DataError(
            f"reference points {tuple(ref.shape)} and valid {tuple(seen.shape)} do "
            f"not fit {len(joints)} joints"
        )
    seen = seen & torch.isfinite(ref).all(-1)
    if not seen.any():
        raise DataError("no reference point is valid in any frame")
    return torch.where(seen[..., None], ref, torch.zeros_like(ref)), seen


def _pose_prior(prior):
    """The prior given (an object or a path), or the shipped one, in float32."""
    if prior is None:
        prior = default_pose_prior()
    elif not hasattr(prior, "neg_log_likelihood"):
        prior = load_pose_prior(prior)
    return prior.to(dtype=torch.float32)


def _rigid_start(body, ref, seen, joints) -> tuple[torch.Tensor, torch.Tensor]:
    """Per frame (root rotation (T, 3, 3), translation (T, 3)) putting the rest skeleton (betas
    zero) on the reference's torso joints (module docstring)."""
    with torch.no_grad():
        rest = body.rest_joints()
    torso = torch.tensor([j in TORSO_JOINTS for j in joints])
    weight = seen.float() * torso.float()
    use_all = (weight > 0).sum(-1) < 3
    weight = torch.where(use_all[:, None], seen.float(), weight) + 1e-6
    src = rest[joints].expand(ref.shape[0], len(joints), 3)
    rot, t = rigid_registration(src, ref, weight)
    pelvis = rest[0]
    return rot, t - pelvis + rot @ pelvis
