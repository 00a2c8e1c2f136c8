"""The optimisation baseline of design §7: a MoSh-style solver from marker observations to SMPL,
its Gaussian-mixture pose prior, and the hybrid mode (start from the network's answer).

>>> prior = fit_pose_prior(train_poses, num_components=8, seed=0)
>>> solver = Solver(body, "rbm14", "default", prior=prior)
>>> sol = solver.solve(pos, rot, valid, fps=60.0, truth_joints=joints)
>>> hybrid = solver.solve(pos, rot, valid, init=network_answer, iterations=20)
"""

from rbmcap.baseline.config import (
    OptimiserConfig,
    ScheduleConfig,
    SolverConfig,
    WeightsConfig,
    available_configs,
    load_solver_config,
)
from rbmcap.baseline.prior import GaussianMixturePrior, fit_pose_prior, load_pose_prior
from rbmcap.baseline.result import ConvergenceRecord, Solution
from rbmcap.baseline.solver import Solver

__all__ = [
    "ConvergenceRecord",
    "GaussianMixturePrior",
    "OptimiserConfig",
    "ScheduleConfig",
    "Solution",
    "Solver",
    "SolverConfig",
    "WeightsConfig",
    "available_configs",
    "fit_pose_prior",
    "load_pose_prior",
    "load_solver_config",
]
