"""Motion files to synthesise: discovery under a folder (with splits) and loading.

A thin layer over :mod:`rbmcap.motion.amass`: a folder is an AMASS-style tree of ``*_poses.npz`` /
``*_stageii.npz`` files; splits come from split lists (``train.txt`` / ``val.txt`` / ``test.txt``
in the folder itself or in ``split_lists``), else from AMASS's recommended split by sub-dataset.
A single ``.npz`` file is one training sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rbmcap.dataset.manifest import sequence_order
from rbmcap.motion.amass import SPLITS, discover
from rbmcap.motion.smpl_motion import SMPLMotion, read_motion


@dataclass(frozen=True)
class MotionJob:
    """One motion file to synthesise.

    Attributes:
        path: the file; source: its path relative to the motion folder ('/' separators);
        split: the split it goes to; name: ``source`` without its extension (unique).
    """

    path: Path
    source: str
    split: str

    @property
    def name(self) -> str:
        return self.source.removesuffix(".npz")

    @property
    def order(self):
        return sequence_order(self.split, self.source)


def discover_jobs(motions: str | Path, split_lists: str | Path | None = None) -> list[MotionJob]:
    """Every motion under ``motions`` with its split, in dataset order.

    Files that no split list names are left out.
    """
    root = Path(motions)
    if root.is_file():
        return [MotionJob(path=root, source=root.name, split="train")]
    if split_lists is None:
        # split lists beside the motions (an AMASS-like root, or its splits/ folder, which
        # `rbmcap motion procedural` writes) take precedence over AMASS's recommended split
        for folder in (root, root / "splits"):
            if any((folder / f"{s}.txt").is_file() for s in SPLITS):
                split_lists = folder
                break
    entries = discover(root, split_lists)
    jobs = [MotionJob(e.path, e.relpath, e.split) for e in entries if e.split is not None]
    return sorted(jobs, key=lambda j: j.order)


def load_motion(job: MotionJob, fps: float) -> SMPLMotion:
    """Read a job's motion and resample it to ``fps``.

    Raises:
        RBMCapError: the file is unreadable or its content is unusable (e.g. NaN).
    """
    motion = read_motion(job.path)
    if abs(motion.fps - fps) > 1e-9:
        motion = motion.resample(fps)
    return motion


def shard_jobs(jobs: list[MotionJob], index: int, count: int) -> list[MotionJob]:
    """Shard ``index`` of ``count``: every ``count``-th job from position ``index`` (balanced)."""
    return jobs[index::count]
