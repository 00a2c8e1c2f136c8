"""A lab's session in one call: every trial of a folder imported, calibrated per subject,
inferred, its clinical angles and gait events, its exports and one report (``rbmcap session``).

- :mod:`~rbmcap.session.spec`: what a session folder holds and what to run on it
  (``session.yaml`` or the defaults).
- :mod:`~rbmcap.session.run`: the steps, each redone only when its inputs or settings change
  (:func:`run_session`); a failed trial is one line, the others go on.
- :mod:`~rbmcap.session.report`: the HTML report and each subject's gait cycles.
- :mod:`~rbmcap.session.cluster`: the trials in parallel on Dask (a local cluster, a scheduler,
  or batch jobs through ``dask-jobqueue``).
"""

from rbmcap.session.cluster import dask_mapper, jobqueue_cluster
from rbmcap.session.report import write_report
from rbmcap.session.run import SessionResult, TrialResult, run_session
from rbmcap.session.spec import SessionSpec, SubjectSpec, load_session

__all__ = [
    "SessionResult",
    "SessionSpec",
    "SubjectSpec",
    "TrialResult",
    "dask_mapper",
    "jobqueue_cluster",
    "load_session",
    "run_session",
    "write_report",
]
