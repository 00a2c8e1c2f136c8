"""One frame of the solver's objective, minimised by Levenberg–Marquardt steps: the kernel of
live refinement (:mod:`rbmcap.inference.refine`).

For each of S subjects, one frame t is solved with the betas held, against the same objective as
:mod:`rbmcap.baseline.objective`, restricted to that frame and to the past:

    E = Σ_i v_i (‖p̂_i − p_i‖² / σ_p² + θ(R̂_i, R_i)² / σ_r²)              data
      + w_prior · NLL_GMM(θ_body) + w_l2 · ‖θ_body‖²                        pose prior
      + s · Σ_i ‖(p̂_i − 2 c¹_i + c²_i) · fps²‖² / σ_a²                     smoothness
      + Σ_k m_k ‖J_k − c_k‖² / σ_j²                                           joint centres
      + Σ_h ‖(I − a_h a_hᵀ) θ_h‖² / σ_h²                                        hinges

with c¹, c² the predicted plate positions of the two frames solved before (held; ``s`` is 1 when
there are two, else 0), J_k the body's 24 joints and c_k the centres a calibration measured from
the plates' motion, where this frame's plates put them
(:func:`rbmcap.calibrate.functional.joint_centres`; m_k is 1 where a plate of joint k is seen,
else 0: for a subject without measured joints every m_k is zero and the term vanishes), θ_h the
axis-angle of each calibrated hinge h (a knee or elbow that turned about one axis a_h in the
calibration's takes, :func:`rbmcap.calibrate.functional.hinge_axes`) and σ_h the solver's
``hinge_sigma_deg`` (0: no hinges), the rest as in the solver. The hinge term is quadratic in θ
with a constant Hessian, as the pose L2 term: each subject's ``hinges`` (S, 23, 3, 3) hold
(I − a aᵀ) for its hinges and zeros elsewhere, so the kernels' shapes do not depend on them.
The unknowns are x = (ω (3), θ_body (69)) and the translation t (3): the global orientation is
exp(ω)·R_base, a correction of the start's R_base, as in the solver.

The data and smoothness terms are a sum of squared residuals r(x, t): the plate position errors
over σ_p, the plate rotation errors as rotation vectors log(R_iᵀ R̂_i) over σ_r (their squared
norm is θ²), the accelerations, and the joints' offsets from their centres over σ_j (always
24 × 3, masked: the kernels' shapes do not depend on which joints were measured). The GMM's
negative log-likelihood is, near x, its dominant component's 0.5‖Lₖᵀ(θ − μₖ)‖² plus a constant
(Lₖ: that component's precision factor), a residual √(w_prior/2)·Lₖᵀ(θ − μₖ). One step
(:class:`LMStep`):

    J = ∂r/∂x        forward differences of the plates' skin vertices moved along their exact
                     tangents (one skinning pass and its derivative,
                     :meth:`~rbmcap.body.BodyModel.skin_vertex_tangents`, not 72 skinnings),
                     through the plate frames and residuals
    ∂r/∂t            exact: the identity over σ_p for a seen plate's position, fps²/σ_a for its
                     acceleration, m_k/σ_j for a joint, zero for rotations
    H = JᵀJ + Hₚ,  g = Jᵀr + gₚ
    δ = −(H + λ diag(H))⁻¹ g

so a step costs one skinning with its tangents, the plate frames of 73 vertex sets, a 75×75
solve and no autograd. Each step also keeps the best iterate and adapts λ
(Levenberg–Marquardt): where the pose it evaluates raised E, the next step is retaken from the
best with more damping. :class:`FrameStart` picks where a frame's steps start and
:class:`FrameFinish` evaluates the last step's pose and forms the answer. Each module is a fixed
sequence of tensor operations on fixed shapes (no Python between them, no data-dependent
branches), so it can be traced or compiled ahead of time.
"""

from __future__ import annotations

import math

import roma
import torch
from torch.nn import functional

