"""Levenberg–Marquardt over a whole sequence: the optimiser of the solver, the hybrid and offline
refinement.

Unknowns per frame t: x_t = (ω_t (3), θ_t (69)) and the translation τ_t (3), the global
orientation being exp(ω_t)·R_t (a correction of a base orientation R_t, re-based after every
step so that ω never nears π); shared by the sequence: the betas β. The objective is
:mod:`rbmcap.baseline.objective`'s:

    E = Σ_t [Σ_i v_ti (‖p̂_ti − p_ti‖²/σ_p² + θ(R̂_ti, R_ti)²/σ_r²) + w_prior·NLL(θ_t) + w_l2‖θ_t‖²]
      + Σ_{t=1}^{T−2} Σ_i ‖(p̂_{t−1,i} − 2 p̂_ti + p̂_{t+1,i})·fps²‖² / σ_a²   +   w_β ‖β − β₀‖²

with β₀ the start's betas (another method's estimate of the subject's shape, the network's) or
zero (the mean shape) without one.

The smoothness term ties a frame to the two before it and the two after it, so frames three or
more apart share no term. One **sweep** steps the frames in three colours (t mod 3): every frame
of a colour takes one LM step of the terms that involve it, with the other frames held (block
Gauss–Seidel; the frames of one colour are independent, so they are solved in one batch, in
chunks of ``chunk`` frames). A frame's step is :class:`rbmcap.baseline.frame.LMStep`'s:

    J = ∂r/∂(x, τ)    forward differences, all 75 columns in one batched evaluation of 76 poses
    H = JᵀJ + Hₚ,  g = Jᵀr + gₚ,   δ = −(H + λ diag H)⁻¹ g

(Hₚ, gₚ: the Gauss–Newton model of the prior's dominant Gaussian), kept only where the frame's
terms decrease; each frame's damping λ grows ×10 after a rejected step and shrinks ÷10 after a
kept one.

Unless the betas are held, a frame's Jacobian also has the betas' columns (76 + B poses), and a
sweep ends with a **shape step**: the betas' Gauss–Newton step with every frame's pose following
it, the frames eliminated as in bundle adjustment (the reduced B×B system Σ_t H_ββ,t −
H_βx,t A_t⁻¹ H_xβ,t, A_t the frame's damped H, from each frame's linearisation in its step; the
poses move by −A_t⁻¹ H_xβ,t δβ). Shape and pose are so entangled (a longer thigh or a more bent
knee) that a step of the shape with the poses held stalls. The shape step is kept where it
lowers E, else retried with more damping. No step raises E, so no sweep does (from a start read
off the plates, after the first :data:`FRAME_BY_FRAME`, which leave the smoothness term out to
bring a rough start close fast).

**Converged**: a sweep that lowers E by less than ``tolerance`` per frame (E is in units of a
squared residual over its scale, nats for the prior; its value can be negative, the prior's
log-density being unnormalised in that sense, so the rule is absolute, not relative).

Frames where no plate is seen are held at their start (the network's answer, or the kinematic
start, which fills them from the nearest seen frame): there is nothing to fit them to. They
still enter their neighbours' smoothness terms.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import roma
import torch
from torch.nn import functional

from rbmcap.baseline.frame import FrameTerms, rotation_residual
from rbmcap.baseline.objective import predict_markers_and_joints

DAMPING = (1e-4, 10.0, 1e4)
"""Levenberg–Marquardt damping λ: its start, the factor it grows by after a rejected step (and
shrinks by after a kept one, not below the start), and its cap."""

DIFFERENCE_STEP = 1e-3
"""Forward-difference step of the Jacobians (radians, metres, betas units)."""

COLOUR = 3
"""Frames t and t + 3 share no term: the number of colours of a sweep."""

SHAPE_TRIES = 3
"""Tries of a sweep's shape step, each with ten times the damping of the one before."""

POSE_FIRST = 1

FRAME_BY_FRAME = 3
"""Sweeps at the start without the smoothness term: every frame steps at once towards its own
fit. With the term, a sweep moves a slow change over many frames only a fraction of the way
(each frame's step holds its neighbours), so a rough start is first brought close frame by
frame."""
"""Sweeps at the start whose steps hold the betas: from a rough start (the plates' kinematic
reading), a step of shape and pose together first bends the shape far to explain poses that the
pose steps alone fix."""

