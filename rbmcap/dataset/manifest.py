"""The dataset manifest: what a synthesised dataset holds and how it was made.

A dataset is a folder::

    DATASET/manifest.json
    DATASET/<split>/{poses,betas,trans,joints,rbm_pos,rbm_rot,rbm_valid}.npy

Each ``.npy`` holds the split's sequences concatenated along time (axis 0); a sequence's rows are
``[offset, offset + frames)``. The manifest records the format version, the full synthesis
configuration and its hash, the array layouts, and per sequence: name, source (path relative to
the motion folder), split, frames, offset, fps and a SHA-256 checksum of its rows. It holds no
times, hosts or worker counts, so the same inputs and configuration give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rbmcap.dataset.npyio import atomic_write_text, canonical_json, read_json
from rbmcap.errors import FormatError

FORMAT = "rbmcap-dataset"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ARRAY_DTYPES: dict[str, str] = {
    "poses": "float32",
    "betas": "float32",
    "trans": "float32",
    "joints": "float32",
    "rbm_pos": "float32",
    "rbm_rot": "float32",
    "rbm_valid": "bool",
}
"""Arrays of every split, in checksum order, with their dtypes."""
SPLIT_ORDER = ("train", "val", "test")


def array_tails(num_markers: int, num_betas: int) -> dict[str, tuple[int, ...]]:
    """Per-frame shape of each array."""
    return {
        "poses": (24, 3),
        "betas": (num_betas,),
        "trans": (3,),
        "joints": (24, 3),
        "rbm_pos": (num_markers, 3),
        "rbm_rot": (num_markers, 3, 3),
        "rbm_valid": (num_markers,),
    }


def split_rank(split: str) -> tuple[int, str]:
    """Sort key: train, val, test, then any other split alphabetically."""
    return (SPLIT_ORDER.index(split), "") if split in SPLIT_ORDER else (len(SPLIT_ORDER), split)


def sequence_order(split: str, source: str) -> tuple[tuple[int, str], str]:
    """The global order of sequences in a dataset (independent of shards and workers)."""
    return (split_rank(split), source)


def config_hash(config: dict[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of a configuration."""
    blob = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def config_differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two configurations."""
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += config_differences(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}")
    return out


@dataclass
class SequenceEntry:
    """One sequence of a dataset.

    Attributes:
        name: unique name (the source path without its extension).
        source: path of the motion file relative to the motion folder ('/' separators).
        split: 'train', 'val', 'test' or another split name.
        frames: number of frames; offset: first row in the split's arrays.
        fps: frame rate of the stored sequence.
        checksum: 'sha256:<hex>' of the sequence's rows, array by array (see ``ARRAY_DTYPES``);
            each array's block checksums are not stored separately.
        input_sha256: SHA-256 of the motion file the sequence was made from.
    """

    name: str
    source: str
    split: str
    frames: int
    offset: int
    fps: float
    checksum: str
    input_sha256: str = ""

    @property
    def order(self):
        return sequence_order(self.split, self.source)


@dataclass
class Manifest:
    """Contents of ``manifest.json``.

    Attributes:
        config: the synthesis configuration (markers, body, realism, fps, seed, ...).
        config_hash: :func:`config_hash` of ``config``.
        arrays: per array, its dtype and per-frame shape.
        sequences: every sequence, in dataset order (split, then source).
        skipped: motion files that could not be used, with the reason.
        shard: for a shard's output, {'index', 'count', 'total_sequences'}; None otherwise.
    """

    config: dict[str, Any]
    config_hash: str
    arrays: dict[str, dict[str, Any]]
    sequences: list[SequenceEntry] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    shard: dict[str, int] | None = None

    @property
    def marker_set(self) -> str:
        return str(self.config.get("markers", {}).get("name", ""))

    @property
    def realism(self) -> str:
        return str(self.config.get("realism", {}).get("name", ""))

    @property
    def body_model(self) -> str:
        return str(self.config.get("body", {}).get("id", ""))

    def splits(self) -> dict[str, dict[str, int]]:
        """Sequences and frames per split, in split order."""
        out: dict[str, dict[str, int]] = {}
        for s in self.sequences:
            d = out.setdefault(s.split, {"sequences": 0, "frames": 0})
            d["sequences"] += 1
            d["frames"] += s.frames
        return {k: out[k] for k in sorted(out, key=split_rank)}

    def split_sequences(self, split: str) -> list[SequenceEntry]:
        return [s for s in self.sequences if s.split == split]

    def to_dict(self) -> dict[str, Any]:
        d = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "marker_set": self.marker_set,
            "body_model": self.body_model,
            "realism": self.realism,
            "config": self.config,
            "config_hash": self.config_hash,
            "arrays": self.arrays,
            "splits": self.splits(),
            "sequences": [asdict(s) for s in self.sequences],
            "skipped": self.skipped,
        }
        if self.shard is not None:
            d["shard"] = self.shard
        return d

    def save(self, folder: str | Path) -> Path:
        """Write ``folder/manifest.json`` atomically."""
        path = Path(folder) / MANIFEST
        atomic_write_text(path, canonical_json(self.to_dict()))
        return path

    @classmethod
    def load(cls, folder: str | Path) -> Manifest:
        """Read ``folder/manifest.json``.

        Raises:
            FormatError: no manifest, not an rbmcap dataset, or an unsupported format version.
        """
        path = Path(folder) / MANIFEST
        if not path.is_file():
            raise FormatError(f"{folder}: not an rbmcap dataset (no {MANIFEST})")
        try:
            d = read_json(path)
        except (OSError, json.JSONDecodeError) as exc:
            raise FormatError(f"{path}: unreadable manifest ({exc})") from exc
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise FormatError(f"{path}: not an rbmcap dataset manifest")
        if d.get("format_version") != FORMAT_VERSION:
            raise FormatError(
                f"{path}: format version {d.get('format_version')}, this rbmcap reads "
                f"{FORMAT_VERSION}"
            )
        try:
            return cls(
                config=d["config"],
                config_hash=d["config_hash"],
                arrays=d["arrays"],
                sequences=[SequenceEntry(**s) for s in d["sequences"]],
                skipped=list(d.get("skipped", [])),
                shard=d.get("shard"),
            )
        except (KeyError, TypeError) as exc:
            raise FormatError(f"{path}: malformed manifest ({exc})") from exc


def arrays_layout(tails: dict[str, tuple[int, ...]]) -> dict[str, dict[str, Any]]:
    """The manifest's ``arrays`` entry from per-frame shapes."""
    return {n: {"dtype": ARRAY_DTYPES[n], "frame_shape": list(tails[n])} for n in ARRAY_DTYPES}
