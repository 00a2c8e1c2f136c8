"""Each evaluated sequence as one file: the observed plates, the truth and every method's answer.

``rbmcap eval`` writes ``<out>/sequences/NNN.npz`` (NNN: the sequence's order in the split,
every plate seen) beside its report, so a viewer or a renderer can show any sequence without the
checkpoint, the dataset or a solver. One file holds (T frames, N plates):

- ``name``, ``fps`` (Hz), ``body`` (the body model's identity), ``gender``;
- ``plate_names`` (N,), ``rbm_pos`` (T, N, 3) m, ``rbm_rot`` (T, N, 3, 3) (absent for point
  markers), ``rbm_valid`` (T, N) bool: what the methods saw;
- ``methods``: JSON list of ``[key, label]``, the truth first (key ``truth``), then the methods
  in the order they ran (``network``, ``baseline_6dof``, ``hybrid``, ...);
- per method key K: ``K.poses`` (T, 24, 3) axis-angle, ``K.betas`` (B,), ``K.trans`` (T, 3) m.

:func:`load_sequences` reads a folder back as :class:`SavedSequence` objects, whose
:meth:`SavedSequence.motion` is a plain :class:`~rbmcap.motion.smpl_motion.SMPLMotion`.
"""

from __future__ import annotations

import csv
import fnmatch
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.atomic import atomic_path
from rbmcap.errors import DataError, FormatError
from rbmcap.motion.smpl_motion import SMPLMotion

SEQUENCES_DIR = "sequences"
"""The folder of an evaluation's output that holds one ``.npz`` per sequence."""

TRUTH = "truth"
"""The method key of the ground truth in a saved sequence."""

_PARAMS = ("poses", "betas", "trans")


@dataclass(frozen=True)
class SavedSequence:
    """One evaluated sequence as saved (see the module docstring for the fields).

    Attributes:
        name: the dataset's sequence name; fps: frame rate (Hz); body: body identity;
        gender: the body's gender.
        plate_names: (N,) plate names; pos (T, N, 3) m; rot (T, N, 3, 3) or None; valid (T, N).
        labels: method key → label, in order (the truth first).
        params: method key → ``{"poses", "betas", "trans"}`` arrays.
    """

    name: str
    fps: float
    body: str
    gender: str
    plate_names: tuple[str, ...]
    pos: np.ndarray
    rot: np.ndarray | None
    valid: np.ndarray
    labels: dict[str, str]
    params: dict[str, dict[str, np.ndarray]]

    @property
    def methods(self) -> list[str]:
        """The method keys, the truth first."""
        return list(self.labels)

    @property
    def frames(self) -> int:
        return len(self.valid)

    def motion(self, key: str):
        """Method ``key``'s answer (or ``"truth"``) as an :class:`SMPLMotion`."""
        if key not in self.params:
            raise DataError(
                f"sequence {self.name!r}: no method {key!r} (has {', '.join(self.params)})"
            )
        p = self.params[key]
        return SMPLMotion(
            poses=np.asarray(p["poses"], np.float64),
            trans=np.asarray(p["trans"], np.float64),
            betas=np.asarray(p["betas"], np.float64),
            gender=self.gender,
            fps=self.fps,
            name=f"{self.name} ({key})",
        )


def save_sequence(path: Path, seq: SavedSequence) -> Path:
    """Write ``seq`` to ``path`` atomically (a temporary file, then a rename)."""
    arrays = {
        "name": np.array(seq.name),
        "fps": np.array(seq.fps),
        "body": np.array(seq.body),
        "gender": np.array(seq.gender),
        "plate_names": np.array(seq.plate_names),
        "rbm_pos": np.asarray(seq.pos, np.float32),
        "rbm_valid": np.asarray(seq.valid, bool),
        "methods": np.array(json.dumps([[k, v] for k, v in seq.labels.items()])),
    }
    if seq.rot is not None:
        arrays["rbm_rot"] = np.asarray(seq.rot, np.float32)
    for key, p in seq.params.items():
        arrays.update({f"{key}.{n}": np.asarray(p[n], np.float32) for n in _PARAMS})
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    return path