from rbmcap.baseline.config import WeightsConfig
from rbmcap.baseline.prior import PRIOR_JOINTS, GaussianMixturePrior
from rbmcap.errors import ConfigError
from rbmcap.markers.plates import PlateTopology, plate_frames

UNKNOWNS = 72
"""Unknowns of a frame's pose: the global orientation's correction ω (3) and the body's
axis-angle (23 × 3); the translation (3) comes on top."""

JOINTS = 24
"""The body's joints, each with a joint-centre residual (zero where no centre is seen)."""

DIFFERENCE_STEP = 1e-3
"""Forward-difference step of the Jacobian (radians): in float32 its rounding error (~1e-4 of a
column) and its truncation error (~1e-3) are both far below what a Gauss–Newton step needs."""


class FrameTerms(torch.nn.Module):
    """The residuals and the objective of one frame (see the module docstring), shared by
    :class:`FrameStart`, :class:`LMStep` and :class:`FrameFinish`.

    Args:
        body: the body model (float32 or float64; every tensor follows its dtype and device).
        topology: the marker set's plate topology (6-DoF plates).
        weights: the solver's weights (σ_p, σ_r, prior, pose L2, σ_a, σ_j; the betas are held).
        prior: the GMM pose prior over joints 1..23, or None.
        fps: the stream's frame rate (Hz), for the smoothness term.
    """

    def __init__(
        self,
        body,
        topology: PlateTopology,
        weights: WeightsConfig,
        prior: GaussianMixturePrior | None,
        fps: float,
    ) -> None:
        super().__init__()
        # Held outside the module tree, as the stream's step holds its model: a trace or an
        # export records the body's arrays as constants.
        object.__setattr__(self, "body", body)
        self.topology = topology
        ref = body.v_template
        kw = {"dtype": ref.dtype, "device": ref.device}
        self.position_scale = 1.0 / (weights.position_sigma_mm * 1e-3)
        self.rotation_scale = 1.0 / math.radians(weights.rotation_sigma_deg)
        self.accel_scale = fps**2 / weights.accel_sigma if weights.accel_sigma > 0 else 0.0
        self.joint_scale = 1.0 / (weights.joints_sigma_mm * 1e-3)
        hinge = float(weights.hinge_sigma_deg)
        self.hinge_weight = 1.0 / math.radians(hinge) ** 2 if hinge > 0 else 0.0
        self.pose_l2 = float(weights.pose_l2)
        self.prior_weight = float(weights.prior) if prior is not None else 0.0
        if prior is not None and tuple(prior.joints) != PRIOR_JOINTS:
            raise ConfigError(
                f"the pose prior covers joints {list(prior.joints)}: refinement needs one over "
                f"joints 1..23"
            )
        if self.prior_weight > 0:
            prior = prior.to(ref.device, ref.dtype)
            self.register_buffer("prior_means", prior.means, persistent=False)  # (K, 69)
            self.register_buffer("prior_factors", prior._prec_chol, persistent=False)  # (K,69,69)
            self.register_buffer("prior_norms", prior._log_norm, persistent=False)  # (K,)
        self.register_buffer("eye3", torch.eye(3, **kw), persistent=False)

    @property
    def residual_count(self) -> int:
        """Residuals per frame: position, rotation and acceleration, 3 each per plate, and 3 per
        joint (24)."""
        return 9 * len(self.topology.centre) + 3 * JOINTS

    def residuals(
        self,
        x,
        trans,
        base,
        betas,
        offsets,
        pos,
        rot,
        valid,
        context,
        smooth,
        centres,
        seen,
        hinges,
    ):
        """The residuals r at R poses of each subject.

        Args:
            x: (S, R, 72) unknowns (ω, then the body's axis-angle); trans: (S, R, 3) m, or
                (S, 1, 3) for every pose; base: (S, 3, 3) or (S, R, 3, 3), the global
                orientation ω corrects; betas: (S, B); offsets: (S, 24, 3) m each subject's
                joint correction (:meth:`rbmcap.body.BodyModel.with_joint_offsets`).
            pos, rot, valid: (S, N, 3), (S, N, 3, 3), (S, N) the observed plates (invalid
                entries may hold anything, NaN included).
            context: (S, 2, N, 3) predicted plate positions of the frames t−2 and t−1;
            smooth: (S,) 1 where the context holds two solved frames, else 0.
            centres, seen: (S, 24, 3) m the joint centres the plates put the joints at, and
                (S, 24) bool where there is one (unseen entries may hold anything).
            hinges: (S, 23, 3, 3) each body joint's (I − a aᵀ) where it is a hinge, else zero
                (not a residual here: :meth:`hinge_terms`).

        Returns:
            (residuals (S, R, 9N + 72), predicted plate positions (S, R, N, 3)).
        """
        rotmats = self.rotmats(x, base)
        skinned, joints = self.body.skin_vertices_and_joints(
            self.topology.skin_ids, rotmats, betas[:, None], trans, offsets[:, None]
        )
        return self.residuals_of(skinned, joints, pos, rot, valid, context, smooth, centres, seen)

    def rotmats(self, x, base):
        """Local rotations (S, R, 24, 3, 3) of unknowns x (S, R, 72) about the global
        orientation ``base`` (S, 3, 3) or (S, R, 3, 3)."""
        s, r = x.shape[:2]
        base = base.reshape(s, -1, 3, 3)
        root = roma.rotvec_to_rotmat(x[..., :3]) @ base
        joints = roma.rotvec_to_rotmat(x[..., 3:].reshape(s, r, 23, 3))
        return torch.cat([root[:, :, None], joints], dim=2)

    def residuals_of(self, skinned, joints, pos, rot, valid, context, smooth, centres, seen):
        """The residuals of R sets of the plates' skin vertices ``skinned`` (S, R, K, 3) and the
        joints (S, R, 24, 3) (the rest as :meth:`residuals`): (residuals (S, R, 9N + 72), plate
        positions (S, R, N, 3))."""
        pp, pr = plate_frames(skinned, self.topology)
        pos = torch.where(valid[..., None], pos, torch.zeros_like(pos))
        centres = torch.where(seen[..., None], centres, torch.zeros_like(centres))
        rot = torch.where(valid[..., None, None], rot, self.eye3)
        weight = valid[:, None, :, None].to(pp.dtype)
        r_pos = (pp - pos[:, None]) * (weight * self.position_scale)
        r_rot = rotation_residual(rot[:, None], pr) * (weight * self.rotation_scale)
        accel = pp - 2.0 * context[:, None, 1] + context[:, None, 0]
        r_acc = accel * (smooth[:, None, None, None] * self.accel_scale)
        r_joint = (joints - centres[:, None]) * (
            seen[:, None, :, None].to(pp.dtype) * self.joint_scale
        )
        return torch.cat([r_pos, r_rot, r_acc, r_joint], dim=-2).flatten(-2), pp

    def prior_terms(self, body_pose):
        """The pose prior at ``body_pose`` (S, 69): (its objective (S,), the Gauss–Newton
        residual (S, 69) and Jacobian (S, 69, 69) of its dominant component, both scaled so
        that ‖residual‖² is the component's share of the objective)."""
        s = body_pose.shape[0]
        zero = body_pose.new_zeros(s)
        if self.prior_weight <= 0:
            return zero, body_pose.new_zeros(s, 69), body_pose.new_zeros(s, 69, 69)
        diff = body_pose[:, None] - self.prior_means  # (S, K, 69)
        white = torch.einsum("skd,kde->ske", diff, self.prior_factors)
        log_density = self.prior_norms - 0.5 * (white * white).sum(-1)  # (S, K)
        nll = -torch.logsumexp(log_density, dim=-1)
        k = log_density.argmax(dim=-1)
        root_half = math.sqrt(0.5 * self.prior_weight)
        residual = root_half * white.gather(1, k[:, None, None].expand(s, 1, 69))[:, 0]
        jacobian = root_half * self.prior_factors[k].transpose(-1, -2)
        return self.prior_weight * nll, residual, jacobian

    def hinge_terms(self, body_pose, hinges):
        """The hinges at ``body_pose`` (S, R, 69) or (S, 69), with ``hinges`` (S, 23, 3, 3)
        (:meth:`residuals`): (their objective (S, R) or (S,), its constant Hessian (S, 69, 69)
        over 2: the blocks (I − a aᵀ) / σ_h² on the diagonal)."""
        s = hinges.shape[0]
        weighted = hinges * self.hinge_weight  # (S, 23, 3, 3)
        theta = body_pose.reshape(s, -1, 23, 3)
        e = torch.einsum("srja,sjab,srjb->sr", theta, weighted, theta)
        blocks = torch.diag_embed(weighted.permute(0, 2, 3, 1))  # (S, 3, 3, 23, 23)
        hess = blocks.permute(0, 3, 1, 4, 2).reshape(s, 69, 69)
        return e.reshape(body_pose.shape[:-1]), hess

    def objective(self, r, body_pose, hinges):
        """E (S, R) from the residuals (S, R, 9N + 72) of R poses and their body poses
        (S, R, 69) (or (S,) from (S, 9N + 72) and (S, 69)), with the subjects' ``hinges``."""
        lead = body_pose.shape[:-1]
        prior = self.prior_terms(body_pose.reshape(-1, 69))[0].reshape(lead)
        hinge = self.hinge_terms(body_pose, hinges)[0]
        return self.squares(r) + prior + self.pose_l2 * (body_pose * body_pose).sum(-1) + hinge

    def squares(self, r):
        """‖r‖² (...,) of residuals (..., 9N + 72), the plates' and the joints' summed apart:
        without joint centres (their residuals zero) it is the plates' sum to the last bit, as
        a sum over more terms (a different order of additions) would not be."""
        n = 9 * len(self.topology.centre)
        plates, joints = r[..., :n], r[..., n:]
        return (plates * plates).sum(-1) + (joints * joints).sum(-1)


