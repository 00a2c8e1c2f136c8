"""The optimisation baseline: a MoSh-style solver from marker observations to SMPL,
its Gaussian-mixture pose prior, and the hybrid mode (start from the network's answer).

>>> prior = fit_pose_prior(train_poses, num_components=8, seed=0)
>>> solver = Solver(body, "rbm14", "default", prior=prior)  # default: the shipped prior
>>> sol = solver.solve(pos, rot, valid, fps=60.0, truth_joints=joints)
>>> sol.params, sol.record.mpjpe_mm              # SMPLParams, the convergence curve
>>> refined = solver.solve(pos, rot, valid, init=network_params, iterations=3, tolerance=0)

Where each part lives:

- ``solver.py``: :class:`Solver`: checks the inputs, picks the start, runs the sweeps and
  returns a :class:`Solution`.
- ``sequence.py``: the optimiser: Levenberg–Marquardt sweeps over a whole sequence, every
  frame's step batched, the betas' step, the stopping rule.
- ``frame.py``: one frame's residuals and LM step, causal (live refinement's kernels).
- ``objective.py``: the objective term by term.
- ``init.py``: the start read off the plates; ``prior.py``: the Gaussian-mixture pose prior.
- ``result.py``: :class:`Solution` (its answer an :class:`rbmcap.body.params.SMPLParams`) and
  :class:`ConvergenceRecord`.
- ``config.py``: what each setting means; ``rbmcap/conf/baseline/default.yaml``: every default
  and the measurement behind it (``hybrid``, ``points`` and users' files are layers on top).
"""

from rbmcap.baseline.config import (
    OptimiserConfig,
    SolverConfig,
    WeightsConfig,
    available_configs,
    load_solver_config,
)
from rbmcap.baseline.prior import (
    GaussianMixturePrior,
    default_pose_prior,
    fit_pose_prior,
    load_pose_prior,
)
from rbmcap.baseline.result import ConvergenceRecord, Solution
from rbmcap.baseline.solver import Solver

__all__ = [
    "ConvergenceRecord",
    "GaussianMixturePrior",
    "OptimiserConfig",
    "Solution",
    "Solver",
    "SolverConfig",
    "WeightsConfig",
    "available_configs",
    "default_pose_prior",
    "fit_pose_prior",
    "load_pose_prior",
    "load_solver_config",
]
