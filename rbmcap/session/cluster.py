"""A session's trials in parallel on an existing engine: Dask distributed.

- ``--workers N``: a :class:`distributed.LocalCluster` of N processes on this machine;
- ``--scheduler ADDRESS``: the scheduler of a running cluster (``tcp://host:8786``);
- ``--jobqueue slurm|pbs|sge`` (or ``cluster:`` in ``session.yaml``): a ``dask-jobqueue``
  cluster whose workers are batch jobs, scaled to ``jobs``.

Workers read a trial's inputs from the shared file system and write its outputs atomically
(:mod:`rbmcap.session.run`); each step runs on one thread, so the outputs are those of a serial
run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import dask_jobqueue
from distributed import Client, LocalCluster

from rbmcap.errors import ConfigError

JOBQUEUES = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster"}
JOB_DEFAULTS = {"cores": 1, "processes": 1, "memory": "8GB", "walltime": "01:00:00"}
"""Each batch job: one worker process on one core (a step runs on one thread)."""


def jobqueue_cluster(kind: str, **options):
    """The ``dask-jobqueue`` cluster of ``kind`` (slurm, pbs, sge) with ``options`` over
    :data:`JOB_DEFAULTS` (``queue``, ``account``, ``memory``, ``walltime``,
    ``job_extra_directives``, ...); nothing is submitted until it is scaled."""
    if kind not in JOBQUEUES:
        raise ConfigError(f"jobqueue {kind!r}: expected one of {', '.join(JOBQUEUES)}")
    try:
        return getattr(dask_jobqueue, JOBQUEUES[kind])(**(JOB_DEFAULTS | options))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"jobqueue {kind}: {exc}") from None


@contextlib.contextmanager
def dask_mapper(
    workers: int | None = None,
    scheduler: str | None = None,
    jobqueue: dict | None = None,
) -> Iterator:
    """A ``mapper(function, items) -> results`` that runs on Dask for the life of the context,
    or None (serial) when nothing is asked for. ``jobqueue``: ``{"kind": "slurm", "jobs": 8,
    ...options}``."""
    if not workers and not scheduler and not jobqueue:
        yield None
        return
    if sum(bool(x) for x in (workers, scheduler, jobqueue)) > 1:
        raise ConfigError("give one of --workers, --scheduler or --jobqueue")
    if workers is not None and workers < 1:
        raise ConfigError(f"--workers must be ≥ 1, got {workers}")
    with contextlib.ExitStack() as stack:
        if workers:
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",  # this machine only
                    dashboard_address=None,
                )
            )
            client = stack.enter_context(Client(cluster))
        elif scheduler:
            client = stack.enter_context(Client(scheduler))
        else:
            options = dict(jobqueue)
            kind, jobs = options.pop("kind", "slurm"), int(options.pop("jobs", 1))
            cluster = stack.enter_context(jobqueue_cluster(kind, **options))
            cluster.scale(jobs=jobs)
            client = stack.enter_context(Client(cluster))

        def mapper(function, items):
            items = list(items)
            if not items:
                return []
            return client.gather(client.map(function, items, pure=False))

        yield mapper
