"""The calibration fit over frames: betas, each frame's pose and each plate's constant offset.

Unknowns: the shape β (B,); per frame f its root rotation, body pose θ_f (23 axis-angles) and
translation τ_f; per plate i its offset (R_off,i, t_i) in the virtual plate's frame. The virtual
plates (p_v, R_v)(β, θ_f, τ_f) come from sparse skinning of the plate vertices; the physical plate
predicted is ``p̂ = p_v + R_v t_i``, ``R̂ = R_v R_off,i``. The objective:

    E = Σ_f Σ_i v_fi (‖p̂_fi − p_fi‖² / σ_p² + ∠(R̂_fi, R_fi)² / σ_r²)      data
      + w_θ Σ_f NLL_GMM(θ_f)                                               pose prior
      + ‖β‖² / σ_β² + w_bound Σ_k max(0, |β_k| − β_max)²                  shape prior
      + Σ_i (‖t_i‖² / σ_t² + ∠(R_off,i)² / σ_R²)                           offset prior

It runs in stages from the start of :mod:`rbmcap.calibrate.start` (each frame's heading, each
plated bone turned with its plate since a reference frame), the first two stages once from the
reference frame in the rest pose and once with its arms lowered (:data:`REFERENCE_ARMS_DEG`),
the rest from the better:

1. **pose**: the body pose and placement from plate positions (offsets held at zero) and from
   each plate's rotation since its reference frame, ``R_v(f) R_v(ref)ᵀ`` against
   ``R(f) R(ref)ᵀ``, which no constant rotation offset changes;
2. **positions**: the same with shape and position offsets free;
3. **full**: each rotation offset starts at the mean of ``R_vᵀ R`` over the frames (so a plate
   turned by any angle starts close), then everything is fitted with the rotation residuals on;
4. **restart**: the poses found again from the start with the offsets held, then everything
   refined; the answer of lower objective is kept.

Unknowns are optimised divided by a scale each (radians 0.1, metres 0.01, shared unknowns also by
√F), so L-BFGS's scaled-identity curvature guess fits them all; a shared turn per bone
(:func:`shared_turns`) lets a stage move every frame's pose at once.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import roma
import torch

from rbmcap.baseline.init import dominant_joints
from rbmcap.baseline.objective import compose_rotmats
from rbmcap.calibrate.calibration import to_physical
from rbmcap.calibrate.start import (
    REFERENCE_ARMS_DEG,
    headings,
    leg_plates,
    lowered_arms,
    mean_translation,
    propagated_pose,
    side_pairs,
    upright_rotation,
)
from rbmcap.geometry.registration import nearest_rotation
from rbmcap.geometry.rotations import rotmat_geodesic_angle
from rbmcap.markers.plates import plate_frames
from rbmcap.skeleton import SMPL_PARENTS


def shared_turns(rotmats: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Local rotations (F, 24, 3, 3) with every bone j turned by the same rotation exp(q_j) in
    its own frame in every frame, its children turned back: ``L'_j = exp(q_p(j))ᵀ L_j exp(q_j)``.

    Each bone's global rotation becomes ``G_j exp(q_j)`` and the joints below it do not move. A
    constant turn of a bone and the opposite turn of its plate's offset leave the plates where
    they were; with ``q`` (24, 3) as unknowns of their own, the fit slides along that family in
    one step instead of moving every frame.
    """
    turn = roma.rotvec_to_rotmat(q)
    parent = turn[list(SMPL_PARENTS[1:])]
    first = rotmats[:, :1] @ turn[:1]
    rest = parent.transpose(-1, -2) @ rotmats[:, 1:] @ turn[1:]
    return torch.cat([first, rest], dim=1)


@dataclass(frozen=True)
class FitWeights:
    """Scales and weights of the calibration objective (module docstring).

    Attributes:
        position_sigma_mm, rotation_sigma_deg: data residual scales.
        prior: weight of the pose prior's negative log-likelihood per frame.
        pose_l2: weight of ‖θ‖² per frame (without a prior, or in addition).
        betas_sigma: σ_β of the Gaussian shape prior (SMPL's betas are unit-variance).
        betas_max: |β| beyond which the bound penalty starts; betas_bound: its weight.
        offset_sigma_m: σ_t of the position offsets' prior (m).
        offset_sigma_deg: σ_R of the rotation offsets' prior (deg).
    """

    position_sigma_mm: float = 10.0
    rotation_sigma_deg: float = 5.0
    prior: float = 0.3
    pose_l2: float = 0.0
    betas_sigma: float = 1.0
    betas_max: float = 2.5
    betas_bound: float = 100.0
    offset_sigma_m: float = 0.1
    offset_sigma_deg: float = 90.0


