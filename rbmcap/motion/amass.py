"""AMASS-style folders: ``ROOT/<sub-dataset>/<subject>/<sequence>_{poses,stageii}.npz``, each
file read by :func:`rbmcap.motion.smpl_motion.read_motion`.

AMASS's recommended split assigns whole sub-datasets (``conf/motion/amass_splits.yaml``); explicit
split lists (one path relative to ROOT per line) override it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from rbmcap.atomic import write_text_atomic
from rbmcap.config.packaged import conf_file
from rbmcap.config.safe_yaml import load_yaml_mapping
from rbmcap.errors import FormatError, RBMCapError
from rbmcap.motion.smpl_motion import SEQUENCE_SUFFIXES, SMPLMotion, read_motion

SPLITS = ("train", "val", "test")


def _strip_label(message: str) -> str:
    return message.split(": ", 1)[1] if ": " in message else message


# ---------------------------------------------------------------------------------- folders
@dataclass(frozen=True)
class AMASSEntry:
    """One sequence file found under an AMASS-style root.

    Attributes:
        path: the file.
        relpath: its path relative to the root, with '/' separators.
        dataset: the sub-dataset (first folder under the root).
        split: 'train', 'val' or 'test', or None when explicit lists leave it out.
    """

    path: Path
    relpath: str
    dataset: str
    split: str | None


@lru_cache(maxsize=1)
def recommended_splits() -> dict[str, str]:
    """AMASS's recommended split: lower-cased sub-dataset name → 'val' or 'test'."""
    data = load_yaml_mapping(conf_file("motion", "amass_splits.yaml"))
    table = {}
    for split in ("val", "test"):
        for name in data.get(split, []) or []:
            table[str(name).lower()] = split
    return table


def read_split_lists(lists: str | Path | Mapping[str, str | Path]) -> dict[str, str]:
    """Read explicit split lists: relative path (without ``.npz``) → split name.

    Args:
        lists: a folder holding ``train.txt`` / ``val.txt`` / ``test.txt`` (any present), or a
            mapping split name → list file. Each file has one path relative to the AMASS root per
            line; blank lines and ``#`` comments are ignored, ``.npz`` is optional.
    """
    if isinstance(lists, str | Path):
        folder = Path(lists)
        if not folder.is_dir():
            raise FileNotFoundError(2, "No such folder", str(folder))
        files = {s: folder / f"{s}.txt" for s in SPLITS if (folder / f"{s}.txt").is_file()}
        if not files:
            raise FormatError(
                f"{folder}: no split list found (expected train.txt/val.txt/test.txt)"
            )
    else:
        files = {str(k): Path(v) for k, v in lists.items()}
    table: dict[str, str] = {}
    for split, file in files.items():
        for line in file.read_text().splitlines():
            rel = line.split("#", 1)[0].strip().replace("\\", "/").removeprefix("./")
            if rel:
                table[_list_key(rel)] = split
    return table


def _list_key(relpath: str) -> str:
    return relpath.removesuffix(".npz")


def discover(
    root: str | Path, split_lists: str | Path | Mapping[str, str | Path] | None = None
) -> list[AMASSEntry]:
    """Every sequence file under ``root`` (sorted), each with its sub-dataset and split.

    Without ``split_lists`` the split is AMASS's recommended one by sub-dataset; with them, each
    file takes the split its list gives (None when no list names it). Subject ``shape.npz`` and
    SMPL-X ``*_stagei.npz`` files are not sequences and are skipped.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(2, "No such folder", str(root))
    listed = read_split_lists(split_lists) if split_lists is not None else None
    by_dataset = recommended_splits()
    entries = []
    for path in sorted(root.rglob("*.npz")):
        if not path.name.endswith(SEQUENCE_SUFFIXES) or path.name.startswith("."):
            continue
        rel = path.relative_to(root).as_posix()
        dataset = rel.split("/", 1)[0] if "/" in rel else ""
        if listed is not None:
            split = listed.get(_list_key(rel))
        else:
            split = by_dataset.get(dataset.lower(), "train")
        entries.append(AMASSEntry(path=path, relpath=rel, dataset=dataset, split=split))
    if listed is not None:
        missing = set(listed) - {_list_key(e.relpath) for e in entries}
        if missing:
            warnings.warn(
                f"{root}: {len(missing)} listed sequence(s) not found, e.g. {sorted(missing)[0]}",
                stacklevel=2,
            )
    return entries


def iter_motions(
    entries: list[AMASSEntry] | str | Path,
    split: str | None = None,
    fps: float | None = None,
) -> Iterator[tuple[AMASSEntry, SMPLMotion]]:
    """Read the sequences of a folder (or of ``discover``'s entries), skipping bad files.

    Args:
        entries: entries from :func:`discover`, or a root folder to discover.
        split: keep only this split (None: all).
        fps: resample each motion to this rate (None: keep the file's rate).

    Yields:
        (entry, motion) pairs. A file that cannot be read is skipped with a warning naming it.
    """
    if isinstance(entries, str | Path):
        entries = discover(entries)
    for entry in entries:
        if split is not None and entry.split != split:
            continue
        try:
            motion = read_motion(entry.path)
        except (RBMCapError, OSError) as exc:
            warnings.warn(f"skipping {entry.path}: {_strip_label(str(exc))}", stacklevel=2)
            continue
        motion.source.setdefault("dataset", entry.dataset)
        motion.source["relpath"] = entry.relpath
        yield entry, motion.resample(fps) if fps else motion


def merge_split_lists(split_dir: Path, dataset: str, lists: dict[str, list[str]]) -> None:
    """Write ``split_dir/{train,val,test}.txt`` (one motion file, relative path, a line): the
    lines of other sub-datasets kept, those of ``dataset`` (its ``dataset/`` prefix) replaced by
    ``lists``, so procedural motion and retargeted clips can share one motions folder in any
    order of building."""
    prefix = f"{dataset}/"
    split_dir.mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        path = split_dir / f"{split}.txt"
        kept = []
        if path.is_file():
            kept = [
                line
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.strip().startswith(prefix)
            ]
        write_text_atomic(path, "".join(f"{r}\n" for r in [*kept, *lists.get(split, [])]))
