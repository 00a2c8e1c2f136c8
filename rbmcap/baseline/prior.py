"""A Gaussian-mixture prior over the SMPL body pose, fitted by EM.

EM's component densities are ``torch.distributions.MultivariateNormal``; the k-means that starts
it is ``scipy.cluster.vq.kmeans2`` from k-means++ seeds drawn with the fit's ``torch.Generator``
(so a seed gives the same prior). The fitted prior evaluates its density itself, from precision
factors computed once (see :class:`GaussianMixturePrior`).

Representation: the axis-angle vectors of joints 1..23 stacked into 69 numbers (the global
orientation is excluded: it depends on where the subject faces, not on the pose). Axis-angle is a
minimal parameterisation (three numbers for three degrees of freedom per joint), so each
component's covariance is full-rank over the real degrees of freedom, while 6D would put six
numbers on a 3-manifold and give degenerate covariances; local body rotations stay well inside
|θ| < π, where axis-angle is smooth and nearly Euclidean; it is what SMPLify/MoSh-era GMM priors
use, so the baseline is comparable to them; and the solver optimises the body pose in axis-angle,
so the prior needs no conversion inside the objective.

File format (``.npz``): ``weights`` (K,), ``means`` (K, D), ``covariances`` (K, D, D),
``joints`` (J,) SMPL joint indices, ``representation`` ('axis_angle'), ``format_version``,
``num_samples``, ``log_likelihood`` (mean per sample at the end of EM).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import roma
import torch
from scipy.cluster.vq import kmeans2
from torch.distributions import MultivariateNormal

from rbmcap.errors import ConfigError, DataError, FormatError
from rbmcap.motion.amass import discover, iter_motions
from rbmcap.paths import pretrained_dir

FORMAT_VERSION = 1
PRIOR_JOINTS: tuple[int, ...] = tuple(range(1, 24))
"""SMPL joints the prior covers (the body pose)."""


@dataclass
class GaussianMixturePrior:
    """p(x) = Σ_k π_k N(x; μ_k, Σ_k) over body poses x (axis-angle of :attr:`joints`, stacked).

    The density is written out rather than taken from ``torch.distributions``: the solver
    evaluates it (with its gradient) at every objective evaluation, and the precision factors
    precomputed here make that a matrix product, where ``MultivariateNormal.log_prob`` solves a
    triangular system per call; the two agree to float rounding.

    Attributes:
        weights: (K,) mixture weights π_k, summing to 1.
        means: (K, D) component means μ_k (radians).
        covariances: (K, D, D) component covariances Σ_k (rad²).
        joints: SMPL joint indices of the D = 3·len(joints) numbers.
        num_samples: poses the mixture was fitted on; log_likelihood: their mean log-density.
    """

    weights: torch.Tensor
    means: torch.Tensor
    covariances: torch.Tensor
    joints: tuple[int, ...] = PRIOR_JOINTS
    num_samples: int = 0
    log_likelihood: float = float("nan")

    def __post_init__(self) -> None:
        k, d = self.means.shape
        if self.weights.shape != (k,) or self.covariances.shape != (k, d, d):
            raise FormatError(
                f"pose prior: weights {tuple(self.weights.shape)}, means {(k, d)}, covariances "
                f"{tuple(self.covariances.shape)} do not fit together"
            )
        if d != 3 * len(self.joints):
            raise FormatError(f"pose prior: {d} dimensions for {len(self.joints)} joints")
        # Precision Cholesky factors: Σ⁻¹ = L Lᵀ, so the Mahalanobis term is ‖(x − μ)ᵀ L‖².
        chol = torch.linalg.cholesky(self.covariances.double())
        eye = torch.eye(d, dtype=torch.float64, device=chol.device).expand(k, d, d)
        inv_chol = torch.linalg.solve_triangular(chol, eye, upper=False)  # L_Σ⁻¹
        self._prec_chol = inv_chol.transpose(-1, -2).to(self.means.dtype)
        log_det = 2.0 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
        self._log_norm = (
            torch.log(self.weights.double()) - 0.5 * (d * math.log(2 * math.pi) + log_det)
        ).to(self.means.dtype)

    @property
    def num_components(self) -> int:
        return int(self.means.shape[0])

    @property
    def dim(self) -> int:
        return int(self.means.shape[1])

    def to(self, device=None, dtype: torch.dtype | None = None) -> GaussianMixturePrior:
        """A copy on ``device`` in ``dtype``."""
        kw = {"device": device, "dtype": dtype or self.means.dtype}
        return GaussianMixturePrior(
            self.weights.to(**kw),
            self.means.to(**kw),
            self.covariances.to(**kw),
            self.joints,
            self.num_samples,
            self.log_likelihood,
        )

    def flatten(self, pose: torch.Tensor) -> torch.Tensor:
        """Poses in any accepted form → (..., D) prior vectors.

        Accepted: (..., D); (..., J, 3) axis-angle of the prior's joints; (..., 24, 3) full SMPL
        axis-angle (joint 0 dropped); (..., 24, 3, 3) or (..., J, 3, 3) rotation matrices.
        """
        j = len(self.joints)
        if pose.ndim >= 3 and pose.shape[-2:] == (3, 3) and pose.shape[-3] in (24, j):
            pose = roma.rotmat_to_rotvec(pose)
        if pose.ndim >= 2 and pose.shape[-2:] == (24, 3) and j != 24:
            pose = pose[..., list(self.joints), :]
        if pose.ndim >= 2 and pose.shape[-2:] == (j, 3):
            pose = pose.flatten(-2)
        if pose.shape[-1] != self.dim:
            raise DataError(
                f"pose of shape {tuple(pose.shape)}: the prior takes (..., {self.dim}), "
                f"(..., {j}, 3), (..., 24, 3) or rotation matrices"
            )
        return pose

    def component_log_densities(self, pose: torch.Tensor) -> torch.Tensor:
        """log π_k + log N(x; μ_k, Σ_k) for each component: (..., K)."""
        x = self.flatten(pose).to(self.means.dtype)
        diff = x[..., None, :] - self.means  # (..., K, D)
        white = torch.einsum("...kd,kde->...ke", diff, self._prec_chol)
        return self._log_norm - 0.5 * (white * white).sum(-1)

    def neg_log_likelihood(self, pose: torch.Tensor) -> torch.Tensor:
        """−log p(x) in nats, (...) for poses (...) in any form :meth:`flatten` accepts.

        Differentiable; lower means more like the training poses.
        """
        return -torch.logsumexp(self.component_log_densities(pose), dim=-1)

    __call__ = neg_log_likelihood

    def precision_diagonal(self) -> torch.Tensor:
        """(D,) the diagonal of Σ_k π_k Σ_k⁻¹ (rad⁻²): the mixture's typical curvature of
        −log p per dimension, for preconditioning."""
        per_component = (self._prec_chol**2).sum(-1)  # diag(L Lᵀ) per component
        return (self.weights[:, None] * per_component).sum(0)

    def save(self, path: str | Path) -> Path:
        """Write the ``.npz`` (atomically: a temporary file, then a rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(
                fh,
                weights=self.weights.double().cpu().numpy(),
                means=self.means.double().cpu().numpy(),
                covariances=self.covariances.double().cpu().numpy(),
                joints=np.asarray(self.joints, dtype=np.int64),
                representation=np.array("axis_angle"),
                format_version=np.array(FORMAT_VERSION),
                num_samples=np.array(self.num_samples),
                log_likelihood=np.array(self.log_likelihood),
            )
        tmp.replace(path)
        return path


def load_pose_prior(path: str | Path, dtype: torch.dtype = torch.float32) -> GaussianMixturePrior:
    """Read a prior written by :meth:`GaussianMixturePrior.save`.

    Raises:
        FormatError: not a pose-prior file (missing keys, other representation or version).
    """
    path = Path(path)
    if not path.is_file():
        raise FormatError(f"{path}: pose prior file not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise FormatError(f"{path}: not a readable .npz ({exc})") from exc
    missing = {"weights", "means", "covariances", "joints"} - set(data)
    if missing:
        raise FormatError(f"{path}: not a pose prior (missing {', '.join(sorted(missing))})")
    rep = str(data.get("representation", "axis_angle"))
    version = int(data.get("format_version", FORMAT_VERSION))
    if rep != "axis_angle" or version > FORMAT_VERSION:
        raise FormatError(
            f"{path}: pose prior of representation {rep!r}, version {version}; "
            f"this rbmcap reads axis_angle version ≤ {FORMAT_VERSION}"
        )
    return GaussianMixturePrior(
        weights=torch.as_tensor(data["weights"], dtype=dtype),
        means=torch.as_tensor(data["means"], dtype=dtype),
        covariances=torch.as_tensor(data["covariances"], dtype=dtype),
        joints=tuple(int(j) for j in data["joints"]),
        num_samples=int(data.get("num_samples", 0)),
        log_likelihood=float(data.get("log_likelihood", float("nan"))),
    )


DEFAULT_PRIOR_FILE = "pose-prior.npz"
"""The shipped prior's file name in ``rbmcap/pretrained/`` (how it was made: docs/evaluation.md,
"The shipped pose prior")."""


def default_pose_prior(dtype: torch.dtype = torch.float32) -> GaussianMixturePrior:
    """The pose prior shipped with rbmcap (``rbmcap/pretrained/pose-prior.npz``).

    Fitted with :func:`fit_pose_prior` (8 components) on the training split of a seeded
    procedural library and of the CMU clips on the iClone rig, both on the stand-in body; the
    command is in docs/evaluation.md.

    Raises:
        FormatError: the file is missing from the installation or unreadable.
    """
    return load_pose_prior(pretrained_dir() / DEFAULT_PRIOR_FILE, dtype=dtype)


def motion_poses(
    folders, split: str | None = "train", fps: float | None = None
) -> tuple[np.ndarray, int]:
    """The body poses of every motion under ``folders`` (AMASS-style motions folders), stacked.

    A folder with split lists (``splits/{train,val,test}.txt``, as ``rbmcap motion procedural``
    and ``rbmcap motion from-bvh DIR`` write them) gives the motions of ``split`` only (None: all
    of them); a folder without them gives every motion file under it.

    Args:
        folders: one folder or several.
        split: 'train', 'val', 'test' or None.
        fps: resample every motion to this rate first (None: each file's own rate).

    Returns:
        (poses (F, 24, 3) float32 axis-angle, radians; the number of motions read).

    Raises:
        DataError: no motion found.
    """
    folders = [folders] if isinstance(folders, str | Path) else list(folders)
    chunks: list[np.ndarray] = []
    count = 0
    for folder in folders:
        folder = Path(folder)
        lists = folder / "splits"
        if lists.is_dir():
            entries = discover(folder, lists)
            wanted = split
        else:
            entries = discover(folder)
            wanted = None
        for _, motion in iter_motions(entries, split=wanted, fps=fps):
            chunks.append(motion.poses.astype(np.float32))
            count += 1
    if not chunks:
        names = ", ".join(str(f) for f in folders)
        raise DataError(f"{names}: no motion files" + (f" in split {split!r}" if split else ""))
    return np.concatenate(chunks), count


def fit_pose_prior(
    poses,
    num_components: int = 8,
    seed: int = 0,
    *,
    max_samples: int = 20000,
    iterations: int = 100,
    tolerance: float = 1e-2,
    reg_covar: float = 1e-3,
    joints: tuple[int, ...] = PRIOR_JOINTS,
) -> GaussianMixturePrior:
    """Fit a full-covariance Gaussian mixture to body poses by expectation-maximisation.

    Initialisation is k-means++ seeding followed by a few Lloyd iterations; EM then runs until the
    mean log-likelihood per sample improves by less than ``tolerance`` (nats) or ``iterations``
    is reached. Components that lose all their samples are re-seeded on the worst-explained pose.

    Args:
        poses: (N, 24, 3) SMPL axis-angle poses, (N, len(joints), 3), or (N, D) vectors.
        num_components: K.
        seed: seeds the subsampling and the initialisation (same seed, same prior).
        max_samples: poses used at most (an evenly spread random subset; consecutive mocap
            frames are nearly duplicates, so this loses little).
        iterations, tolerance: EM stopping rule.
        reg_covar: added to every covariance's diagonal (rad²): keeps components invertible,
            also along degrees of freedom the data never moves (e.g. SMPL hands held at zero).
        joints: SMPL joints covered (default 1..23).

    Returns:
        The fitted :class:`GaussianMixturePrior` (float32).
    """
    gen = torch.Generator().manual_seed(int(seed))
    x = _pose_vectors(poses, joints, max_samples, gen)
    if num_components < 1:
        raise ConfigError(f"num_components must be at least 1, got {num_components}")
    if x.shape[0] < 2 * num_components:
        raise DataError(f"{x.shape[0]} poses are too few for {num_components} components")
    resp = _kmeans_responsibilities(x, num_components, gen)
    prev = -math.inf
    ll = -math.inf
    for _ in range(iterations):
        weights, means, covs = _m_step(x, resp, reg_covar)
        log_p = _component_log_densities(x, weights, means, covs)
        lse = torch.logsumexp(log_p, dim=-1)
        ll = float(lse.mean())
        resp = torch.exp(log_p - lse[:, None])
        resp = _reseed_empty(resp, lse)
        if ll - prev < tolerance:
            break
        prev = ll
    weights, means, covs = _m_step(x, resp, reg_covar)
    return GaussianMixturePrior(
        weights=weights.float(),
        means=means.float(),
        covariances=covs.float(),
        joints=tuple(joints),
        num_samples=int(x.shape[0]),
        log_likelihood=ll,
    )


def _pose_vectors(poses, joints, max_samples: int, gen: torch.Generator) -> torch.Tensor:
    """(N, 3·len(joints)) float64 prior vectors from the poses :func:`fit_pose_prior` accepts, at
    most ``max_samples`` of them (an evenly spread random subset drawn with ``gen``)."""
    count = len(poses)
    if count > max_samples:
        # Pick rows before reading: ``poses`` may be a memory map of a whole dataset.
        rows = torch.sort(torch.randperm(count, generator=gen)[:max_samples]).values.numpy()
        poses = poses[torch.as_tensor(rows)] if torch.is_tensor(poses) else poses[rows]
    x = poses.double() if torch.is_tensor(poses) else torch.from_numpy(np.array(poses, np.float64))
    if x.ndim == 3 and x.shape[1:] == (24, 3) and len(joints) != 24:
        x = x[:, list(joints)]
    x = x.reshape(x.shape[0], -1) if x.ndim == 3 else x
    d = 3 * len(joints)
    if x.ndim != 2 or x.shape[1] != d:
        raise DataError(f"poses of shape {tuple(x.shape)}: expected (N, 24, 3) or (N, {d})")
    if not torch.isfinite(x).all():
        raise DataError("poses contain NaN or infinite values")
    return x


def _kmeans_responsibilities(x: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """Hard assignments (N, K): k-means++ seeds (drawn with ``gen``), then 10 Lloyd iterations
    (``scipy.cluster.vq.kmeans2``; a cluster that empties keeps its centre)."""
    n = x.shape[0]
    centres = [x[int(torch.randint(n, (1,), generator=gen))]]
    d2 = ((x - centres[0]) ** 2).sum(-1)
    for _ in range(1, k):
        probs = d2 / d2.sum() if d2.sum() > 0 else torch.full_like(d2, 1.0 / n)
        centres.append(x[int(torch.multinomial(probs, 1, generator=gen))])
        d2 = torch.minimum(d2, ((x - centres[-1]) ** 2).sum(-1))
    seeds = torch.stack(centres).numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "one of the clusters is empty"
        _, label = kmeans2(x.numpy(), seeds, iter=10, minit="matrix", missing="warn")
    return torch.nn.functional.one_hot(torch.from_numpy(label).long(), k).double()


def _m_step(x: torch.Tensor, resp: torch.Tensor, reg: float):
    nk = resp.sum(0) + 1e-10
    weights = nk / nk.sum()
    means = (resp.T @ x) / nk[:, None]
    diff = x[None] - means[:, None]  # (K, N, D)
    covs = (diff * resp.T[..., None]).transpose(1, 2) @ diff / nk[:, None, None]
    covs = covs + reg * torch.eye(x.shape[1], dtype=x.dtype)
    return weights, means, covs


def _component_log_densities(x, weights, means, covs) -> torch.Tensor:
    """log π_k + log N(x_n; μ_k, Σ_k): (N, K)."""
    gaussians = MultivariateNormal(means, covariance_matrix=covs, validate_args=False)
    return torch.log(weights) + gaussians.log_prob(x[:, None, :])


def _reseed_empty(resp: torch.Tensor, lse: torch.Tensor) -> torch.Tensor:
    """Give a component that lost all its samples the worst-explained pose."""
    empty = torch.nonzero(resp.sum(0) < 1e-6).flatten()
    if len(empty):
        worst = torch.argsort(lse)[: len(empty)]
        for j, i in zip(empty.tolist(), worst.tolist(), strict=True):
            resp[i] = 0.0
            resp[i, j] = 1.0
    return resp