@dataclass
class FitState:
    """Where a fit stands (float64, CPU).

    Attributes:
        rotmats: (F, 24, 3, 3) local rotations; trans: (F, 3) m; betas: (B,).
        r_off: (N, 3, 3) rotation offsets; t_off: (N, 3) position offsets (m), plate frame.
    """

    rotmats: torch.Tensor
    trans: torch.Tensor
    betas: torch.Tensor
    r_off: torch.Tensor
    t_off: torch.Tensor


def _scaled_start(state: FitState, num_frames: int) -> tuple[dict, dict]:
    """The scale of each unknown of a stage and its starting value (float64, unscaled).

    The unknowns: ``omega`` (F, 3) turn of the root from its current rotation, ``body``
    (F, 23, 3) rotation vectors, ``trans`` (F, 3) m, ``betas`` (B,), ``rho`` (N, 3) turn of each
    rotation offset from its current value, ``t`` (N, 3) position offsets (m), ``q`` (24, 3)
    shared turns. Unknowns shared by all frames get scales divided by sqrt(F).
    """
    sf = math.sqrt(num_frames)
    dt = torch.float64
    scales = {
        "omega": 0.1,
        "body": 0.1,
        "trans": 0.01,
        "betas": 0.1 / sf,
        "rho": 0.1 / sf,
        "t": 0.01 / sf,
        "q": 0.1 / sf,
    }
    start = {
        "omega": torch.zeros(num_frames, 3, dtype=dt),
        "body": roma.rotmat_to_rotvec(state.rotmats[:, 1:]),
        "trans": state.trans.clone(),
        "betas": state.betas.clone(),
        "rho": torch.zeros(state.r_off.shape[0], 3, dtype=dt),
        "t": state.t_off.clone(),
        "q": torch.zeros(24, 3, dtype=dt),
    }
    return scales, start


def _lbfgs(params: list[torch.Tensor], iterations: int) -> torch.optim.LBFGS:
    """L-BFGS with a strong-Wolfe line search running ``iterations`` steps in one ``step``."""
    return torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=iterations,
        history_size=50,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-9,
        tolerance_change=1e-12,
    )