def load_sequence(path: str | os.PathLike) -> SavedSequence:
    """Read one saved sequence; FormatError names the file and what is wrong."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            labels = dict(json.loads(str(z["methods"])))
            params = {k: {n: z[f"{k}.{n}"] for n in _PARAMS} for k in labels}
            return SavedSequence(
                name=str(z["name"]),
                fps=float(z["fps"]),
                body=str(z["body"]),
                gender=str(z["gender"]),
                plate_names=tuple(str(n) for n in z["plate_names"]),
                pos=z["rbm_pos"],
                rot=z["rbm_rot"] if "rbm_rot" in z.files else None,
                valid=z["rbm_valid"].astype(bool),
                labels=labels,
                params=params,
            )
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        raise FormatError(f"{path}: not a saved evaluation sequence ({exc})") from exc


def sequence_files(folder: str | os.PathLike) -> list[Path]:
    """The saved sequences of an evaluation output folder, in split order; FormatError when it has
    none (it is not an eval output folder)."""
    folder = Path(folder)
    files = sorted((folder / SEQUENCES_DIR).glob("*.npz"))
    if not files:
        raise FormatError(
            f"{folder}: no {SEQUENCES_DIR}/*.npz (is it an `rbmcap eval` output folder?)"
        )
    return files


def load_sequences(folder: str | os.PathLike, names: str | None = None) -> list[SavedSequence]:
    """Every saved sequence of an evaluation output folder (or those whose names match the glob
    ``names``), in split order."""
    out = [load_sequence(f) for f in sequence_files(folder)]
    if names is not None:
        out = [s for s in out if fnmatch.fnmatchcase(s.name, names)]
        if not out:
            raise DataError(f"{folder}: no saved sequence matches {names!r}")
    return out


def worst_sequence(folder: str | os.PathLike, method: str = "network") -> str:
    """The name of the sequence where ``method`` has its largest MPJPE, read from the folder's
    ``per_sequence.csv`` (every plate seen)."""
    path = Path(folder) / "per_sequence.csv"
    if not path.is_file():
        raise DataError(f"{path}: missing (is {folder} an `rbmcap eval` output folder?)")
    with path.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["method"] == method and not r["occluded"]]
    if not rows:
        raise DataError(f"{path}: no row for method {method!r}")
    return max(rows, key=lambda r: float(r["mpjpe_mm"]))["sequence"]


def save_evaluation(out: str | os.PathLike, result: dict) -> list[Path]:
    """Write each sequence of an :func:`~rbmcap.evaluation.runner.evaluate` result (every plate
    seen) into ``out/sequences/``: the truth and the answer of every method that ran on it.
    Files of an earlier evaluation in the same folder are removed first."""
    observed = result.get("observed")
    if not observed:
        return []
    folder = Path(out) / SEQUENCES_DIR
    for old in folder.glob("*.npz"):
        old.unlink()
    methods = result["methods"]
    paths = []
    for i, (name, (pos, rot, valid), truth) in enumerate(observed["sequences"]):
        labels = {TRUTH: "ground truth"}
        params = {TRUTH: {k: np.asarray(v) for k, v in truth.items()}}
        for key, m in methods.items():
            if name in m.answers:
                labels[key], params[key] = m.label, m.answers[name]
        seq = SavedSequence(
            name=name,
            fps=float(observed["fps"]),
            body=str(observed["body"]),
            gender=str(observed["gender"]),
            plate_names=tuple(observed["plate_names"]),
            pos=pos,
            rot=rot,
            valid=valid,
            labels=labels,
            params=params,
        )
        paths.append(save_sequence(folder / f"{i:03d}.npz", seq))
    return paths