NEIGHBOUR_COEFFICIENTS = (1.0, -2.0, 1.0)
"""The coefficient of p̂_t in the accelerations a_{t−1}, a_t and a_{t+1} it enters."""


@dataclass
class SequenceState:
    """A sequence's unknowns and what the sweeps keep (tensors in the solver's dtype).

    Attributes:
        x: (T, 75) per frame ω (zero after every step), the body's axis-angle (69), τ (3) m.
        base: (T, 3, 3) the global orientation ω corrects.
        betas: (B,) the shape.
        plates: (T, N, 3) the predicted plate positions at x.
        damping: (T,) each frame's λ.
        betas_damping: λ of the betas' part of a joint step.
        schur, rhs, follow: (T, B, B), (T, B), (T, 75, B) each frame's share of the betas'
            reduced system and gradient after its last step, and how its unknowns follow a
            change of the betas (A⁻¹H_xβ) (None until the betas move).
        energy: E at the state, where known (a joint step's check reuses it).
    """

    x: torch.Tensor
    base: torch.Tensor
    betas: torch.Tensor
    plates: torch.Tensor
    damping: torch.Tensor
    betas_damping: float = DAMPING[0]
    schur: torch.Tensor | None = None
    rhs: torch.Tensor | None = None
    follow: torch.Tensor | None = None
    energy: torch.Tensor | None = None

    def rotmats(self) -> torch.Tensor:
        """(T, 24, 3, 3) local rotations."""
        return rotmats_of(self.x[:, :72], self.base)