class FrameStart(torch.nn.Module):
    """Where a frame's steps start: of the previous frame's answer and the network's, the one
    with the lower E (the network's alone where there is no previous answer).

    ``forward(prev_x (S, 72), prev_trans (S, 3), prev_base (S, 3, 3), has_prev (S,) bool,
    net_rotmats (S, 24, 3, 3), net_trans (S, 3), betas, offsets, pos, rot, valid, context, smooth,
    centres, seen, hinges)`` → (x (S, 72), trans (S, 3), base (S, 3, 3), E (S,), predicted plate
    positions (S, N, 3)) of the start, its ω zero (``base`` is its global orientation).
    """

    def __init__(self, terms: FrameTerms) -> None:
        super().__init__()
        self.terms = terms

    def forward(
        self, prev_x, prev_trans, prev_base, has_prev, net_rotmats, net_trans, *observations
    ):
        s = prev_x.shape[0]
        net_x = torch.cat(
            [prev_x.new_zeros(s, 3), roma.rotmat_to_rotvec(net_rotmats[:, 1:]).flatten(1)], dim=1
        )
        keep = has_prev[:, None]
        prev_x = torch.where(keep, prev_x, net_x)
        prev_trans = torch.where(keep, prev_trans, net_trans)
        prev_base = torch.where(keep[..., None], prev_base, net_rotmats[:, 0])
        x = torch.stack([prev_x, net_x], dim=1)  # (S, 2, 72)
        trans = torch.stack([prev_trans, net_trans], dim=1)
        base = torch.stack([prev_base, net_rotmats[:, 0]], dim=1)
        r, pp = self.terms.residuals(x, trans, base, *observations)
        e = self.terms.objective(r, x[..., 3:], observations[-1])  # (S, 2)
        net = e[:, 1] < e[:, 0]
        return (
            torch.where(net[:, None], net_x, prev_x),
            torch.where(net[:, None], net_trans, prev_trans),
            torch.where(net[:, None, None], net_rotmats[:, 0], prev_base),
            torch.where(net, e[:, 1], e[:, 0]),
            torch.where(net[:, None, None], pp[:, 1], pp[:, 0]),
        )