class SessionFit:
    """The calibration objective over F frames of N plates (see the module docstring).

    Args:
        synth: a :class:`rbmcap.markers.synth.Synthesizer` (body, marker set, plate topology).
        pos: (F, N, 3) observed plates (m); rot: (F, N, 3, 3); valid: (F, N) bool.
        prior: a :class:`rbmcap.baseline.prior.GaussianMixturePrior` or None.
        weights: :class:`FitWeights`.
        betas: (B,) the shape, held fixed; None to fit it.
    """

    def __init__(self, synth, pos, rot, valid, prior=None, weights=FitWeights(), betas=None):
        dt = torch.float64
        self.body = copy.deepcopy(synth.body).to(dtype=dt)
        self.topology = synth.topology
        self.standoff = synth.standoff
        self.root = synth.markers.parents.index(-1)
        self.names = list(synth.markers.names)
        self.parents = list(synth.markers.parents)
        self.dominant = dominant_joints(synth.body, synth.vertex_ids)
        self.pos = torch.as_tensor(pos, dtype=dt)
        self.rot = torch.as_tensor(rot, dtype=dt)
        self.valid = torch.as_tensor(valid, dtype=torch.bool)
        self.w = self.valid.to(dt)
        self.reference = self.valid.to(torch.int8).argmax(0)
        """(N,) each plate's reference frame for relative rotations: the first where it is seen."""
        self.prior = None if prior is None else prior.to("cpu", dt)
        self.weights = weights
        nb = self.body.num_betas
        self.betas_fixed = betas is not None
        b = torch.zeros(nb, dtype=dt)
        if betas is not None:
            given = torch.as_tensor(betas, dtype=dt).reshape(-1)[:nb]
            b[: len(given)] = given
        self.state = self._start(b)

    @property
    def num_frames(self) -> int:
        return int(self.pos.shape[0])

    # ---------------------------------------------------------------------------- model
    def virtual(self, rotmats, betas, trans) -> tuple[torch.Tensor, torch.Tensor]:
        """Virtual plates (F, N, 3), (F, N, 3, 3) of the posed body."""
        skinned = self.body.skin_vertices(self.topology.skin_ids, rotmats, betas, trans)
        return plate_frames(skinned, self.topology, self.standoff)

    def physical(self, state: FitState) -> tuple[torch.Tensor, torch.Tensor]:
        """Predicted physical plates (F, N, 3), (F, N, 3, 3): virtual plates with the offsets."""
        vp, vr = self.virtual(state.rotmats, state.betas, state.trans)
        return to_physical(vp, vr, state.r_off, state.t_off)

    def residuals(self, state: FitState) -> tuple[torch.Tensor, torch.Tensor]:
        """Per frame and plate: position error (F, N) mm and rotation error (F, N) degrees
        (NaN where the plate is not seen)."""
        with torch.no_grad():
            p, r = self.physical(state)
            dp = (p - self.pos).norm(dim=-1) * 1000.0
            dr = torch.rad2deg(rotmat_geodesic_angle(r, self.rot))
        nan = torch.full_like(dp, float("nan"))
        return torch.where(self.valid, dp, nan), torch.where(self.valid, dr, nan)

    def residual_vector(self, state: FitState) -> torch.Tensor:
        """(F, 6N) the data residuals, scaled: position errors / σ_p and rotation errors
        (rotation vector of ``Rᵀ R̂``) / σ_r, zero where a plate is not seen."""
        with torch.no_grad():
            p, r = self.physical(state)
            dp = (p - self.pos) / (self.weights.position_sigma_mm * 1e-3)
            dr = roma.rotmat_to_rotvec(self.rot.transpose(-1, -2) @ r)
            dr = dr / math.radians(self.weights.rotation_sigma_deg)
            res = torch.cat([dp, dr], -1) * self.w[..., None]
        return res.reshape(self.num_frames, -1)

    # ----------------------------------------------------------------------------- start
    def _start(self, betas: torch.Tensor, arms_deg: float = 0.0) -> FitState:
        """Rest pose (arms lowered by ``arms_deg``, :func:`lowered_arms`) turned to each frame's
        heading, each plated bone then turned with its plate (:func:`propagated_pose`), placed on
        the plates; zero offsets."""
        n, f = self.pos.shape[1], self.num_frames
        up = upright_rotation()
        eye = torch.eye(3, dtype=torch.float64)
        rest = eye.expand(24, 3, 3).clone()
        rest[0] = up
        rest_pos, _ = self.virtual(rest[None], betas, torch.zeros(1, 3, dtype=torch.float64))
        rest_pos = rest_pos[0]
        heads = headings(
            rest_pos,
            self.pos,
            self.valid,
            side_pairs(self.names),
            leg_plates(rest_pos, self.root),
            self.root,
        )
        rotmats = lowered_arms(eye.expand(f, 24, 3, 3).clone(), arms_deg)
        rotmats[:, 0] = heads @ up
        rotmats = propagated_pose(rotmats, self.rot, self.valid, self.dominant)
        zero = torch.zeros(f, 3, dtype=torch.float64)
        vp, _ = self.virtual(rotmats, betas, zero)
        trans = mean_translation(vp, self.pos, self.valid)
        return FitState(
            rotmats,
            trans,
            betas,
            eye.expand(n, 3, 3).clone(),
            torch.zeros(n, 3, dtype=torch.float64),
        )

    # ----------------------------------------------------------------------------- stages
    def run(self, iterations: tuple[int, int, int] = (60, 150, 300), restarts: int = 1) -> FitState:
        """The three stages (module docstring). The first two run from each start: the current
        state and the starts with the arms lowered by each of :data:`REFERENCE_ARMS_DEG` beyond
        the first (the reference frame's pose decides the basin: a static with the arms down is
        far from the rest pose); the full stage goes on from the one of lowest objective. Then
        ``restarts`` times: the poses found again from that start with the offsets held (a pose
        search that knows the offsets), and every unknown refined. The state of lowest objective
        is kept and returned."""
        a, b, c = iterations
        best, energy, arms = None, math.inf, 0.0
        starts = [(REFERENCE_ARMS_DEG[0], self.state)]
        starts += [(d, self._start(self.state.betas, d)) for d in REFERENCE_ARMS_DEG[1:]]
        for deg, start in starts:
            st = self._stage(start, a, betas=False, offsets=False, rotation=False, relative=True)
            st = self._stage(st, b, betas=True, offsets=True, rotation=False, relative=True)
            st.r_off = self.mean_rotation_offsets(st)
            e = self.energy(st)
            if e < energy:
                best, energy, arms = st, e, deg
        best = self._stage(best, c, betas=True, offsets=True, rotation=True)
        energy = self.energy(best)
        for _ in range(restarts):
            st = self._start(best.betas, arms)
            st.r_off, st.t_off = best.r_off.clone(), best.t_off.clone()
            st = self._stage(st, b, betas=False, offsets=False, rotation=True)
            st = self._stage(st, c, betas=True, offsets=True, rotation=True)
            e = self.energy(st)
            if e >= energy:
                break
            best, energy = st, e
        self.state = best
        return best

    def fit_poses(self, iterations: int = 200) -> FitState:
        """Each frame's pose with the shape and offsets of the current state held (every residual
        on); returns and keeps the state."""
        self.state = self._stage(self.state, iterations, betas=False, offsets=False, rotation=True)
        return self.state

    def energy(self, state: FitState) -> float:
        """The objective's value at ``state``."""
        with torch.no_grad():
            return float(sum(self.terms(state).values()))

    def mean_rotation_offsets(self, state: FitState) -> torch.Tensor:
        """(N, 3, 3) the chordal mean over seen frames of ``R_vᵀ R`` for each plate."""
        with torch.no_grad():
            _, vr = self.virtual(state.rotmats, state.betas, state.trans)
            rel = vr.transpose(-1, -2) @ self.rot
            total = (rel * self.w[..., None, None]).sum(0)
        return nearest_rotation(total)

    def _stage(
        self,
        state: FitState,
        iterations: int,
        *,
        betas: bool,
        offsets: bool,
        rotation: bool,
        relative: bool = False,
    ) -> FitState:
        """``iterations`` of L-BFGS from ``state`` over the root turn, body pose, translation and
        shared turns, plus the shape (``betas``), the position offsets (``offsets``) and the
        rotation offsets (``offsets`` and ``rotation``); each unknown is scaled to order one."""
        if iterations <= 0:
            return state
        root_base = state.rotmats[:, 0].clone()
        scales, start = _scaled_start(state, self.num_frames)
        free = ["omega", "body", "trans", "q"]
        if betas and not self.betas_fixed:
            free.append("betas")
        if offsets:
            free.append("t")
            if rotation:
                free.append("rho")
        x = {k: (start[k] / scales[k]).requires_grad_(k in free) for k in start}
        r_off0 = state.r_off

        def unpack() -> FitState:
            v = {k: x[k] * scales[k] for k in x}
            rotmats = shared_turns(compose_rotmats(v["omega"], root_base, v["body"]), v["q"])
            r_off = roma.rotvec_to_rotmat(v["rho"]) @ r_off0
            return FitState(rotmats, v["trans"], v["betas"], r_off, v["t"])

        opt = _lbfgs([x[k] for k in free], iterations)

        def closure() -> torch.Tensor:
            opt.zero_grad()
            s = unpack()
            terms = self.terms(s, rotation=rotation, relative=relative)
            loss = sum(terms.values())
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            out = unpack()
        return FitState(
            *(t.detach().clone() for t in (out.rotmats, out.trans, out.betas, out.r_off, out.t_off))
        )

    def terms(self, state: FitState, *, rotation: bool = True, relative: bool = False) -> dict:
        """The objective's terms (scalars): position, rotation (or ``relative``: the rotation of
        each plate since its reference frame, which no constant offset changes), prior, betas,
        offsets."""
        wt = self.weights
        vp, vr = self.virtual(state.rotmats, state.betas, state.trans)
        p, r = to_physical(vp, vr, state.r_off, state.t_off)
        sp = wt.position_sigma_mm * 1e-3
        out = {"position": (self.w * ((p - self.pos) ** 2).sum(-1)).sum() / sp**2}
        sr = math.radians(wt.rotation_sigma_deg)
        if rotation:
            ang = rotmat_geodesic_angle(r, self.rot)
            out["rotation"] = (self.w * ang**2).sum() / sr**2
        elif relative:
            n = torch.arange(vr.shape[1])
            pred = vr @ vr[self.reference, n].transpose(-1, -2)
            obs = self.rot @ self.rot[self.reference, n].transpose(-1, -2)
            ang = rotmat_geodesic_angle(pred, obs)
            out["rotation"] = (self.w * ang**2).sum() / sr**2
        body = roma.rotmat_to_rotvec(state.rotmats[:, 1:])  # (F, 23, 3)
        prior = p.new_zeros(())
        if self.prior is not None and wt.prior > 0:
            prior = wt.prior * self.prior.neg_log_likelihood(body).sum()
        if wt.pose_l2 > 0:
            prior = prior + wt.pose_l2 * (body**2).sum()
        out["prior"] = prior
        b = state.betas
        excess = torch.relu(b.abs() - wt.betas_max)
        out["betas"] = (b**2).sum() / wt.betas_sigma**2 + wt.betas_bound * (excess**2).sum()
        off_angle = rotmat_geodesic_angle(state.r_off, torch.eye(3, dtype=b.dtype))
        out["offsets"] = (state.t_off**2).sum() / wt.offset_sigma_m**2 + (
            off_angle**2
        ).sum() / math.radians(wt.offset_sigma_deg) ** 2
        return out