def rotmats_of(x: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    """Local rotations (..., 24, 3, 3) of unknowns x (..., 72) (ω, body axis-angle) around the
    global orientation ``base`` (..., 3, 3)."""
    root = roma.rotvec_to_rotmat(x[..., :3]) @ base
    joints = roma.rotvec_to_rotmat(x[..., 3:72].reshape(*x.shape[:-1], 23, 3))
    return torch.cat([root[..., None, :, :], joints], dim=-3)


class SequenceTerms(FrameTerms):
    """The residuals of the frames of one colour (see the module docstring), built on
    :class:`~rbmcap.baseline.frame.FrameTerms` (the same scales and prior).

    Args:
        body, topology, weights, prior, fps: as for :class:`FrameTerms`.
        orientations: the plates' orientations enter (6-DoF plates); False for point markers.
    """

    def __init__(self, body, topology, weights, prior, fps: float, orientations: bool = True):
        super().__init__(body, topology, weights, prior, fps)
        self.orientation_weight = 1.0 if orientations else 0.0
        self.betas_weight = float(weights.betas)
        self.joint_scale = 1.0 / (weights.joints_sigma_mm * 1e-3)
        hinge = weights.hinge_sigma_deg
        self.hinge_scale = 1.0 / math.radians(hinge) if hinge > 0 else 0.0
        coef = torch.tensor(NEIGHBOUR_COEFFICIENTS, dtype=self.eye3.dtype, device=self.eye3.device)
        self.register_buffer("coefficients", coef, persistent=False)
        if self.prior_weight > 0:
            factors = self.prior_factors  # (K, 69, 69) L_k: P_k = L_k L_kᵀ
            self.register_buffer(
                "prior_precisions", factors @ factors.transpose(1, 2), persistent=False
            )

    def block_residuals(
        self, x, base, betas, pos, rot, valid, held, near, centres=None, seen=None, hinges=None
    ):
        """The residuals of F frames at R candidate unknowns each.

        Args:
            x: (F, R, 75) unknowns (ω, body axis-angle, τ); base: (F, 3, 3); betas: (F, R, B)
                or (F, 1, B).
            pos, rot, valid: (F, N, 3), (F, N, 3, 3), (F, N) observations (invalid entries
                finite placeholders).
            held: (F, 3, N, 3) the held part of a_{t−1}, a_t, a_{t+1} (what the neighbours
                contribute); near: (F, 3) 1 where that acceleration exists, else 0.
            centres, seen: (F, 24, 3) joint centres measured from the plates and (F, 24) where
                (:meth:`SequenceLM.__init__`), or None.
            hinges: None, or (joint indices (K,), projectors (K, 3, 3) I − a aᵀ across each
                hinge's axis a): each hinge's turn off its axis is a residual.

        Returns:
            (residuals (F, R, 15N [+ 72] [+ 3K]), predicted plate positions (F, R, N, 3)).
        """
        rotmats = rotmats_of(x[..., :72], base[:, None])
        pp, pr, joints = predict_markers_and_joints(
            self.body, self.topology, rotmats, betas, x[..., 72:]
        )
        weight = valid[:, None, :, None].to(x.dtype)
        r_pos = (pp - pos[:, None]) * (weight * self.position_scale)
        scale = self.rotation_scale * self.orientation_weight
        r_rot = rotation_residual(rot[:, None], pr) * (weight * scale)
        accel = self.coefficients[:, None, None] * pp[:, :, None] + held[:, None]
        r_acc = accel * (near[:, None, :, None, None] * self.accel_scale)
        parts = [r_pos, r_rot, r_acc.flatten(2, 3)]
        if centres is not None:
            parts.append(self._joint_residuals(joints, centres[:, None], seen[:, None]))
        if hinges is not None:
            parts.append(self._hinge_residuals(x, hinges))
        return torch.cat(parts, dim=-2).flatten(-2), pp

    def data_residuals(self, x, base, betas, pos, rot, valid, centres=None, seen=None, hinges=None):
        """Data residuals (F, 6N [+ 72] [+ 3K]) and predicted plate positions (F, N, 3) of F
        frames at one unknown each (x (F, 75), base (F, 3, 3), betas (F, B); centres, seen,
        hinges as for :meth:`block_residuals`)."""
        rotmats = rotmats_of(x[:, :72], base)
        pp, pr, joints = predict_markers_and_joints(
            self.body, self.topology, rotmats, betas, x[:, 72:]
        )
        weight = valid[..., None].to(x.dtype)
        r_pos = (pp - pos) * (weight * self.position_scale)
        scale = self.rotation_scale * self.orientation_weight
        r_rot = rotation_residual(rot, pr) * (weight * scale)
        parts = [r_pos, r_rot]
        if centres is not None:
            parts.append(self._joint_residuals(joints, centres, seen))
        if hinges is not None:
            parts.append(self._hinge_residuals(x, hinges))
        return torch.cat(parts, dim=-2).flatten(-2), pp

    def _hinge_residuals(self, x, hinges):
        """Each hinge's turn off its axis, (I − a aᵀ) ω_k / σ_h: (..., K, 3) from unknowns x
        (..., 75) (ω_k: joint k's axis-angle, relative to its parent)."""
        ids, across = hinges
        turns = x[..., 3:72].unflatten(-1, (23, 3))[..., ids - 1, :]
        return torch.einsum("kab,...kb->...ka", across, turns) * self.hinge_scale

    def _joint_residuals(self, joints, centres, seen):
        """(J − c) / σ_j where ``seen``, else 0: (..., 24, 3)."""
        return (joints - centres) * (seen[..., None].to(joints.dtype) * self.joint_scale)

    def prior_model(self, body_pose: torch.Tensor):
        """The pose prior and L2 terms at body poses (F, 69) and their Gauss–Newton model, in the
        halved convention of the steps (H = JᵀJ, g = Jᵀr for a term ‖r‖²): (E (F,), H
        (F, 69, 69), g (F, 69)). The mixture's model weighs each component's by its
        responsibility γ_k: g = (w/2) Σ_k γ_k P_k (θ − μ_k) is the exact gradient, H =
        (w/2) Σ_k γ_k P_k (P_k: the component's precision). A pose between two components is
        drawn towards both, as the mixture draws it, not to the nearer mean alone."""
        f = body_pose.shape[0]
        l2 = self.pose_l2
        energy = l2 * (body_pose * body_pose).sum(-1)
        hess = l2 * torch.eye(69, dtype=body_pose.dtype, device=body_pose.device).expand(f, 69, 69)
        grad = l2 * body_pose
        if self.prior_weight <= 0:
            return energy, hess, grad
        diff = body_pose[:, None] - self.prior_means  # (F, K, 69)
        white = torch.einsum("fkd,kde->fke", diff, self.prior_factors)
        log_density = self.prior_norms - 0.5 * (white * white).sum(-1)  # (F, K)
        gamma = torch.softmax(log_density, dim=-1)
        half = 0.5 * self.prior_weight
        pulled = torch.einsum("kde,fke->fkd", self.prior_factors, white)  # P_k (θ − μ_k)
        grad = grad + half * torch.einsum("fk,fkd->fd", gamma, pulled)
        hess = hess + half * torch.einsum("fk,kde->fde", gamma, self.prior_precisions)
        energy = energy - self.prior_weight * torch.logsumexp(log_density, dim=-1)
        return energy, hess, grad

    def prior_energy(self, body_pose: torch.Tensor) -> torch.Tensor:
        """The pose prior and L2 terms (F,) at body poses (F, 69)."""
        return self.prior_terms(body_pose)[0] + self.pose_l2 * (body_pose * body_pose).sum(-1)

    def accel_energy(self, plates: torch.Tensor) -> torch.Tensor:
        """The smoothness term of a path of predicted plate positions (T, N, 3) (a scalar)."""
        if plates.shape[0] < 3 or self.accel_scale == 0:
            return plates.new_zeros(())
        a = (plates[2:] - 2.0 * plates[1:-1] + plates[:-2]) * self.accel_scale
        return (a * a).sum()


class SequenceLM:
    """Sweeps of Levenberg–Marquardt over one sequence (module docstring).

    Args:
        terms: the :class:`SequenceTerms` of the body, marker set, weights and prior.
        pos, rot, valid: (T, N, 3), (T, N, 3, 3), (T, N) checked observations (invalid
            entries finite placeholders; ``rot`` identities for point markers).
        chunk: frames per batched evaluation (bounds memory; 76 poses each in a step).
        sync: called before each clock reading (a GPU's synchronisation).
        betas_centre: (B,) β₀, where the shape prior w_β‖β − β₀‖² is centred (default zero,
            the body model's mean shape).
        centres: None, or joint centres measured from the plates' motion (a calibration's,
            :mod:`rbmcap.calibrate.functional`) as ((T, 24, 3) m, (T, 24) bool where measured):
            the body's joints are drawn to them (``weights.joints_sigma_mm``).
        hinges: None, or (joint indices (K,) in 1..23, axes (K, 3) unit, in each joint's parent
            frame): those joints turn about their axis, their turn off it a residual
            (``weights.hinge_sigma_deg``; 0 leaves them free).
    """

    def __init__(
        self,
        terms: SequenceTerms,
        pos,
        rot,
        valid,
        chunk: int = 64,
        sync=None,
        betas_centre=None,
        centres=None,
        hinges=None,
    ):
        self.terms = terms
        self.pos, self.rot, self.valid = pos, rot, valid
        self.centres = centres
        self.hinges = None
        if hinges is not None and len(hinges[0]) and terms.hinge_scale > 0:
            ids = torch.as_tensor(hinges[0], dtype=torch.long, device=pos.device)
            axes = torch.as_tensor(hinges[1]).to(pos)
            axes = axes / axes.norm(dim=-1, keepdim=True)
            eye = torch.eye(3).to(pos)
            self.hinges = (ids, eye - axes[:, :, None] * axes[:, None, :])
        self.chunk = max(1, int(chunk))
        self.sync = sync or (lambda: None)
        ref = terms.eye3
        self.kw = {"dtype": ref.dtype, "device": ref.device}
        n, nb = 75, terms.body.num_betas
        deltas = torch.zeros(1 + n + nb, n + nb, **self.kw)
        deltas[1:] = DIFFERENCE_STEP * torch.eye(n + nb, **self.kw)
        self.deltas_betas = deltas  # the unknowns' steps, then the betas'
        self.deltas = deltas[: 1 + n, :n]
        self.frames = pos.shape[0]
        seen = valid.any(-1)
        self.unseen = int((~seen).sum())
        # the frames each colour steps: seen ones only
        t = torch.arange(self.frames, device=pos.device)
        self.colours = [t[(t % COLOUR == c) & seen] for c in range(COLOUR)]
        self.seen = t[seen]
        centre = torch.zeros(nb, **self.kw) if betas_centre is None else betas_centre
        self.betas_centre = centre.to(**self.kw)

    # ----------------------------------------------------------------------------- state
    def state(self, rotmats, trans, betas) -> SequenceState:
        """The state at a start: local rotations (T, 24, 3, 3), trans (T, 3), betas (B,)."""
        body_pose = roma.rotmat_to_rotvec(rotmats[:, 1:]).flatten(1)
        x = torch.cat([torch.zeros_like(trans), body_pose, trans], dim=1).to(**self.kw)
        st = SequenceState(
            x=x,
            base=rotmats[:, 0].to(**self.kw).contiguous(),
            betas=betas.to(**self.kw),
            plates=torch.zeros(self.frames, self.pos.shape[1], 3, **self.kw),
            damping=torch.full((self.frames,), DAMPING[0], **self.kw),
        )
        st.plates = self.evaluate(st)[1]
        return st

    @torch.no_grad()
    def evaluate(self, st: SequenceState):
        """E at the state: (E, predicted plate positions (T, N, 3), the data residuals
        (T, 6N))."""
        betas, x = st.betas, st.x
        rs, ps = [], []
        for a in range(0, self.frames, self.chunk):
            b = min(self.frames, a + self.chunk)
            r, p = self.terms.data_residuals(
                x[a:b],
                st.base[a:b],
                betas.expand(b - a, -1),
                self.pos[a:b],
                self.rot[a:b],
                self.valid[a:b],
                *self._centres(slice(a, b)),
                hinges=self.hinges,
            )
            rs.append(r)
            ps.append(p)
        r, plates = torch.cat(rs), torch.cat(ps)
        e = (r * r).sum() + self.terms.prior_energy(x[:, 3:72]).sum()
        shape = betas - self.betas_centre
        e = e + self.terms.accel_energy(plates) + self.terms.betas_weight * (shape * shape).sum()
        return e, plates, r

    # ----------------------------------------------------------------------------- sweep
    @torch.no_grad()
    def sweep(self, st: SequenceState, free_betas: bool, smooth: bool = True) -> None:
        """One sweep: every seen frame's step, colour by colour (``smooth`` False: all at once,
        the smoothness term left out), then with ``free_betas`` the shape step. Updates
        ``st``."""
        if free_betas and st.schur is None:
            nb, kw = st.betas.shape[0], self.kw
            st.schur = torch.zeros(self.frames, nb, nb, **kw)
            st.rhs = torch.zeros(self.frames, nb, **kw)
            st.follow = torch.zeros(self.frames, 75, nb, **kw)
        colours = self.colours if smooth else [self.seen]
        for frames in colours:
            if len(frames):
                self._colour_step(st, frames, free_betas, smooth)
        if free_betas:
            self._shape_step(st)

    def _centres(self, idx) -> tuple:
        """The joint centres and where they were measured, of frames ``idx`` (or nothing)."""
        if self.centres is None:
            return ()
        return self.centres[0][idx], self.centres[1][idx]

    def _neighbours(self, plates: torch.Tensor, idx: torch.Tensor):
        """The held parts (F, 3, N, 3) of a_{t−1}, a_t, a_{t+1} for frames ``idx`` and which of
        them exist (F, 3)."""
        t_max = self.frames - 1
        padded = functional.pad(plates, (0, 0, 0, 0, 2, 2))  # frame t at index t + 2
        p = [padded[idx + 2 + k] for k in (-2, -1, 1, 2)]  # t−2, t−1, t+1, t+2
        held = torch.stack([p[0] - 2.0 * p[1], p[1] + p[2], p[3] - 2.0 * p[2]], dim=1)
        near = torch.stack([idx >= 2, (idx >= 1) & (idx <= t_max - 1), idx <= t_max - 2], dim=1)
        return held, near.to(plates.dtype)

    def _colour_step(
        self, st: SequenceState, frames: torch.Tensor, free_betas: bool, smooth: bool = True
    ) -> None:
        """One LM step of ``frames`` (all of one colour), the others held; with ``free_betas``
        first tried jointly with the betas."""
        parts = [
            self._linearise(st, frames[a : a + self.chunk], free_betas, smooth)
            for a in range(0, len(frames), self.chunk)
        ]
        floor, factor, cap = DAMPING
        nb = st.betas.shape[0]
        for p in parts:
            new = p.x - p.a_g
            r1, pp1 = self.terms.block_residuals(
                new[:, None], p.base, st.betas.expand(len(p.idx), 1, nb), *p.obs, hinges=self.hinges
            )
            e1 = (r1[:, 0] ** 2).sum(-1) + self.terms.prior_energy(new[:, 3:72])
            kept = torch.isfinite(e1) & (e1 < p.e0)
            lam = st.damping[p.idx]
            st.damping[p.idx] = torch.where(
                kept, (lam / factor).clamp_min(floor), (lam * factor).clamp_max(cap)
            )
            new, new_base = _rebased(new, p.base)
            st.x[p.idx] = torch.where(kept[:, None], new, p.x)
            st.base[p.idx] = torch.where(kept[:, None, None], new_base, p.base)
            st.plates[p.idx] = torch.where(kept[:, None, None], pp1[:, 0], p.plates)
            if free_betas:  # the betas' gradient after the frame's step (before it: not kept)
                st.schur[p.idx], st.follow[p.idx] = p.schur, p.a_h
                st.rhs[p.idx] = p.grad_b - kept[:, None] * p.rhs
        st.energy = None

    def _linearise(
        self, st: SequenceState, idx: torch.Tensor, free_betas: bool, smooth: bool = True
    ) -> _Linear:
        """Frames ``idx``'s terms and their Gauss–Newton model at the state (one batched
        evaluation of 76 poses a frame, 76 + B with ``free_betas``)."""
        terms = self.terms
        nb = st.betas.shape[0]
        held, near = self._neighbours(st.plates, idx)
        if not smooth:
            near = torch.zeros_like(near)
        x, base, lam = st.x[idx], st.base[idx], st.damping[idx]
        f = len(idx)
        obs = (self.pos[idx], self.rot[idx], self.valid[idx], held, near, *self._centres(idx))
        deltas = self.deltas_betas if free_betas else self.deltas
        cand = x[:, None] + deltas[:, :75]
        betas = st.betas + deltas[:, 75:] if free_betas else st.betas[None]
        r, pp = terms.block_residuals(cand, base, betas.expand(f, -1, nb), *obs, hinges=self.hinges)
        r0 = r[:, 0]
        jac = (r[:, 1:] - r0[:, None]).transpose(1, 2) / DIFFERENCE_STEP  # (F, 15N, 75 [+ B])
        body_pose = x[:, 3:72]
        prior_e, prior_h, prior_g = terms.prior_model(body_pose)
        e0 = (r0 * r0).sum(-1) + prior_e
        jx = jac[..., :75]
        jac_t = jx.transpose(1, 2)
        hess = jac_t @ jx
        grad = (jac_t @ r0[..., None])[..., 0]
        hess = hess + functional.pad(prior_h, (3, 3, 3, 3))
        grad = grad + functional.pad(prior_g, (3, 3))
        diag = torch.diagonal(hess, dim1=1, dim2=2)
        damped = hess + torch.diag_embed(lam[:, None] * diag + 1e-9)
        part = _Linear(idx, x, base, obs, e0, pp[:, 0])
        if not free_betas:
            part.a_g = torch.linalg.solve(damped, grad)
            return part
        jb = jac[..., 75:]  # (F, 15N, B)
        h_xb = jac_t @ jb  # (F, 75, B)
        solved = torch.linalg.solve(damped, torch.cat([grad[..., None], h_xb], dim=2))
        part.a_g, part.a_h = solved[..., 0], solved[..., 1:]  # A⁻¹g (F, 75), A⁻¹H_xβ (F, 75, B)
        jb_t = jb.transpose(1, 2)
        # each frame's share of the reduced system: H_ββ − H_βx A⁻¹ H_xβ, and of the betas'
        # gradient J_βᵀr, less H_βx A⁻¹ g once its own step is taken
        h_bx = h_xb.transpose(1, 2)
        part.schur = jb_t @ jb - h_bx @ part.a_h
        part.grad_b = (jb_t @ r0[..., None])[..., 0]
        part.rhs = (h_bx @ part.a_g[..., None])[..., 0]
        return part

    def _shape_step(self, st: SequenceState) -> None:
        """One LM step of the betas, each frame's pose following (module docstring); kept where
        it lowers E, else retried with more damping, at most :data:`SHAPE_TRIES` times."""
        nb = st.betas.shape[0]
        eye = torch.eye(nb, **self.kw)
        w = self.terms.betas_weight
        schur = st.schur.sum(0) + w * eye
        rhs = st.rhs.sum(0) + w * (st.betas - self.betas_centre)
        e0 = self.evaluate(st)[0] if st.energy is None else st.energy
        floor, factor, cap = DAMPING
        lam = st.betas_damping
        for _ in range(SHAPE_TRIES):
            damped = schur + lam * torch.diag(torch.diagonal(schur)) + 1e-9 * eye
            d_b = -torch.linalg.solve(damped, rhs)
            x, base = _rebased(st.x - (st.follow @ d_b[:, None])[..., 0], st.base)
            trial = SequenceState(x, base, st.betas + d_b, st.plates, st.damping)
            e1, plates1, _ = self.evaluate(trial)
            if torch.isfinite(e1) and e1 < e0:
                st.x, st.base, st.betas, st.plates, st.energy = x, base, trial.betas, plates1, e1
                st.betas_damping = max(floor, lam / factor)
                return
            lam = min(cap, lam * factor)
        st.betas_damping = lam


@dataclass
class _Linear:
    """Frames' terms and Gauss–Newton model at one state: the frames, their unknowns and base,
    observations, E of their terms (F,), plates (F, N, 3); A⁻¹g (F, 75) (A: the damped H) and,
    with the betas, A⁻¹H_xβ (F, 75, B), each frame's share of the reduced system
    H_ββ − H_βx A⁻¹ H_xβ (F, B, B), its J_βᵀr (F, B) and H_βx A⁻¹ g (F, B)."""

    idx: torch.Tensor
    x: torch.Tensor
    base: torch.Tensor
    obs: tuple
    e0: torch.Tensor
    plates: torch.Tensor
    a_g: torch.Tensor | None = None
    a_h: torch.Tensor | None = None
    schur: torch.Tensor | None = None
    rhs: torch.Tensor | None = None
    grad_b: torch.Tensor | None = None


def _rebased(x: torch.Tensor, base: torch.Tensor):
    """(x with ω zero, exp(ω)·base): the same rotations, the correction moved into the base."""
    new_base = roma.rotvec_to_rotmat(x[:, :3]) @ base
    return torch.cat([torch.zeros_like(x[:, :3]), x[:, 3:]], dim=1), new_base


@dataclass
class SweepRecord:
    """What :func:`run_sweeps` recorded at one sweep count: the count, E, seconds since the
    start (recording excluded) and what ``on_record`` returned."""

    sweeps: int
    objective: float
    seconds: float
    extra: object = None


def run_sweeps(
    lm: SequenceLM,
    st: SequenceState,
    *,
    sweeps: int,
    tolerance: float,
    free_betas: bool,
    record_at: tuple[int, ...] = (),
    on_record: Callable[[SequenceState], object] | None = None,
    started: float | None = None,
    cold: bool = True,
) -> tuple[list[SweepRecord], int, bool]:
    """Sweep until converged (a sweep lowering E by less than ``tolerance`` per frame; 0: never) or
    ``sweeps`` sweeps. ``record_at``: sweep counts where E, the time and ``on_record(st)`` are
    noted (the last sweep always is). ``started``: the clock reading the times count from
    (default now). ``cold``: the start was read off the plates, not another method's answer:
    the first :data:`FRAME_BY_FRAME` sweeps leave the smoothness out and the first
    :data:`POSE_FIRST` hold the betas.

    Returns:
        (the records, sweeps run, whether it converged).
    """
    lm.sync()
    t0 = time.perf_counter() if started is None else started
    paused = 0.0
    records: list[SweepRecord] = []

    def note(k: int, e: float) -> None:
        nonlocal paused
        lm.sync()
        now = time.perf_counter()
        extra = on_record(st) if on_record is not None else None
        lm.sync()
        records.append(SweepRecord(k, e, now - t0 - paused, extra))
        paused += time.perf_counter() - now

    st.energy = lm.evaluate(st)[0]
    e = float(st.energy)
    if 0 in record_at:
        note(0, e)
    done, converged = 0, False
    while done < sweeps:
        pose_first, frame_by_frame = (POSE_FIRST, FRAME_BY_FRAME) if cold else (0, 0)
        lm.sweep(st, free_betas and done >= pose_first, smooth=done >= frame_by_frame)
        done += 1
        st.energy = lm.evaluate(st)[0]
        e_new = float(st.energy)
        # the frame-by-frame sweeps do not minimise E (they leave out its smoothness term)
        warm = done <= frame_by_frame
        converged = tolerance > 0 and not warm and e - e_new < tolerance * lm.frames
        e = e_new
        if converged or done == sweeps:
            break
        if done in record_at:
            note(done, e)
    if not records or records[-1].sweeps != done:
        note(done, e)
    return records, done, converged