class FrameFinish(torch.nn.Module):
    """A frame's end: E at the last step's pose, kept where it beats the best so far, then the
    frame's answer and what the stream keeps for the next frame.

    ``forward(x (S, 72), trans (S, 3), best_e (S,), best_x, best_trans, best_plates (S, N, 3),
    base, net_rotmats (S, 24, 3, 3), net_trans (S, 3), solved (S,), betas, offsets, pos, rot,
    valid, context, smooth, centres, seen, hinges)`` → (best_e, the answer's local rotations
    (S, 24, 3, 3) and translation (S, 3): the best pose's where a plate is seen, else the
    network's; the next frame's memory: the best unknowns with ω zero (S, 72), the context
    (S, 2, N, 3) of the last two frames' plate positions, the count of frames refined in a row
    (S,) up to 2, and whether this frame was refined (S,) bool).
    """

    def __init__(self, terms: FrameTerms) -> None:
        super().__init__()
        self.terms = terms

    def forward(
        self,
        x,
        trans,
        best_e,
        best_x,
        best_trans,
        best_plates,
        base,
        net_rotmats,
        net_trans,
        solved,
        *observations,
    ):
        terms = self.terms
        r, pp = terms.residuals(x[:, None], trans[:, None], base, *observations)
        e = terms.objective(r[:, 0], x[:, 3:], observations[-1])
        best_e, best_x, best_trans, best_plates = keep_better(
            e, x, trans, pp[:, 0], best_e, best_x, best_trans, best_plates
        )
        valid, context = observations[4], observations[5]
        refined = valid.any(-1)
        rotmats = terms.rotmats(best_x[:, None], base)[:, 0]
        rotmats = torch.where(refined[:, None, None, None], rotmats, net_rotmats)
        trans = torch.where(refined[:, None], best_trans, net_trans)
        memory = torch.cat([torch.zeros_like(best_x[:, :3]), best_x[:, 3:]], dim=1)
        context = torch.stack([context[:, 1], best_plates], dim=1)
        solved = torch.where(refined, (solved + 1).clamp_max(2), torch.zeros_like(solved))
        return best_e, rotmats, trans, memory, context, solved, refined


