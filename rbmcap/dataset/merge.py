"""Merging shard outputs (``rbmcap synth --shard i/n``) into one dataset.

The shards must share one configuration and, when they carry shard records, together cover every
shard of the run exactly once. Sequences are laid out in the dataset order (split, then source),
so merging the n shards of a run gives the same bytes as the unsharded run.
"""

from __future__ import annotations

from pathlib import Path

from rbmcap.dataset.manifest import ARRAY_DTYPES, Manifest, SequenceEntry
from rbmcap.dataset.store import DatasetWriter
from rbmcap.errors import ConfigError


def merge_datasets(shards: list[str | Path], out: str | Path) -> Manifest:
    """Merge the dataset folders ``shards`` into ``out``.

    Raises:
        ConfigError: shards made with different configurations, missing or repeated shards, a
            sequence present twice, or ``out`` holding a dataset of another configuration.
        DataError: a shard's rows do not match their checksums.
    """
    if not shards:
        raise ConfigError("merge: no input datasets given")
    folders = [Path(s) for s in shards]
    manifests = [Manifest.load(f) for f in folders]
    first = manifests[0]
    for folder, m in zip(folders, manifests, strict=True):
        if m.config_hash != first.config_hash:
            raise ConfigError(
                f"{folder}: made with another configuration than {folders[0]} "
                f"(config hash {m.config_hash[:12]} vs {first.config_hash[:12]}); cannot merge"
            )
    _check_shards(folders, manifests)
    owner: dict[tuple[str, str], tuple[Path, SequenceEntry]] = {}
    for folder, m in zip(folders, manifests, strict=True):
        for e in m.sequences:
            key = (e.split, e.source)
            if key in owner:
                raise ConfigError(f"{e.source} is in both {owner[key][0]} and {folder}")
            owner[key] = (folder, e)
    tails = {n: tuple(first.arrays[n]["frame_shape"]) for n in ARRAY_DTYPES}
    writer = DatasetWriter(out, first.config, tails, shard=None)
    entries = [e for _, e in owner.values()]
    existing = writer.open()
    if existing is not None and not writer.work.exists():
        same = {(e.split, e.source, e.checksum) for e in existing.sequences} == {
            (e.split, e.source, e.checksum) for e in entries
        }
        if not same:
            raise ConfigError(f"{out}: holds another dataset; merge into a new folder")
        return existing
    source_of = {(e.split, e.source): f for f, e in owner.values()}

    def locate(e: SequenceEntry, name: str) -> tuple[Path, int, int]:
        folder, original = source_of[(e.split, e.source)], owner[(e.split, e.source)][1]
        return folder / e.split / f"{name}.npy", original.offset, original.offset + e.frames

    skipped = [s for m in manifests for s in m.skipped]
    return writer.finalize(entries, skipped, locate=locate)


def _check_shards(folders: list[Path], manifests: list[Manifest]) -> None:
    records = [m.shard for m in manifests]
    if all(r is None for r in records):
        return
    if any(r is None for r in records):
        plain = folders[[r is None for r in records].index(True)]
        raise ConfigError(f"{plain}: not a shard, cannot merge it with shard outputs")
    count = records[0]["count"]  # type: ignore[index]
    seen: dict[int, Path] = {}
    for folder, r in zip(folders, records, strict=True):
        if r["count"] != count or r["total_sequences"] != records[0]["total_sequences"]:  # type: ignore[index]
            raise ConfigError(f"{folder}: shard of a different run (shard count or inputs differ)")
        if r["index"] in seen:  # type: ignore[index]
            raise ConfigError(f"{folder}: shard {r['index']}/{count} given twice")  # type: ignore[index]
        seen[r["index"]] = folder  # type: ignore[index]
    missing = sorted(set(range(count)) - set(seen))
    if missing:
        raise ConfigError(
            f"missing shard(s) {', '.join(f'{i}/{count}' for i in missing)}; merge needs all "
            f"{count}"
        )
