"""Evaluation: the network against the optimisation baseline and the hybrid, on one split."""

from rbmcap.evaluation.runner import EvalOptions, MethodResult, evaluate

__all__ = ["EvalOptions", "MethodResult", "evaluate"]
