"""A folder of BVH clips retargeted into an AMASS-style motions folder, split by subject.

The layout is the one :func:`rbmcap.motion.procedural.generate_library` writes and
:func:`rbmcap.motion.amass.discover` / the dataset synthesis read:
``OUT/<dataset>/<subject>/<clip>_poses.npz`` and ``OUT/splits/{train,val,test}.txt``, one path
relative to ``OUT`` a line.

* **Subjects.** A ``clips.csv`` beside the clips with ``clip`` and ``subject`` columns names
  each clip's subject; without one, the subject is the file name up to its first ``_`` (CMU's
  naming: ``002_01`` is subject 2), or the group ``subject`` of a ``subject_pattern`` regular
  expression matched against the file name (for a dataset that names no actor, whatever whole
  unit is to be held out: Bandai's style, ``dataset-1_walk_(?P<subject>[^_]+)_001``). Numeric
  subjects are written with two digits (``02``).
* **Splits** go by whole subjects, so no subject's motion is in two splits: ``splits`` maps a
  subject to ``val`` or ``test``; every other subject trains. For the shared CMU clips on the
  iClone rig (``shared/data/cmu-iclone``) the recommended split is ``{"2": "test", "3": "val"}``:
  subject 2 has the widest everyday repertoire (walk, run, jump, punch, bend, swordplay,
  washing: 107 s), subject 3 walks on uneven terrain (7 s, a check beside the procedural
  validation split), and subjects 1 (playground) and 5 (walk and ballet, 155 s) train.
* **Mixing with other motion.** ``OUT`` may already hold other sub-datasets, e.g. a procedural
  library built before or after (``rbmcap motion procedural --out OUT`` merges its lines the same
  way): their files and their lines in the split lists are kept, and this dataset's lines are
  replaced, so the synthesis reads one folder holding both.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from rbmcap.body.pool import check_workers, map_with_body
from rbmcap.errors import ConfigError, DataError
from rbmcap.motion.amass import SPLITS, merge_split_lists
from rbmcap.motion.joint_map import JointMap
from rbmcap.motion.kinematics import standin_body
from rbmcap.motion.retarget import bvh_to_motion
from rbmcap.motion.rigs import AUTO

CLIPS_TABLE = "clips.csv"


def subject_key(subject: str) -> str:
    """A subject's folder name: numbers with two digits (``'2'``, ``'002'`` → ``'02'``)."""
    subject = str(subject).strip()
    return f"{int(subject):02d}" if subject.isdigit() else subject


def clip_subjects(folder: str | Path, subject_pattern: str | None = None) -> dict[str, str]:
    """Clip file stem → subject folder name, for every ``*.bvh`` in ``folder`` (module
    docstring: from ``clips.csv`` where it names the clip, else from ``subject_pattern``'s
    ``subject`` group where given, else the name's prefix).

    Raises:
        ConfigError: ``subject_pattern`` is no regular expression with a ``subject`` group.
        DataError: a clip's name does not match ``subject_pattern``.
    """
    folder = Path(folder)
    pattern = _subject_regex(subject_pattern) if subject_pattern else None
    table: dict[str, str] = {}
    csv_path = folder / CLIPS_TABLE
    if csv_path.is_file():
        with open(csv_path, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row.get("clip") and row.get("subject"):
                    table[row["clip"].strip()] = subject_key(row["subject"])
    out = {}
    for p in sorted(folder.glob("*.bvh")):
        if p.stem in table:
            out[p.stem] = table[p.stem]
        elif pattern is not None:
            match = pattern.fullmatch(p.stem)
            if match is None:
                raise DataError(f"{p}: the name does not match subject_pattern {pattern.pattern!r}")
            out[p.stem] = subject_key(match.group("subject"))
        else:
            out[p.stem] = subject_key(p.stem.split("_", 1)[0])
    return out


def _subject_regex(pattern: str) -> re.Pattern:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"subject_pattern {pattern!r}: {exc}") from None
    if "subject" not in regex.groupindex:
        raise ConfigError(f"subject_pattern {pattern!r} has no (?P<subject>...) group")
    return regex


