"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_seconds(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best wall time of each function over ``repeats`` rounds, calls interleaved.

    Interleaving exposes every side to the same background load, and the best of several runs
    is the least noisy estimate of the work itself on a shared machine.
    """
    for fn in fns.values():
        fn()  # warm-up: allocations, lazy caches
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best
