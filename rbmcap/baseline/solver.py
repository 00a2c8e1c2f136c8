"""The optimisation baseline: fit SMPL to marker observations.

Unknowns: betas (shared by the sequence), and per frame translation, global orientation and the
body pose (axis-angle of joints 1..23). 6-DoF marker sets contribute position and geodesic
orientation residuals, point sets positions only; see :mod:`rbmcap.baseline.objective` for the
objective. The whole sequence is minimised by sweeps of Levenberg–Marquardt, every frame's step
batched (:mod:`rbmcap.baseline.sequence`), until a sweep lowers the objective by less than the
configuration's tolerance. The hybrid mode and offline refinement are ``init=``: start from
another method's answer (the network's) and run a few sweeps.

>>> solver = Solver(body, "rbm14", "default")                   # the shipped pose prior
>>> sol = solver.solve(pos, rot, valid, fps=60, truth_joints=joints, snapshots=True)
>>> sol.params, sol.record.mpjpe_mm, sol.ms_per_frame  # SMPLParams, the curve, the cost
>>> params, seconds = sol.at(10)                       # what a solve stopped at 10 sweeps returns
>>> refined = solver.solve(pos, rot, valid, init=network_params, iterations=3, tolerance=0)
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.baseline.config import SolverConfig, load_solver_config
from rbmcap.baseline.init import dominant_joints, fit_translation, kinematic_rotations
from rbmcap.baseline.prior import GaussianMixturePrior, default_pose_prior, load_pose_prior
from rbmcap.baseline.result import ConvergenceRecord, Solution
from rbmcap.baseline.sequence import SequenceLM, SequenceTerms, run_sweeps
from rbmcap.body.params import SMPLParams
from rbmcap.errors import DataError
from rbmcap.markers.markerset import DEFAULT_MARKERS, MarkerSet, load_marker_set
from rbmcap.markers.plates import plate_topology

DEFAULT_PRIOR = "shipped"
"""``prior=`` of :class:`Solver` that means the pose prior shipped with rbmcap
(:func:`~rbmcap.baseline.prior.default_pose_prior`)."""


class Solver:
    """Fits SMPL parameters to the observations of one marker set on one body.

    Args:
        body: a :class:`rbmcap.body.BodyModel` (copied to ``device``/dtype if it is elsewhere).
        markers: the marker set (a :class:`MarkerSet`, a name or a YAML path); its kind picks
            6-DoF or point residuals.
        config: a :class:`SolverConfig` or a name/path for :func:`load_solver_config`.
        prior: a :class:`GaussianMixturePrior`, a path to its ``.npz``, :data:`DEFAULT_PRIOR`
            (the prior shipped with rbmcap, the default) or None (no pose prior;
            ``weights.pose_l2`` can stand in).
        device: 'cpu', 'cuda', ...

    Raises:
        ConfigError: a prior file that is not a pose prior, or one not over joints 1..23.
    """

    def __init__(
        self,
        body,
        markers: MarkerSet | str = DEFAULT_MARKERS,
        config: SolverConfig | str | Path = "default",
        prior: GaussianMixturePrior | str | Path | None = DEFAULT_PRIOR,
        device: str | torch.device = "cpu",
    ) -> None:
        self.config = config if isinstance(config, SolverConfig) else load_solver_config(config)
        self.device = torch.device(device)
        self.dtype = torch.float64 if self.config.dtype == "float64" else torch.float32
        ref = body.v_template
        if ref.device != self.device or ref.dtype != self.dtype:
            body = copy.deepcopy(body).to(device=self.device, dtype=self.dtype)
        self.body = body
        self.markers = markers if isinstance(markers, MarkerSet) else load_marker_set(markers)
        if isinstance(prior, str) and prior == DEFAULT_PRIOR:
            prior = default_pose_prior()
        elif isinstance(prior, str | Path):
            prior = load_pose_prior(prior)
        self.prior = None if prior is None else prior.to(self.device, self.dtype)
        self.vertex_ids = self.markers.resolve(body)
        self.topology = plate_topology(
            body.faces.cpu().numpy(), body.v_template.detach().cpu().numpy(), self.vertex_ids
        )
        self.dominant = dominant_joints(body, self.vertex_ids)
        self._terms: dict[float, SequenceTerms] = {}

    # ------------------------------------------------------------------------------- public
    def solve(
        self,
        pos,
        rot=None,
        valid=None,
        *,
        fps: float = 60.0,
        init: SMPLParams | Mapping | None = None,
        truth_joints=None,
        iterations: int | None = None,
        tolerance: float | None = None,
        snapshots: bool = False,
        hold_betas: bool = False,
        joint_centres=None,
        hinges=None,
    ) -> Solution:
        """Fit one sequence. Long because its docstring states every argument.

        Args:
            pos: (T, N, 3) observed marker positions (m, world frame).
            rot: (T, N, 3, 3) observed plate rotations (world-from-plate); ignored (may be None)
                for point-marker sets.
            valid: (T, N) bool; default all valid. Invalid entries may hold anything (NaN too).
            fps: frame rate (the smoothness term is in physical units).
            init: a starting point (the hybrid mode, refinement): an :class:`SMPLParams`
                (another method's answer), or a mapping with any of ``poses`` ((T, 24, 3)
                axis-angle or (T, 24, 3, 3)), ``betas`` ((B,) or (T, B), averaged), ``trans``
                ((T, 3)); what a mapping leaves out is estimated from the observations.
            truth_joints: (T, 24, 3) true joints (m); when given the record holds MPJPE.
            iterations: sweeps at most (default the config's).
            tolerance: converged below this relative decrease of the objective per sweep
                (default the config's; 0 runs every sweep: a fixed count).
            snapshots: also keep the answer at every recorded sweep count (:meth:`Solution.at`):
                what a solve stopped there returns, for reading a method off its curve.
            hold_betas: keep the betas at the start's (``init``'s, else zeros) instead of
                fitting them: for a subject whose shape is known (a calibration). Fitted, their
                prior w_β‖β − β₀‖² is centred on the start's betas β₀ (``init``'s, another
                method's estimate of the shape), else on zero (the mean shape).
            joint_centres: None, or joint centres measured from the plates' motion (a
                calibration's, :func:`rbmcap.calibrate.functional.joint_centres`): ((T, 24, 3)
                m, (T, 24) bool where measured), drawn on by the body's joints.
            hinges: None, or (joint indices (K,), axes (K, 3) in each joint's parent frame):
                joints held near a turn about their axis (``weights.hinge_sigma_deg``;
                :func:`rbmcap.calibrate.functional.hinge_axes`).

        Returns:
            :class:`Solution` (``unseen``: frames without any plate seen, held at the start).

        Raises:
            DataError: observations of the wrong shape, no frames, sweeps or a tolerance < 0.
        """
        opt = self.config.optimiser
        iters = opt.iterations if iterations is None else int(iterations)
        tol = opt.tolerance if tolerance is None else float(tolerance)
        if iters < 0:
            raise DataError(f"iterations must be ≥ 0, got {iters}")
        if not tol >= 0:
            raise DataError(f"tolerance must be ≥ 0, got {tol}")
        pos_t, rot_t, valid_t = self._observations(pos, rot, valid)
        num = pos_t.shape[0]
        truth = None if truth_joints is None else self._tensor(truth_joints)
        if truth is not None and truth.shape != (num, 24, 3):
            raise DataError(f"truth_joints of shape {tuple(truth.shape)}, expected ({num}, 24, 3)")
        given = self._parse_init(init, num)
        record_at = tuple(c for c in self.config.record if c <= iters)
        self._sync()
        t0 = time.perf_counter()
        betas = given.get("betas")
        if betas is None:
            betas = torch.zeros(self.body.num_betas, dtype=self.dtype, device=self.device)
        rotmats, trans = self._start(pos_t, rot_t, valid_t, given, betas)
        lm = SequenceLM(
            self._sequence_terms(float(fps)),
            pos_t,
            rot_t,
            valid_t,
            opt.chunk,
            self._sync,
            betas_centre=given.get("betas"),
            centres=self._centres(joint_centres, num),
            hinges=hinges,
        )
        state = lm.state(rotmats, trans, betas)
        records, done, converged = run_sweeps(
            lm,
            state,
            sweeps=iters,
            tolerance=tol,
            free_betas=not hold_betas,
            record_at=record_at,
            on_record=lambda st: self._note(st, truth, snapshots),
            started=t0,
            cold=given.get("poses") is None,
        )
        return self._solution(state, records, done, converged, lm.unseen, truth is not None)

    def _note(self, st, truth, snapshot: bool):
        """What a record keeps of state ``st``: (MPJPE (mm) against ``truth`` or None, the
        answer as :class:`SMPLParams` when ``snapshot``, else None)."""
        rotmats = st.rotmats()
        mpjpe = None
        if truth is not None:
            joints, _ = self.body.pose_joints(rotmats, st.betas, st.x[:, 72:])
            mpjpe = float(1e3 * (joints - truth).norm(dim=-1).mean())
        return mpjpe, _params_of(rotmats, st.x[:, 72:], st.betas) if snapshot else None

    def _solution(self, state, records, done, converged, unseen, has_truth) -> Solution:
        """The :class:`Solution` of a solve's final ``state`` and its sweep ``records``."""
        record = ConvergenceRecord(
            iterations=[r.sweeps for r in records],
            evaluations=[r.sweeps for r in records],
            objective=[r.objective for r in records],
            seconds=[r.seconds for r in records],
            mpjpe_mm=[r.extra[0] for r in records] if has_truth else None,
            frames=state.x.shape[0],
        )
        rotmats = state.rotmats()
        with torch.no_grad():
            joints, _ = self.body.pose_joints(rotmats, state.betas, state.x[:, 72:])
        snapshots = None
        if records and records[-1].extra[1] is not None:
            snapshots = {r.sweeps: r.extra[1] for r in records}
        return Solution(
            params=_params_of(rotmats, state.x[:, 72:], state.betas),
            rotmats=rotmats.to(**_CPU),
            joints=joints.to(**_CPU),
            record=record,
            seconds=record.seconds[-1],
            iterations=done,
            evaluations=done,
            config=self.config.to_dict(),
            snapshots=snapshots,
            converged=converged,
            unseen=unseen,
        )

    # ------------------------------------------------------------------------------ stages
    def _sequence_terms(self, fps: float) -> SequenceTerms:
        """The objective's terms at ``fps`` (cached per rate)."""
        terms = self._terms.get(fps)
        if terms is None:
            terms = SequenceTerms(
                self.body,
                self.topology,
                self.config.weights,
                self.prior,
                fps,
                orientations=self.markers.is_rbm,
            )
            self._terms[fps] = terms
        return terms

    def _start(self, pos, rot, valid, given, betas):
        """The start: the given poses and translation, else read off the plates (the config's
        ``init``): (rotmats (T, 24, 3, 3), trans (T, 3))."""
        if given.get("poses") is not None:
            rotmats = given["poses"]
        else:
            rotmats = kinematic_rotations(
                self.body,
                self.topology,
                self.dominant,
                pos,
                rot if self.markers.is_rbm else None,
                valid,
                betas,
                mode=self.config.init,
            )
        if given.get("trans") is not None:
            trans = given["trans"]
        else:
            trans = fit_translation(self.body, self.topology, rotmats, betas, pos, valid)
        return rotmats, trans

    # ----------------------------------------------------------------------------- helpers
    def _centres(self, joint_centres, num: int):
        """``joint_centres`` as the solver's tensors, checked; None stays None."""
        if joint_centres is None:
            return None
        centres, seen = self._tensor(joint_centres[0]), torch.as_tensor(joint_centres[1])
        if centres.shape != (num, 24, 3) or seen.shape != (num, 24):
            raise DataError(
                f"joint centres of shape {tuple(centres.shape)} and {tuple(seen.shape)}, "
                f"expected ({num}, 24, 3) and ({num}, 24)"
            )
        seen = seen.to(device=centres.device, dtype=torch.bool) & torch.isfinite(centres).all(-1)
        return torch.where(seen[..., None], centres, torch.zeros_like(centres)), seen

    def _tensor(self, x) -> torch.Tensor:
        t = x if torch.is_tensor(x) else torch.from_numpy(np.array(x))
        return t.to(device=self.device, dtype=self.dtype)

    def _observations(self, pos, rot, valid):
        n = len(self.markers)
        p = self._tensor(pos)
        if p.ndim != 3 or p.shape[1:] != (n, 3):
            raise DataError(
                f"pos of shape {tuple(p.shape)}: expected (T, {n}, 3) for marker set "
                f"{self.markers.name!r}"
            )
        if p.shape[0] == 0:
            raise DataError("no frames to solve")
        v = (
            torch.ones(p.shape[:2], dtype=torch.bool, device=self.device)
            if valid is None
            else valid
            if torch.is_tensor(valid)
            else torch.from_numpy(np.array(valid))
        )
        v = v.to(self.device, torch.bool)
        if v.shape != p.shape[:2]:
            raise DataError(f"valid of shape {tuple(v.shape)}, expected {tuple(p.shape[:2])}")
        v = v & torch.isfinite(p).all(-1)
        p = torch.where(v[..., None], p, torch.zeros_like(p))
        eye = torch.eye(3, dtype=self.dtype, device=self.device)
        r = eye.expand(*p.shape[:2], 3, 3)  # point markers: placeholders, weighed 0
        if self.markers.is_rbm:
            if rot is None:
                raise DataError(f"marker set {self.markers.name!r} is 6-DoF: rot is required")
            r = self._tensor(rot)
            if r.shape != (*p.shape[:2], 3, 3):
                raise DataError(f"rot of shape {tuple(r.shape)}, expected {(*p.shape[:2], 3, 3)}")
            ok = torch.isfinite(r).flatten(-2).all(-1)
            v = v & ok
            r = torch.where(v[..., None, None], r, eye)
        return p, r.contiguous(), v

    def _parse_init(self, init: SMPLParams | Mapping | None, num: int) -> dict[str, torch.Tensor]:
        """The starting point's parts on the solver's device: ``poses`` (T, 24, 3, 3) proper
        rotations, ``trans`` (T, 3), ``betas`` (num_betas,), each only where given."""
        if isinstance(init, SMPLParams):
            init = init.as_dict()
        if not init:
            return {}
        out: dict[str, torch.Tensor] = {}
        if init.get("poses") is not None:
            p = self._tensor(init["poses"])
            if p.shape == (num, 24, 3):
                p = roma.rotvec_to_rotmat(p)
            if p.shape != (num, 24, 3, 3):
                raise DataError(
                    f"init poses of shape {tuple(p.shape)}: expected ({num}, 24, 3) "
                    f"or ({num}, 24, 3, 3)"
                )
            out["poses"] = roma.special_procrustes(p)
        if init.get("trans") is not None:
            t = self._tensor(init["trans"])
            if t.shape != (num, 3):
                raise DataError(f"init trans of shape {tuple(t.shape)}, expected ({num}, 3)")
            out["trans"] = t
        if init.get("betas") is not None:
            b = self._tensor(init["betas"])
            b = b.reshape(-1, b.shape[-1]).mean(0)
            nb = self.body.num_betas
            out["betas"] = torch.nn.functional.pad(b, (0, max(0, nb - b.shape[0])))[:nb]
        return out

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


_CPU = {"device": "cpu", "dtype": torch.float32}


def _params_of(rotmats, trans, betas) -> SMPLParams:
    """Local rotations (T, 24, 3, 3), trans (T, 3) and betas (B,) as one CPU float32
    :class:`SMPLParams`."""
    return SMPLParams(
        poses=roma.rotmat_to_rotvec(rotmats).to(**_CPU),
        betas=betas.detach().clone().to(**_CPU),
        trans=trans.detach().clone().to(**_CPU),
    )
