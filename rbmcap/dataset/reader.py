"""Reading a dataset: memory-mapped arrays with O(1) access to any sequence window.

>>> data = RBMDataset("out/synth", split="train")
>>> windows = data.windows(length=120, stride=60)
>>> sample = windows[1234]        # dict of arrays, each (120, ...)
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from rbmcap.dataset.manifest import ARRAY_DTYPES, Manifest, SequenceEntry
from rbmcap.dataset.npyio import iter_row_blocks
from rbmcap.dataset.store import sequence_checksum
from rbmcap.errors import DataError, FormatError


class RBMDataset:
    """One split of a dataset, memory-mapped.

    Args:
        path: the dataset folder (holding ``manifest.json``).
        split: which split to open ('train', 'val', 'test', ...).

    Attributes:
        manifest: the dataset's :class:`Manifest`.
        sequences: the split's sequence entries, in storage order.
        arrays: array name → read-only memory map (frames of the whole split, ...).
    """

    def __init__(self, path: str | Path, split: str = "train") -> None:
        self.path = Path(path)
        self.split = split
        self.manifest = Manifest.load(self.path)
        splits = self.manifest.splits()
        if split not in splits:
            raise DataError(
                f"{self.path}: no split {split!r}; it has {', '.join(splits) or 'no sequences'}"
            )
        self.sequences: list[SequenceEntry] = self.manifest.split_sequences(split)
        self.num_frames = splits[split]["frames"]
        self.arrays: dict[str, np.ndarray] = {}
        for name in ARRAY_DTYPES:
            file = self.path / split / f"{name}.npy"
            try:
                arr = np.load(file, mmap_mode="r")
            except (OSError, ValueError) as exc:
                raise FormatError(f"{file}: missing or unreadable ({exc})") from exc
            if arr.shape[0] != self.num_frames:
                raise FormatError(f"{file}: {arr.shape[0]} frames, manifest says {self.num_frames}")
            self.arrays[name] = arr
        self._offsets = np.array([s.offset for s in self.sequences], dtype=np.int64)
        self._frames = np.array([s.frames for s in self.sequences], dtype=np.int64)
        self._index = {s.name: i for i, s in enumerate(self.sequences)}

    def __len__(self) -> int:
        return len(self.sequences)

    @property
    def marker_names(self) -> list[str]:
        return [m["name"] for m in self.manifest.config["markers"]["markers"]]

    def index(self, name: str) -> int:
        """Position of the sequence ``name`` in this split."""
        if name not in self._index:
            raise DataError(f"{self.path}: no sequence {name!r} in split {self.split!r}")
        return self._index[name]

    def window(self, sequence: int, start: int = 0, length: int | None = None) -> dict[str, Any]:
        """Frames [start, start + length) of one sequence, as memory-mapped views.

        Args:
            sequence: position of the sequence in the split.
            start: first frame within the sequence.
            length: number of frames (default: to the end).

        Returns:
            array name → (length, ...) read-only view.
        """
        if not 0 <= sequence < len(self.sequences):
            raise IndexError(f"sequence {sequence} out of range (0..{len(self.sequences) - 1})")
        frames = int(self._frames[sequence])
        length = frames - start if length is None else length
        if start < 0 or length < 0 or start + length > frames:
            raise IndexError(f"window [{start}, {start + length}) outside 0..{frames}")
        a = int(self._offsets[sequence]) + start
        return {n: arr[a : a + length] for n, arr in self.arrays.items()}

    def sequence(self, sequence: int | str) -> dict[str, Any]:
        """All frames of one sequence (by position or name)."""
        i = self.index(sequence) if isinstance(sequence, str) else sequence
        return self.window(i)

    def windows(self, length: int, stride: int | None = None) -> Windows:
        """Fixed-length windows over every sequence long enough (see :class:`Windows`)."""
        return Windows(self, length, stride or length)

    def verify(self) -> list[str]:
        """Recompute every sequence's checksum; return the names of those that do not match."""
        bad = []
        for s in self.sequences:
            digests = {}
            for n in ARRAY_DTYPES:
                h = digests[n] = hashlib.sha256()
                for block in iter_row_blocks(
                    self.path / self.split / f"{n}.npy", s.offset, s.offset + s.frames
                ):
                    h.update(block.tobytes())
            if sequence_checksum(digests) != s.checksum:
                bad.append(s.name)
        return bad


class Windows:
    """Map-style collection of fixed-length windows (for a training data loader).

    Window k is found by a binary search over per-sequence window counts and read by slicing the
    memory maps, so access costs the same wherever the window lies.

    Args:
        dataset: the split; length: frames per window; stride: frames between window starts.
    """

    def __init__(self, dataset: RBMDataset, length: int, stride: int) -> None:
        if length <= 0 or stride <= 0:
            raise ValueError("window length and stride must be positive")
        self.dataset, self.length, self.stride = dataset, int(length), int(stride)
        counts = np.maximum(0, (dataset._frames - length) // stride + 1)
        self._ends = np.cumsum(counts)

    def __len__(self) -> int:
        return int(self._ends[-1]) if self._ends.size else 0

    def locate(self, k: int) -> tuple[int, int]:
        """(sequence position, start frame) of window ``k``."""
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(f"window {k} out of range (0..{len(self) - 1})")
        seq = int(np.searchsorted(self._ends, k, side="right"))
        before = int(self._ends[seq - 1]) if seq else 0
        return seq, (k - before) * self.stride

    def sequence_positions(self) -> np.ndarray:
        """(len(self),) the sequence position of every window."""
        return np.searchsorted(self._ends, np.arange(len(self)), side="right")

    def __getitem__(self, k: int) -> dict[str, np.ndarray]:
        """Window ``k`` as in-memory arrays (copies, safe to hand to torch)."""
        seq, start = self.locate(k)
        return {n: np.array(a) for n, a in self.dataset.window(seq, start, self.length).items()}


def dataset_info(path: str | Path) -> dict[str, Any]:
    """Summary of a dataset: splits (sequences, frames), marker set, realism, body, hash."""
    m = Manifest.load(path)
    cfg = m.config
    info = {
        "path": str(path),
        "format_version": cfg.get("format_version"),
        "splits": m.splits(),
        "sequences": len(m.sequences),
        "frames": sum(s.frames for s in m.sequences),
        "marker_set": m.marker_set,
        "marker_kind": cfg.get("markers", {}).get("kind"),
        "num_markers": len(cfg.get("markers", {}).get("markers", [])),
        "realism": m.realism,
        "body_model": m.body_model,
        "fps": cfg.get("fps"),
        "seed": cfg.get("seed"),
        "config_hash": m.config_hash,
        "skipped": len(m.skipped),
    }
    if m.shard is not None:
        info["shard"] = m.shard
    return info
