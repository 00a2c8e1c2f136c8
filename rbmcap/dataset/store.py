"""Writing a dataset: per-sequence parts, resume after interruption, atomic finalisation.

While a run is in progress the output folder holds ``.rbmcap-work/``: the configuration of the
run (``config.json``) and one finished *part* per sequence (``parts/<key>/``: the sequence's
arrays and its manifest entry). A part is written under a temporary name and renamed when
complete, so an interrupted run leaves only whole parts behind; re-running skips them. When every
sequence is done the parts are concatenated per split into the final arrays (temporary files,
then renames), the manifest is written last (it marks the dataset complete) and the work folder is
removed. Every part depends only on its motion file and the configuration, and the final layout
only on the sequence order, so an interrupted-then-resumed run is byte-identical to one that was
never interrupted.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from rbmcap.dataset.manifest import (
    ARRAY_DTYPES,
    MANIFEST,
    Manifest,
    SequenceEntry,
    arrays_layout,
    config_differences,
    config_hash,
    split_rank,
)
from rbmcap.dataset.npyio import (
    NpyWriter,
    atomic_write_text,
    canonical_json,
    iter_row_blocks,
    read_json,
)
from rbmcap.errors import ConfigError, DataError, FormatError

WORK = ".rbmcap-work"
CRASH_ENV = "RBMCAP_TEST_CRASH"
"""Test hook: ``EVENT:N`` ends the process abruptly at the N-th ``EVENT`` (part, chunk, finalize),
as a kill would, to test resumption."""

_crash_counts: dict[str, int] = {}


class CorruptRows(DataError):
    """A sequence's stored rows do not match its checksum."""

    def __init__(self, entry: SequenceEntry) -> None:
        super().__init__(f"{entry.source} ({entry.split}): stored rows do not match their checksum")
        self.entry = entry


RowLocator = Callable[[SequenceEntry, str], tuple[Path, int, int]]
"""(entry, array name) → (.npy file, first row, end row) holding that sequence's rows."""


def crash_point(event: str) -> None:
    """Die here (no clean-up, like SIGKILL) when the test hook asks for it."""
    spec = os.environ.get(CRASH_ENV)
    if not spec or not spec.startswith(event + ":"):
        return
    _crash_counts[event] = _crash_counts.get(event, 0) + 1
    if _crash_counts[event] >= int(spec.split(":", 1)[1]):
        os._exit(86)


def part_key(split: str, source: str) -> str:
    """File-system-safe key of a sequence's part."""
    return hashlib.sha256(f"{split}\0{source}".encode()).hexdigest()[:24]


def sequence_checksum(digests: dict[str, Any]) -> str:
    """'sha256:<hex>' over the per-array SHA-256 digests, in ``ARRAY_DTYPES`` order."""
    h = hashlib.sha256()
    for name in ARRAY_DTYPES:
        h.update(digests[name].digest())
    return "sha256:" + h.hexdigest()