class LMStep(torch.nn.Module):
    """One Levenberg–Marquardt iteration of each subject's frame (see the module docstring).

    ``forward(x (S, 72), trans (S, 3), damping (S,), best_e (S,), best_x, best_trans,
    best_plates (S, N, 3), base, betas, offsets, pos, rot, valid, context, smooth, centres,
    seen, hinges)``: E
    and its Jacobian
    at x; x becomes the best where E(x) ≤ the best E, and the damping shrinks by
    ``damping_factor`` (not below ``damping_floor``); elsewhere the damping grows by it (up to
    ``damping_cap``). Returns (the next x: the step from x where it was kept, else the best
    again, to be retaken with the larger damping; the next trans; the next damping; best_e,
    best_x, best_trans, best_plates).
    """

    def __init__(
        self,
        terms: FrameTerms,
        damping_floor: float,
        damping_factor: float,
        damping_cap: float,
        step: float = DIFFERENCE_STEP,
    ) -> None:
        super().__init__()
        self.terms = terms
        self.step = float(step)
        self.damping_floor, self.damping_factor = float(damping_floor), float(damping_factor)
        self.damping_cap = float(damping_cap)
        ref = terms.eye3
        kw = {"dtype": ref.dtype, "device": ref.device}
        self.register_buffer("eye69", torch.eye(69, **kw), persistent=False)
        # ∂r/∂t per plate: rows of position residuals (× validity) and of accelerations
        # (× smooth); the rotation rows do not depend on t. Per joint: its rows (× seen).
        n = len(terms.topology.centre)
        self.register_buffer("trans_rows", torch.eye(3, **kw).repeat(n, 1), persistent=False)
        self.register_buffer("joint_rows", torch.eye(3, **kw).repeat(JOINTS, 1), persistent=False)
        self.plates = n

    def forward(
        self, x, trans, damping, best_e, best_x, best_trans, best_plates, base, *observations
    ):
        terms = self.terms
        betas, offsets, *rest, hinges = observations
        r, pp = terms.residuals_of(*self._skin(x, trans, base, betas, offsets), *rest)
        r0 = r[:, 0]
        jac = (r[:, 1:] - r0[:, None]).transpose(1, 2) / self.step  # (S, 9N + 72, 72)
        j_trans = self.trans_jacobian(observations[4], observations[6], observations[8])
        jac = torch.cat([jac, j_trans], dim=2)  # (S, 9N + 72, 75)
        body_pose = x[:, 3:]
        prior_e, prior_r, prior_j = terms.prior_terms(body_pose)
        hinge_e, hinge_h = terms.hinge_terms(body_pose, hinges)
        e = terms.squares(r0) + prior_e + terms.pose_l2 * (body_pose * body_pose).sum(-1)
        e = e + hinge_e
        jac_t = jac.transpose(1, 2)
        hess = jac_t @ jac
        # the plates' rows and the joints' apart (as :meth:`FrameTerms.squares`): one product
        # over more rows adds in another order, and a stream without joint centres would no
        # longer step exactly as without the term
        n = 9 * self.plates
        grad = (jac_t[..., :n] @ r0[:, :n, None] + jac_t[..., n:] @ r0[:, n:, None])[..., 0]
        # the prior's block sits at the body pose's rows and columns 3..71 (pad: ω before, t
        # after)
        prior_jt = prior_j.transpose(1, 2)
        body_h = prior_jt @ prior_j + terms.pose_l2 * self.eye69 + hinge_h
        hess = hess + functional.pad(body_h, (3, 3, 3, 3))
        prior_g = (prior_jt @ prior_r[..., None])[..., 0] + terms.pose_l2 * body_pose
        prior_g = prior_g + (hinge_h @ body_pose[..., None])[..., 0]
        grad = grad + functional.pad(prior_g, (3, 3))
        diag = torch.diagonal(hess, dim1=1, dim2=2)
        damped = hess + torch.diag_embed(damping[:, None] * diag + 1e-9)
        delta = -torch.linalg.solve(damped, grad)
        kept = e <= best_e
        best = keep_better(e, x, trans, pp[:, 0], best_e, best_x, best_trans, best_plates)
        next_x = torch.where(kept[:, None], x + delta[:, :UNKNOWNS], best[1])
        next_trans = torch.where(kept[:, None], trans + delta[:, UNKNOWNS:], best[2])
        f = self.damping_factor
        smaller = (damping / f).clamp_min(self.damping_floor)
        next_damping = torch.where(kept, smaller, (damping * f).clamp_max(self.damping_cap))
        return (next_x, next_trans, next_damping, *best)

    def trans_jacobian(self, valid, smooth, seen):
        """∂r/∂t (S, 9N + 72, 3), exact (the module docstring), from which plates are seen
        (S, N), whether the smoothness term is on (S,) and which joint centres are seen
        (S, 24)."""
        terms, s, n = self.terms, valid.shape[0], self.plates
        dtype = self.trans_rows.dtype
        plates = valid.to(dtype).repeat_interleave(3, dim=1)[..., None]  # (S, 3N, 1)
        joints = seen.to(dtype).repeat_interleave(3, dim=1)[..., None]  # (S, 72, 1)
        return torch.cat(
            [
                self.trans_rows * (plates * terms.position_scale),
                self.trans_rows.new_zeros(s, 3 * n, 3),
                self.trans_rows * (smooth[:, None, None] * terms.accel_scale),
                self.joint_rows * (joints * terms.joint_scale),
            ],
            dim=1,
        )

    def _skin(self, x, trans, base, betas, offsets):
        """The plates' skin vertices (S, 1 + 72, K, 3) and the joints (S, 1 + 72, 24, 3) at x
        (S, 72) and one step along each unknown, from one skinning pass and its tangents."""
        terms = self.terms
        s = x.shape[0]
        rotmats = terms.rotmats(x[:, None], base)[:, 0]  # (S, 24, 3, 3)
        # a step along joint j's unknowns turns it by J_r(x_j) δ in its own frame (exp's right
        # Jacobian); the root's turns about the world axes of exp(ω) first: R_baseᵀ J_r(ω)
        axes = right_jacobian(x.reshape(s, 24, 3))
        axes = torch.cat([base.transpose(-1, -2)[:, None] @ axes[:, :1], axes[:, 1:]], dim=1)
        skinned, tangents, joints, joint_tangents = terms.body.skin_vertex_tangents(
            terms.topology.skin_ids, rotmats, axes, betas, trans, offsets
        )
        return _stepped(skinned, tangents, self.step), _stepped(joints, joint_tangents, self.step)


