"""Work on a body model spread over processes: each spawned worker loads the body once."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from multiprocessing import get_context
from typing import Any

import torch

from rbmcap.body.load import load_body_model
from rbmcap.errors import ConfigError

_WORKER: dict[str, Any] = {}


def check_workers(workers: int) -> int:
    """``workers`` as an int; a ConfigError unless it is at least 1 (call before writing)."""
    if int(workers) < 1:
        raise ConfigError(f"workers={workers}: need at least 1")
    return int(workers)


def map_with_body(
    fn: Callable[[Any, Any], Any], jobs: Sequence[Any], body, workers: int = 1
) -> Iterator[Any]:
    """``fn(job, body)`` for each of ``jobs``, yielded in job order.

    With ``workers`` > 1 the calls run in that many spawned processes, each of which loads the
    body again from its ``source`` (a path or ``standin``) and gender and shares the CPUs'
    threads with the others; ``fn`` and the jobs must then pickle (``fn`` a module-level
    function). Results do not depend on the count when ``fn`` depends only on its arguments.
    """
    workers = check_workers(workers)
    if workers == 1 or len(jobs) <= 1:
        for job in jobs:
            yield fn(job, body)
        return
    spec = (str(getattr(body, "source", "") or "standin"), getattr(body, "gender", "neutral"))
    threads = max(1, (os.cpu_count() or 1) // workers)
    with ProcessPoolExecutor(
        workers, mp_context=get_context("spawn"), initializer=_init, initargs=(*spec, threads)
    ) as pool:
        yield from pool.map(partial(_call, fn), jobs)


def _init(body_spec: str, gender: str, threads: int) -> None:
    torch.set_num_threads(threads)
    _WORKER["body"] = load_body_model(body_spec, gender=gender)


def _call(fn: Callable[[Any, Any], Any], job: Any) -> Any:
    return fn(job, _WORKER["body"])
