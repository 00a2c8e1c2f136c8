"""The optimisation baseline: fit SMPL to marker observations.

Unknowns: betas (shared by the sequence), and per frame translation, global orientation and the
body pose (axis-angle of joints 1..23). 6-DoF marker sets contribute position and geodesic
orientation residuals, point sets positions only; see :mod:`rbmcap.baseline.objective` for the
objective. Frames are solved in batches (the whole sequence, or windows that can warm-start from
the previous one); L-BFGS or Adam; CPU or GPU. The hybrid mode is ``init=``: start from another
method's answer (the network's) and run a few iterations.

>>> solver = Solver(body, "rbm14", "default", prior=load_pose_prior("prior.npz"))
>>> sol = solver.solve(pos, rot, valid, fps=60, truth_joints=joints, snapshots=True)
>>> sol.params, sol.record.mpjpe_mm, sol.ms_per_frame  # SMPLParams, the curve, the cost
>>> params, seconds = sol.at(100)                      # what a solve stopped at 100 returns
>>> hybrid = solver.solve(pos, rot, valid, init=network_params, iterations=30)

The pieces: this module checks the inputs, runs the shape stage, picks each window's start and
joins the windows; :mod:`rbmcap.baseline.window` optimises one window (records and snapshots as
NamedTuples); :mod:`rbmcap.baseline.optimisers` holds the optimiser strategies and the stopping
rule.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.baseline.config import SolverConfig, load_solver_config
from rbmcap.baseline.init import dominant_joints, fit_translation, kinematic_rotations
from rbmcap.baseline.objective import WindowObservations
from rbmcap.baseline.prior import GaussianMixturePrior, load_pose_prior
from rbmcap.baseline.result import ConvergenceRecord, Solution
from rbmcap.baseline.scaling import unknown_scales
from rbmcap.baseline.window import Problem, Start, WindowFit, WindowResult, fit_window
from rbmcap.body.params import SMPLParams
from rbmcap.errors import DataError
from rbmcap.markers.markerset import DEFAULT_MARKERS, MarkerSet, load_marker_set
from rbmcap.markers.plates import plate_topology


class Solver:
    """Fits SMPL parameters to the observations of one marker set on one body.

    Args:
        body: a :class:`rbmcap.body.BodyModel` (copied to ``device``/dtype if it is elsewhere).
        markers: the marker set (a :class:`MarkerSet`, a name or a YAML path); its kind picks
            6-DoF or point residuals.
        config: a :class:`SolverConfig` or a name/path for :func:`load_solver_config`.
        prior: a :class:`GaussianMixturePrior`, a path to its ``.npz``, or None (no pose prior;
            ``weights.pose_l2`` can stand in).
        device: 'cpu', 'cuda', ...
    """

    def __init__(
        self,
        body,
        markers: MarkerSet | str = DEFAULT_MARKERS,
        config: SolverConfig | str | Path = "default",
        prior: GaussianMixturePrior | str | Path | None = None,
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
        if isinstance(prior, str | Path):
            prior = load_pose_prior(prior)
        self.prior = None if prior is None else prior.to(self.device, self.dtype)
        self.vertex_ids = self.markers.resolve(body)
        self.topology = plate_topology(
            body.faces.cpu().numpy(), body.v_template.detach().cpu().numpy(), self.vertex_ids
        )
        self.dominant = dominant_joints(body, self.vertex_ids)
        self._scale_cache: dict = {}

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
        snapshots: bool = False,
        hold_betas: bool = False,
    ) -> Solution:
        """Fit one sequence.

        Args:
            pos: (T, N, 3) observed marker positions (m, world frame).
            rot: (T, N, 3, 3) observed plate rotations (world-from-plate); ignored (may be None)
                for point-marker sets.
            valid: (T, N) bool; default all valid. Invalid entries may hold anything (NaN too).
            fps: frame rate (the smoothness term is in physical units).
            init: a starting point (the hybrid mode): an :class:`SMPLParams` (another method's
                answer), or a mapping with any of ``poses`` ((T, 24, 3) axis-angle or
                (T, 24, 3, 3)), ``betas`` ((B,) or (T, B), averaged), ``trans`` ((T, 3)); what
                a mapping leaves out is estimated from the observations.
            truth_joints: (T, 24, 3) true joints (m); when given the record holds MPJPE.
            iterations: optimiser iterations per window (default the config's).
            snapshots: also keep the answer at every recorded iteration count
                (:meth:`Solution.at`): what a solve stopped there returns, for reading a
                method off its convergence curve.
            hold_betas: keep the betas at the start's (``init``'s, else zeros) instead of
                fitting them: for a subject whose shape is known (a calibration). No shape stage
                then runs with windows.

        Returns:
            :class:`Solution`.
        """
        iters = self.config.optimiser.iterations if iterations is None else int(iterations)
        if iters < 0:
            raise DataError(f"iterations must be ≥ 0, got {iters}")
        pos_t, rot_t, valid_t = self._observations(pos, rot, valid)
        num = pos_t.shape[0]
        truth = None if truth_joints is None else self._tensor(truth_joints)
        if truth is not None and truth.shape != (num, 24, 3):
            raise DataError(f"truth_joints of shape {tuple(truth.shape)}, expected ({num}, 24, 3)")
        given = self._parse_init(init, num)
        checkpoints = sorted({c for c in self.config.record if c <= iters} | {iters})
        return self._solve_windows(
            pos_t, rot_t, valid_t, float(fps), given, truth, checkpoints, snapshots, hold_betas
        )

    # ------------------------------------------------------------------------------ stages
    def _solve_windows(
        self, pos, rot, valid, fps, given, truth, checkpoints, keep, hold_betas=False
    ) -> Solution:
        """The timed solve of checked inputs: the shape stage (with several windows, betas not
        held), then each window from its start (initialisation time counted in the record's
        seconds)."""
        num = pos.shape[0]
        window = self.config.schedule.window or num
        windows = [(a, min(num, a + window)) for a in range(0, num, window)]
        self._sync()
        t0 = time.perf_counter()
        betas = given.get("betas")
        if betas is None:
            betas = torch.zeros(self.body.num_betas, dtype=self.dtype, device=self.device)
        shape_evals = 0
        if not hold_betas and len(windows) > 1 and self.config.schedule.shape_iterations > 0:
            betas, shape_evals = self._shape_stage(pos, rot, valid, fps, given, betas)
        self._sync()
        setup = time.perf_counter() - t0
        results: list[WindowResult] = []
        for a, b in windows:
            obs = WindowObservations(pos[a:b], None if rot is None else rot[a:b], valid[a:b], fps)
            prev = results[-1] if results else None
            self._sync()
            t1 = time.perf_counter()
            start = self._start(obs, given, a, b, betas, prev)
            context = None if prev is None else prev.pred_pos[-2:]
            self._sync()
            setup += time.perf_counter() - t1
            window_truth = None if truth is None else truth[a:b]
            betas_free = len(windows) == 1 and not hold_betas
            fit = self._window_fit(obs, start, betas_free, context)
            results.append(fit_window(fit, checkpoints, window_truth, keep=keep))
        record = self._join_records(results, checkpoints, setup, shape_evals, truth is not None)
        return self._solution(results, record, checkpoints)

    def _shape_stage(self, pos, rot, valid, fps, given, betas):
        """Fit betas (with pose) on evenly spread frames; returns betas and evaluations."""
        cfg = self.config.schedule
        num = pos.shape[0]
        idx = torch.unique(torch.linspace(0, num - 1, min(cfg.shape_frames, num)).round().long())
        idx = idx.to(self.device)
        obs = WindowObservations(pos[idx], None if rot is None else rot[idx], valid[idx], 0.0)
        sub = {k: (v[idx] if k != "betas" else v) for k, v in given.items()}
        start = self._start(obs, sub, 0, len(idx), betas, None, reindex=False)
        fit = self._window_fit(obs, start, True, None, smooth=False)
        res = fit_window(fit, [cfg.shape_iterations], None)
        return res.betas, res.evaluations

    def _start(self, obs, given, a, b, betas, prev, reindex: bool = True) -> Start:
        sl = slice(a, b) if reindex else slice(None)
        if given.get("poses") is not None:
            rotmats = given["poses"][sl]
        elif prev is not None and self.config.schedule.warm_start:
            rotmats = prev.rotmats[-1:].expand(b - a, 24, 3, 3).clone()
        else:
            rotmats = kinematic_rotations(
                self.body,
                self.topology,
                self.dominant,
                obs.pos,
                obs.rot,
                obs.valid,
                betas,
                mode=self.config.schedule.init,
            )
        if given.get("trans") is not None:
            trans = given["trans"][sl]
        else:
            trans = fit_translation(self.body, self.topology, rotmats, betas, obs.pos, obs.valid)
        return Start(rotmats, trans, betas)

    def _window_fit(self, obs, start: Start, betas_free: bool, context, smooth: bool = True):
        """The optimisation of one window (:class:`rbmcap.baseline.window.WindowFit`);
        ``smooth=False`` drops the smoothness term (the shape stage's frames are not a path)."""
        weights = self.config.weights
        if not smooth:
            weights = replace(weights, accel_sigma=0.0)
        problem = Problem(self.body, self.topology, obs, weights, self.prior, context)
        scales = self._scales(weights, start.trans.shape[0])
        return WindowFit(problem, start, scales, self.config.optimiser, betas_free, self._sync)

    def _scales(self, weights, frames: int) -> dict[str, torch.Tensor]:
        """Per-unknown scales (all ones without preconditioning), cached per weights."""
        one = torch.ones((), dtype=self.dtype, device=self.device)
        o = self.config.optimiser
        if not o.precondition or o.name != "lbfgs":  # Adam scales each unknown itself
            return {"root": one, "body": one, "trans": one, "betas": one}
        cached = self._scale_cache.get(weights)
        if cached is None:
            cached = unknown_scales(
                self.body, self.topology, weights, self.prior, self.markers.is_rbm
            )
            self._scale_cache[weights] = cached
        return {
            "root": cached.root,
            "body": cached.body,
            "trans": cached.trans,
            "betas": cached.betas_for(frames, weights.betas),
        }

    # ------------------------------------------------------------------------------ results
    @staticmethod
    def _join_records(results, checkpoints, setup, shape_evals, has_truth) -> ConvergenceRecord:
        """One record for the sequence: entry k sums the windows' entries k (MPJPE averaged
        over all frames), with the set-up time and the shape stage's evaluations added."""
        num = sum(r.rotmats.shape[0] for r in results)
        rec = ConvergenceRecord(frames=num, mpjpe_mm=[] if has_truth else None)
        for k, it in enumerate(checkpoints):
            rows = [r.records[k] for r in results]
            rec.iterations.append(it)
            rec.evaluations.append(shape_evals + sum(row.evaluations for row in rows))
            rec.objective.append(sum(row.objective for row in rows))
            rec.seconds.append(setup + sum(row.seconds for row in rows))
            if has_truth:
                rec.mpjpe_mm.append(sum(row.mpjpe_sum_mm for row in rows) / num)
        return rec

    def _solution(self, results: list[WindowResult], record, checkpoints) -> Solution:
        """The windows joined into a :class:`Solution` (CPU float32)."""
        rotmats = torch.cat([r.rotmats for r in results])
        trans = torch.cat([r.trans for r in results])
        betas = results[-1].betas
        with torch.no_grad():
            joints, _ = self.body.pose_joints(rotmats, betas, trans)
        snapshots = None
        if results[0].snapshots is not None:
            snapshots = {
                it: _params([r.snapshots[k] for r in results]) for k, it in enumerate(checkpoints)
            }
        return Solution(
            params=_params(results),
            rotmats=rotmats.to(**_CPU),
            joints=joints.to(**_CPU),
            record=record,
            seconds=record.seconds[-1],
            iterations=max(r.iterations for r in results),
            evaluations=record.evaluations[-1],
            config=self.config.to_dict(),
            snapshots=snapshots,
        )

    # ----------------------------------------------------------------------------- helpers
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
        r = None
        if self.markers.is_rbm:
            if rot is None:
                raise DataError(f"marker set {self.markers.name!r} is 6-DoF: rot is required")
            r = self._tensor(rot)
            if r.shape != (*p.shape[:2], 3, 3):
                raise DataError(f"rot of shape {tuple(r.shape)}, expected {(*p.shape[:2], 3, 3)}")
            ok = torch.isfinite(r).flatten(-2).all(-1)
            v = v & ok
            r = torch.where(v[..., None, None], r, torch.eye(3, dtype=r.dtype, device=r.device))
        return p, r, v

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


def _params(parts) -> SMPLParams:
    """Consecutive windows' answers (anything with ``rotmats``, ``trans``, ``betas``; the last
    one's betas hold) as one CPU float32 :class:`SMPLParams`."""
    return SMPLParams(
        poses=torch.cat([roma.rotmat_to_rotvec(p.rotmats) for p in parts]).to(**_CPU),
        betas=parts[-1].betas.to(**_CPU),
        trans=torch.cat([p.trans for p in parts]).to(**_CPU),
    )