def right_jacobian(v: torch.Tensor) -> torch.Tensor:
    """exp's right Jacobian J_r(v) (..., 3, 3) at rotation vectors v (..., 3):
    exp(v + δ) = exp(v) exp(J_r(v) δ) to first order;
    J_r = I − (1 − cos θ)/θ² [v]ₓ + (θ − sin θ)/θ³ [v]ₓ², θ = ‖v‖ (series below 1e-2 rad)."""
    theta2 = (v * v).sum(-1, keepdim=True)[..., None]
    theta = theta2.sqrt()
    small = theta < 1e-2
    safe = torch.where(small, torch.ones_like(theta), theta)
    a = torch.where(small, 0.5 - theta2 / 24.0, (1.0 - torch.cos(safe)) / (safe * safe))
    b = torch.where(small, 1.0 / 6.0 - theta2 / 120.0, (safe - torch.sin(safe)) / safe**3)
    x, y, z = v.unbind(-1)
    k = torch.stack(
        [
            torch.stack([torch.zeros_like(x), -z, y], dim=-1),
            torch.stack([z, torch.zeros_like(x), -x], dim=-1),
            torch.stack([-y, x, torch.zeros_like(x)], dim=-1),
        ],
        dim=-2,
    )
    eye = torch.eye(3, dtype=v.dtype, device=v.device)
    return eye - a * k + b * (k @ k)


