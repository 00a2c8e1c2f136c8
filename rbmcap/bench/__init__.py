"""Benchmarks behind ``rbmcap bench NAME --json``.

Each benchmark is a module ``rbmcap.bench.<name>`` with ``run(**options) -> dict``; the figures it
returns are measured in one process so ratios between them are meaningful. The CLI adds the
machine's CPU count and torch's thread count.
"""

from __future__ import annotations

import importlib
import inspect
import os
import platform

import torch

from rbmcap.errors import ConfigError

BENCHMARKS: dict[str, str] = {
    "baseline": "optimisation solver ms per frame on rbm14 plates, with its convergence curve",
    "skinning": "full smplx forward vs sparse skinning of the rbm14 marker vertices",
    "synth": "rbm14 synthesis frames per second, sparse vs dense, and peak memory",
    "train": "training windows per second of the default model on this machine",
    "infer": "network frames per second in batch and streaming latency p50/p99",
    "step": "a live stream's frame step back to back and paced at 120/240/360 Hz, per precision",
    "live": "rbmcap live from a NatNet server on loopback: packet-to-pose latency, dropped frames",
    "refine": "live refinement: MPJPE, solver steps and ms per frame against its time budget",
}


def run_benchmark(name: str, **options) -> dict:
    """Run benchmark ``name`` and return its figures plus machine facts."""
    if name not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(sorted(BENCHMARKS))}")
    module = importlib.import_module(f"rbmcap.bench.{name}")
    accepted = inspect.signature(module.run).parameters
    refused = sorted(set(options) - set(accepted))
    if refused:
        raise ConfigError(f"benchmark {name!r} takes no {', '.join(refused)} option")
    result = {"benchmark": name, **module.run(**options)}
    result["machine"] = {
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "processor": platform.machine(),
    }
    return result