class DatasetWriter:
    """Builds the dataset folder ``out`` for one configuration.

    Args:
        out: the dataset folder.
        config: the synthesis configuration (JSON-serialisable); its hash guards the folder.
        tails: per-frame shape of each array (:func:`rbmcap.dataset.manifest.array_tails`).
        shard: {'index', 'count', 'total_sequences'} when this run is one shard of many.
    """

    def __init__(
        self,
        out: str | Path,
        config: dict[str, Any],
        tails: dict[str, tuple[int, ...]],
        shard: dict[str, int] | None = None,
    ) -> None:
        self.out = Path(out)
        self.config = config
        self.config_hash = config_hash(config)
        self.tails = {k: tuple(v) for k, v in tails.items()}
        self.shard = shard

    @property
    def work(self) -> Path:
        return self.out / WORK

    @property
    def parts(self) -> Path:
        return self.work / "parts"

    # ----------------------------------------------------------------------------- opening
    def open(self) -> Manifest | None:
        """Check the folder and get it ready; return its manifest if it is already complete.

        Raises:
            ConfigError: the folder holds a dataset (complete or in progress) made with another
                configuration, or files that are not an rbmcap dataset.
        """
        existing = None
        for done in self.out.glob(f"{WORK}.done-*"):  # left by a kill in finalize's clean-up
            shutil.rmtree(done, ignore_errors=True)
        if (self.out / MANIFEST).is_file():
            existing = Manifest.load(self.out)
            self._check_same_config(existing.config, self.out / MANIFEST)
        if (self.work / "config.json").is_file():
            try:
                work_config = read_json(self.work / "config.json")["config"]
            except (OSError, ValueError, KeyError) as exc:
                raise FormatError(f"{self.work / 'config.json'}: unreadable ({exc})") from exc
            self._check_same_config(work_config, self.work / "config.json")
        elif existing is None and self.out.exists():
            if not self.out.is_dir():
                raise ConfigError(f"{self.out}: exists and is not a folder")
            if any(self.out.iterdir()):
                raise ConfigError(
                    f"{self.out}: folder is not empty and holds no rbmcap dataset; "
                    "choose another output folder"
                )
        if existing is not None and not self.work.exists():
            return existing
        self.parts.mkdir(parents=True, exist_ok=True)
        for stale in self.parts.glob(".*.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        for stale in self.out.glob(".manifest.json.tmp-*"):
            stale.unlink()
        atomic_write_text(
            self.work / "config.json",
            canonical_json({"config": self.config, "config_hash": self.config_hash}),
        )
        return existing

    def _check_same_config(self, other: dict[str, Any], where: Path) -> None:
        if config_hash(other) == self.config_hash:
            return
        diff = config_differences(other, self.config)
        shown = ", ".join(diff[:4]) + (f" and {len(diff) - 4} more" if len(diff) > 4 else "")
        raise ConfigError(
            f"{where}: the existing output was made with another configuration "
            f"(differs in: {shown or 'format'}); refusing to mix them. Use another output "
            f"folder or delete {self.out}"
        )

    # ------------------------------------------------------------------------------- parts
    def part_dir(self, split: str, source: str) -> Path:
        return self.parts / part_key(split, source)

    def finished_part(self, split: str, source: str, input_sha256: str) -> SequenceEntry | None:
        """The entry of a finished part made from the same input file, else None."""
        meta = self.part_dir(split, source) / "entry.json"
        if not meta.is_file():
            return None
        try:
            entry = SequenceEntry(**read_json(meta))
        except (OSError, ValueError, TypeError):
            return None
        return entry if entry.input_sha256 == input_sha256 else None

    def write_part(
        self, entry: SequenceEntry, blocks: Iterable[dict[str, np.ndarray]]
    ) -> SequenceEntry:
        """Write one sequence's arrays from row blocks; commit the part atomically.

        Args:
            entry: the sequence's entry (``frames`` must be exact; checksum is filled in).
            blocks: dicts of array name → (rows, *tail) block, covering the sequence in order.
        """
        final = self.part_dir(entry.split, entry.source)
        tmp = self.parts / f".{final.name}.tmp-{os.getpid()}"
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        # Parts skip fsync: a kill cannot lose renamed data, and finalisation checks every
        # part against its checksum, so even a power cut cannot slip a damaged part through.
        writers = {
            n: NpyWriter(tmp / f"{n}.npy", entry.frames, self.tails[n], ARRAY_DTYPES[n], False)
            for n in ARRAY_DTYPES
        }
        digests = {n: hashlib.sha256() for n in ARRAY_DTYPES}
        try:
            for block in blocks:
                for n, w in writers.items():
                    arr = np.ascontiguousarray(block[n], dtype=ARRAY_DTYPES[n])
                    w.append(arr)
                    digests[n].update(arr.tobytes())
                crash_point("chunk")
            for w in writers.values():
                w.close()
        except BaseException:
            for w in writers.values():
                w.abort()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        entry = SequenceEntry(**{**asdict(entry), "checksum": sequence_checksum(digests)})
        atomic_write_text(tmp / "entry.json", canonical_json(asdict(entry)), durable=False)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        crash_point("part")
        return entry

    # ---------------------------------------------------------------------------- finalise
    def finalize(
        self,
        entries: list[SequenceEntry],
        skipped: list[dict[str, str]] | None = None,
        locate: RowLocator | None = None,
    ) -> Manifest:
        """Concatenate ``entries`` per split, write the manifest, clean up.

        Args:
            entries: the sequences (any order; laid out in dataset order).
            skipped: unusable inputs to record.
            locate: where each sequence's rows are (default: this run's parts).
        """
        locate = locate or self._part_rows
        ordered = sorted(entries, key=lambda e: e.order)
        splits: dict[str, list[SequenceEntry]] = {}
        for e in ordered:
            splits.setdefault(e.split, []).append(e)
        final_entries: list[SequenceEntry] = []
        for split in sorted(splits, key=split_rank):
            offset = 0
            for e in splits[split]:
                final_entries.append(SequenceEntry(**{**asdict(e), "offset": offset}))
                offset += e.frames
            try:
                write_split_arrays(self.out / split, splits[split], offset, self.tails, locate)
            except CorruptRows as exc:
                if locate == self._part_rows:  # drop the damaged part so a re-run redoes it
                    shutil.rmtree(self.part_dir(exc.entry.split, exc.entry.source))
                    raise DataError(f"{exc}; its part was removed, run again to redo it") from None
                raise
        for old in self.out.iterdir():
            if old.is_dir() and old.name != WORK and old.name not in splits:
                if (old / "rbm_pos.npy").is_file():  # a split of an earlier attempt
                    shutil.rmtree(old)
        manifest = Manifest(
            config=self.config,
            config_hash=self.config_hash,
            arrays=arrays_layout(self.tails),
            sequences=final_entries,
            skipped=sorted(skipped or [], key=lambda s: s.get("source", "")),
            shard=self.shard,
        )
        manifest.save(self.out)
        # Renamed first, so a kill while removing it leaves no half work folder beside the
        # complete dataset (open() removes such leftovers).
        done = self.out / f"{WORK}.done-{os.getpid()}"
        os.replace(self.work, done)
        shutil.rmtree(done, ignore_errors=True)
        return manifest

    def _part_rows(self, entry: SequenceEntry, name: str) -> tuple[Path, int, int]:
        return self.part_dir(entry.split, entry.source) / f"{name}.npy", 0, entry.frames


def write_split_arrays(
    folder: Path,
    entries: list[SequenceEntry],
    total: int,
    tails: dict[str, tuple[int, ...]],
    locate: RowLocator,
) -> None:
    """Concatenate the sequences ``entries`` into ``folder/<array>.npy``, checking checksums.

    Each array is written to a temporary file; all are renamed into place at the end.

    Raises:
        DataError: a sequence's rows do not match its recorded checksum (a corrupt input).
    """
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(".*.npy.tmp-*"):  # left by an interrupted finalisation
        stale.unlink()
    digests: list[dict[str, Any]] = [{} for _ in entries]
    tmps = {}
    for n in ARRAY_DTYPES:
        tmps[n] = folder / f".{n}.npy.tmp-{os.getpid()}"
        with NpyWriter(tmps[n], total, tails[n], ARRAY_DTYPES[n]) as w:
            for i, e in enumerate(entries):
                h = digests[i][n] = hashlib.sha256()
                path, start, stop = locate(e, n)
                for block in iter_row_blocks(path, start, stop):
                    w.append(block)
                    h.update(block.tobytes())
    for i, e in enumerate(entries):
        if sequence_checksum(digests[i]) != e.checksum:
            for tmp in tmps.values():
                tmp.unlink(missing_ok=True)
            raise CorruptRows(e)
    for n, tmp in tmps.items():
        os.replace(tmp, folder / f"{n}.npy")
        crash_point("finalize")
