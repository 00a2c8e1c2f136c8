"""AMASS motion files and AMASS-style folders.

Two AMASS releases exist and are told apart by their keys:

* SMPL+H G (``*_poses.npz``): ``poses (T, 156)`` (52 joints), ``trans``, ``betas (16,)``,
  ``gender``, ``mocap_framerate``. rbmcap's own files are of this kind (plus ``name``/``source``).
* SMPL-X N (``*_stageii.npz``): ``poses (T, 165)`` (55 joints) or the split keys ``root_orient``,
  ``pose_body``, ``pose_hand``..., ``trans``, ``betas``, ``gender``, ``mocap_frame_rate``.

Both become an :class:`SMPLMotion`: the first 22 joints are SMPL's body; SMPL's hand joints
(22, 23) take the first index-finger joint of each hand.

A folder is ``ROOT/<sub-dataset>/<subject>/<sequence>_{poses,stageii}.npz``. AMASS's recommended
split assigns whole sub-datasets (``conf/motion/amass_splits.yaml``); explicit split lists (one
path relative to ROOT per line) override it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from rbmcap.config.packaged import conf_file
from rbmcap.config.safe_yaml import load_yaml_mapping
from rbmcap.errors import DataError, FormatError, RBMCapError
from rbmcap.motion.smpl_motion import SMPLMotion

SEQUENCE_SUFFIXES = ("_poses.npz", "_stageii.npz")
SPLITS = ("train", "val", "test")
# SMPL-X joints: 22 body, jaw, two eyes, then 15 joints per hand (index finger first).
_SMPLX_HANDS = (25, 40)
_SMPLH_HANDS = (22, 37)


# ------------------------------------------------------------------------------------ files
def read_motion(path: str | Path) -> SMPLMotion:
    """Read an AMASS SMPL+H G, SMPL-X N or rbmcap ``.npz`` motion, telling them apart by keys.

    Raises:
        FileNotFoundError: there is no such file.
        FormatError: the file is not a readable ``.npz`` (truncated, corrupted, pickled objects),
            lacks the keys of every known kind, or holds arrays of the wrong shape or dtype.
        DataError: the arrays are readable but unusable: no frames, NaN or infinite values
            (``"FILE: sequence 'NAME', frame F: poses contains NaN or infinite values (joint
            J)"``), a frame rate that is not a positive number.
    """
    path = Path(path)
    arrays = _load_npz(path)
    fps_key = next((k for k in ("mocap_framerate", "mocap_frame_rate") if k in arrays), None)
    try:
        if "pose_body" in arrays or "root_orient" in arrays:
            poses = _poses_from_split_keys(arrays, path)
        elif "poses" in arrays:
            poses = _poses_from_full(_numeric(arrays, "poses", path), path)
        else:
            raise _missing(path, arrays, "poses (or root_orient + pose_body)")
        for key in ("trans", "betas"):
            if key not in arrays:
                raise _missing(path, arrays, key)
        if fps_key is None:
            raise _missing(path, arrays, "mocap_framerate (SMPL+H) or mocap_frame_rate (SMPL-X)")
        if len(poses) == 0:
            raise DataError(f"{path}: the motion has no frames")
        fps = _numeric(arrays, fps_key, path)
        if fps.size != 1:
            raise FormatError(f"{path}: {fps_key} of shape {fps.shape}, expected one number")
        name = str(arrays["name"]) if "name" in arrays else _stem(path)
        return SMPLMotion(
            poses=poses,
            trans=_numeric(arrays, "trans", path),
            betas=_numeric(arrays, "betas", path).reshape(-1),
            gender=arrays.get("gender", "neutral"),
            fps=float(fps.reshape(-1)[0]),
            name=name,
            source=_source(arrays, path),
        )
    except DataError as exc:
        message = str(exc)
        raise DataError(
            message if message.startswith(str(path)) else f"{path}: {message}"
        ) from None
    except (ValueError, TypeError) as exc:
        raise FormatError(f"{path}: malformed motion arrays ({exc})") from None


def _numeric(arrays: Mapping[str, np.ndarray], key: str, path: Path) -> np.ndarray:
    """``arrays[key]`` as float64; FormatError unless it holds numbers (not text, not complex)."""
    arr = np.asarray(arrays[key])
    if arr.dtype.kind not in "biuf":
        raise FormatError(f"{path}: {key} has dtype {arr.dtype}, expected numbers")
    return arr.astype(np.float64)


def _source(arrays: Mapping[str, np.ndarray], path: Path) -> dict:
    source = {"file": str(path), "format": _kind(arrays)}
    if "source" in arrays:
        try:
            extra = json.loads(str(arrays["source"]))
        except (ValueError, RecursionError):
            raise FormatError(f"{path}: source is not JSON") from None
        if not isinstance(extra, dict):
            raise FormatError(f"{path}: source is not a JSON object")
        source.update(extra)
    return source


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the file. Decoding a damaged archive can fail in many ways (zipfile, zlib,
    numpy's header parser, a huge declared shape), so every exception of the decoding itself is
    a FormatError."""
    if not path.is_file():
        raise FileNotFoundError(2, "No such file", str(path))
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise ValueError("a single .npy array")
            return {key: data[key] for key in data.files}
    except Exception as exc:  # the decoding of a damaged file: see the docstring
        reason = str(exc) or type(exc).__name__
        if "allow_pickle" in reason or "Object arrays" in reason:
            reason = "it holds pickled objects, which rbmcap does not load"
        raise FormatError(
            f"{path}: cannot read as an AMASS .npz (truncated or not a numpy archive: {reason})"
        ) from None