def build_motion_folder(
    source: str | Path,
    out: str | Path,
    joint_map: JointMap | str | Path,
    *,
    splits: Mapping[str, str] | None = None,
    dataset: str | None = None,
    fps: float = 60.0,
    floor: str = "contacts",
    body=None,
    subject_pattern: str | None = None,
    progress: Callable[[int, int, Path], None] | None = None,
    workers: int = 1,
) -> dict[str, list[str]]:
    """Retarget every ``*.bvh`` in ``source`` into the motions folder ``out`` (module docstring).

    Args:
        source: folder of BVH clips (and optionally ``clips.csv``).
        out: the motions folder; created, or added to.
        joint_map: the clips' joint map (a :class:`JointMap`, a YAML path, a map name, or
            'auto': recognised per clip, :mod:`rbmcap.motion.rigs`).
        splits: subject → 'val' or 'test' (any other subject trains); default all train.
        dataset: the sub-dataset folder name; default ``source``'s name.
        fps: frame rate of the written motions.
        floor: see :func:`rbmcap.motion.retarget.retarget_bvh`.
        body: body model receiving the motion (default the stand-in).
        subject_pattern: a regular expression whose ``subject`` group names a clip's subject
            (module docstring).
        progress: called with (index, count, path) after each file, in order.
        workers: processes that retarget the clips (:func:`rbmcap.body.pool.map_with_body`);
            the files are the same for any count.

    Returns:
        split → the relative paths written to it.

    Raises:
        DataError: ``source`` holds no BVH file. ConfigError: a split name is unknown.
    """
    source, out = Path(source), Path(out)
    workers = check_workers(workers)
    subjects = _folder_clips(source, subject_pattern)
    split_of = _subject_splits(splits or {})
    dataset = dataset or source.name
    if not isinstance(joint_map, JointMap) and str(joint_map) != AUTO:
        joint_map = JointMap.load(joint_map)
    lists: dict[str, list[str]] = {s: [] for s in SPLITS}
    work = [
        (source / f"{clip}.bvh", out, f"{dataset}/{subject}/{clip}_poses.npz", subject)
        for clip, subject in subjects.items()
    ]
    options = {"joint_map": joint_map, "fps": fps, "floor": floor}
    body = body if body is not None else standin_body()
    jobs = [(*job, options) for job in work]
    for i, path in enumerate(map_with_body(_retarget_clip, jobs, body, workers)):
        lists[split_of.get(work[i][3], "train")].append(work[i][2])
        if progress:
            progress(i, len(work), path)
    merge_split_lists(out / "splits", dataset, lists)
    return lists


def _folder_clips(source: Path, subject_pattern: str | None) -> dict[str, str]:
    """The folder's clips → their subjects; an error if it is no folder or holds no clip."""
    if not source.is_dir():
        raise FileNotFoundError(2, "No such folder", str(source))
    subjects = clip_subjects(source, subject_pattern)
    if not subjects:
        raise DataError(f"{source}: no .bvh files found")
    return subjects


def _retarget_clip(job, body) -> Path:
    """Retarget one clip (``job``: BVH path, motions folder, relative path, subject, and the
    ``joint_map``, ``fps`` and ``floor`` of :func:`bvh_to_motion`)."""
    bvh, out, rel, subject, options = job
    motion = bvh_to_motion(bvh, body=body, name=bvh.stem, **options)
    motion.source["subject"] = subject
    return motion.save(out / rel)


def _subject_splits(splits: Mapping[str, str]) -> dict[str, str]:
    """``splits`` with subject names as folder names, after checking the split names."""
    bad = [s for s in splits.values() if s not in SPLITS]
    if bad:
        raise ConfigError(f"unknown split {bad[0]!r}; expected one of {', '.join(SPLITS)}")
    return {subject_key(k): v for k, v in splits.items()}
