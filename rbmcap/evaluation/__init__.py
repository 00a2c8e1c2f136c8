"""Evaluation: the network against the optimisation baseline and the hybrid, on one split.

- :mod:`~rbmcap.evaluation.options`: :class:`EvalOptions`, the defaults and their checks.
- :mod:`~rbmcap.evaluation.sequences`: the evaluated sequences of a split.
- :mod:`~rbmcap.evaluation.methods`: each method as an object with ``run(sequence)``.
- :mod:`~rbmcap.evaluation.results`: per-method results, scoring and aggregation.
- :mod:`~rbmcap.evaluation.runner`: :func:`evaluate`, a loop over the methods.
- :mod:`~rbmcap.evaluation.oracle`: oracle starts for the hybrid study.
- :mod:`~rbmcap.evaluation.report`: ``report.md``, ``metrics.json``, CSV and plots.
- :mod:`~rbmcap.evaluation.occlusion`: plates hidden for whole sequences (``--occlude``), each
  group a condition evaluated beside every plate seen; :mod:`~rbmcap.evaluation.occlusion_report`
  its part of the report.

:class:`EvalOptions` is imported eagerly (light: the CLI builds its parser from it); the rest
on first use.
"""

from rbmcap.evaluation.options import EvalOptions

__all__ = ["EvalOptions", "MethodResult", "evaluate"]


def __getattr__(name: str):
    if name == "evaluate":
        # start-up: the runner and results load torch, the solver and the predictor (about
        # 3 s); the command line builds its parser from EvalOptions alone
        from rbmcap.evaluation.runner import evaluate

        return evaluate
    if name == "MethodResult":
        # start-up: as above
        from rbmcap.evaluation.results import MethodResult

        return MethodResult
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