def _poses_from_full(poses: np.ndarray, path: Path) -> np.ndarray:
    poses = np.asarray(poses, dtype=np.float64)
    if poses.ndim != 2 or poses.shape[1] not in (72, 156, 165):
        raise FormatError(
            f"{path}: poses of shape {poses.shape}, expected (T, 72) SMPL, (T, 156) SMPL+H "
            f"or (T, 165) SMPL-X"
        )
    joints = poses.reshape(len(poses), poses.shape[1] // 3, 3)
    if joints.shape[1] == 24:
        return joints
    hands = _SMPLH_HANDS if joints.shape[1] == 52 else _SMPLX_HANDS
    return np.concatenate([joints[:, :22], joints[:, list(hands)]], axis=1)


def _poses_from_split_keys(arrays: Mapping[str, np.ndarray], path: Path) -> np.ndarray:
    for key in ("root_orient", "pose_body"):
        if key not in arrays:
            raise _missing(path, arrays, key)
    root = _numeric(arrays, "root_orient", path)
    body = _numeric(arrays, "pose_body", path)
    if root.ndim != 2 or root.shape[1] != 3 or body.shape != (len(root), 63):
        raise FormatError(
            f"{path}: root_orient {root.shape} / pose_body {body.shape}, "
            f"expected (T, 3) and (T, 63)"
        )
    hands = np.zeros((len(root), 2, 3))
    if "pose_hand" in arrays:
        pose_hand = _numeric(arrays, "pose_hand", path)
        if pose_hand.shape != (len(root), 90):
            raise FormatError(f"{path}: pose_hand of shape {pose_hand.shape}, expected (T, 90)")
        hands = pose_hand.reshape(len(root), 2, 15, 3)[:, :, 0]
    return np.concatenate([root[:, None], body.reshape(-1, 21, 3), hands], axis=1)


def _kind(arrays: Mapping[str, np.ndarray]) -> str:
    if "mocap_frame_rate" in arrays or "pose_body" in arrays:
        return "amass-smplx"
    width = np.asarray(arrays["poses"]).shape[-1]
    return {72: "smpl", 156: "amass-smplh"}.get(width, "amass-smplx")


def _missing(path: Path, arrays: Mapping[str, np.ndarray], key: str) -> FormatError:
    have = ", ".join(sorted(arrays)) or "nothing"
    return FormatError(f"{path}: not an AMASS motion file: missing {key} (it has: {have})")


def _strip_label(message: str) -> str:
    return message.split(": ", 1)[1] if ": " in message else message


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (*SEQUENCE_SUFFIXES, ".npz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


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
    from rbmcap.atomic import write_text_atomic

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