def _stepped(points: torch.Tensor, tangents: torch.Tensor, step: float) -> torch.Tensor:
    """(S, 1 + 72, P, 3): ``points`` (S, P, 3), then moved ``step`` along each of the 72
    unknowns' ``tangents`` (S, 24, 3, P, 3)."""
    steps = step * tangents.flatten(1, 2)
    return points[:, None] + torch.cat([torch.zeros_like(steps[:, :1]), steps], dim=1)


def keep_better(e, x, trans, plates, best_e, best_x, best_trans, best_plates):
    """(best_e, best_x, best_trans, best_plates) with each subject's entry replaced where E
    ``e`` (S,) at (x (S, 72), trans (S, 3), plates (S, N, 3)) is at most its best."""
    kept = e <= best_e
    return (
        torch.where(kept, e, best_e),
        torch.where(kept[:, None], x, best_x),
        torch.where(kept[:, None], trans, best_trans),
        torch.where(kept[:, None, None], plates, best_plates),
    )


def rotation_residual(observed: torch.Tensor, predicted: torch.Tensor) -> torch.Tensor:
    """The rotation vector of R_obsᵀ R̂ (..., 3): its direction the axis, its norm the geodesic
    angle θ (as :func:`rbmcap.geometry.rotations.rotmat_geodesic_angle`: θ = atan2(sin, cos),
    exact over the whole range), from (..., 3, 3) observed and predicted rotations."""
    m = observed.transpose(-1, -2) @ predicted
    half = 0.5 * torch.stack(
        (m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]),
        dim=-1,
    )  # sin θ · axis
    sin = torch.sqrt((half * half).sum(-1, keepdim=True) + 1e-30)
    cos = 0.5 * (m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2] - 1.0)[..., None]
    return half * (torch.atan2(sin, cos) / sin)
