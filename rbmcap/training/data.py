"""``RBMDataModule``: fixed-length windows of a synthesised dataset for Lightning.

Training windows overlap (stride ``train_stride``) and are shuffled; validation and test windows
tile each sequence. Arrays come straight from the dataset's memory maps; the marker-dropout
augmentation happens on the batch in :class:`rbmcap.training.module.RBMRegressor`.

A dataset that does not exist yet is made by :meth:`RBMDataModule.prepare_data`: motions from
a :class:`MotionRecipe` (procedural, and real clips), then synthesis with the data module's
body, marker set, realism preset and frame rate. Lightning calls ``prepare_data`` in one process
only (local rank 0 of each node), never in every DDP process; ``setup`` (every process) then
checks that the dataset was made with the configured marker set.

Both classes are the ``_target_`` of the ``data`` configuration group (``conf/data``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from rbmcap.dataset import Manifest, RBMDataset
from rbmcap.errors import ConfigError, DataError
from rbmcap.markers.markerset import MarkerSet, load_marker_set

log = logging.getLogger("rbmcap.train")


@dataclass(frozen=True)
class MotionRecipe:
    """How to make the motions of a dataset that does not exist yet: ``num`` procedural motions
    (master ``seed``, ``subjects`` body shapes, 0 for automatic) written to ``motions_dir`` (reused
    when it already holds motions), and real motion from the BVH folders of ``bvh`` added beside
    them. ``seed`` also seeds the synthesis.

    Each ``bvh`` entry is a mapping: ``dir`` (a folder of clips, e.g. CMU on the iClone rig),
    ``joint_map`` (e.g. ``iclone_cc``; default ``auto``), optionally ``subject_pattern`` (a
    regular expression whose ``subject`` group names the unit a split holds out, for clips that
    name no actor) and ``splits`` (subject → val/test; other subjects train), retargeted with
    :func:`rbmcap.motion.folder.build_motion_folder` into ``motions_dir/<dir name>/`` and merged
    into the split lists.

    ``shape`` spreads the procedural body shapes (``std``, ``clip`` of
    :func:`rbmcap.motion.procedural.sample_betas`; default 0.8 and 2). The folder names do not
    carry it, so the motions and the dataset record it and refuse a recipe asking another.

    ``workers`` processes make the procedural motions and synthesise the dataset; the data are
    the same for any count, so it is in no folder name.
    """

    motions_dir: str | Path
    num: int
    seed: int
    subjects: int
    bvh: Sequence[Mapping[str, Any]]
    shape: Mapping[str, float] | None = None
    workers: int = 1

    def shape_spread(self) -> dict[str, float]:
        """``shape`` with its defaults filled in: {"std": ..., "clip": ...}."""
        from rbmcap.motion.procedural.library import SHAPE_CLIP, SHAPE_STD

        given = dict(self.shape or {})
        unknown = sorted(set(given) - {"std", "clip"})
        if unknown:
            raise ConfigError(f"data.generate.shape: unknown key(s) {', '.join(unknown)}")
        return {
            "std": float(given.get("std", SHAPE_STD)),
            "clip": float(given.get("clip", SHAPE_CLIP)),
        }


RECIPE_RECORD = "recipe.json"
"""The procedural shape spread a dataset was made with, beside its ``manifest.json``."""


def check_shape_record(record: Path, wanted: Mapping[str, float], what: str) -> None:
    """ConfigError when the JSON ``record`` (a missing one: the defaults, which were the only
    spread before it was recorded) names a shape spread other than ``wanted``."""
    from rbmcap.motion.procedural.library import SHAPE_CLIP, SHAPE_STD

    made = {"std": SHAPE_STD, "clip": SHAPE_CLIP}
    if record.is_file():
        made = json.loads(record.read_text()).get("shape", made)
    if any(abs(float(made[k]) - float(wanted[k])) > 1e-9 for k in ("std", "clip")):
        raise ConfigError(
            f"{what}: made with body shapes of std {made['std']} clipped to ±{made['clip']}, "
            f"but data.generate.shape asks std {wanted['std']} clipped to ±{wanted['clip']}; "
            "give data.path and data.generate.motions_dir new folders"
        )


def make_dataset(
    path: Path,
    recipe: MotionRecipe,
    *,
    body: str,
    markers: str | Mapping[str, Any],
    realism: str,
    fps: float,
) -> None:
    """Write into ``path`` the dataset synthesised from the motions ``recipe`` describes, on
    ``body`` with the marker set ``markers`` (a name, path or parsed mapping) and the ``realism``
    preset at ``fps`` Hz (logging each step)."""
    from rbmcap.body import load_body_model
    from rbmcap.dataset import SynthOptions, synthesize_dataset

    body_model = load_body_model(body)
    motions = Path(recipe.motions_dir)
    # Generation must not move the global RNGs: training numerics are the same whether or not
    # this run had to make its data.
    with torch.random.fork_rng(devices=[]):
        add_procedural_motions(motions, recipe, fps, body_model)
        for source in recipe.bvh:
            add_bvh_motions(motions, source, fps, body_model, recipe.workers)
        name = markers if isinstance(markers, str) else markers.get("name")
        log.info(
            "generating dataset %s: synthesising %s (markers %s, realism %s)",
            path,
            motions,
            name,
            realism,
        )
        splits = motions / "splits"
        synthesize_dataset(
            SynthOptions(
                motions=motions,
                out=path,
                body=body,
                markers=markers,
                realism=realism,
                fps=fps,
                seed=recipe.seed,
                progress=False,
                split_lists=splits if splits.is_dir() else None,
                workers=recipe.workers,
            ),
            body=body_model,
        )
    (path / RECIPE_RECORD).write_text(json.dumps({"shape": recipe.shape_spread()}) + "\n")


def add_procedural_motions(motions: Path, recipe: MotionRecipe, fps: float, body) -> None:
    """Generate the ``recipe``'s procedural motions at ``fps`` Hz on ``body`` into ``motions``
    unless it already holds motions (see :class:`MotionRecipe`)."""
    from rbmcap.motion.procedural.library import DATASET_NAME, LIBRARY_RECORD, generate_library

    shape = recipe.shape_spread()
    if motions.is_dir() and any(motions.rglob("*.npz")):
        if recipe.num > 0 and (motions / DATASET_NAME).is_dir():
            check_shape_record(motions / DATASET_NAME / LIBRARY_RECORD, shape, str(motions))
        return
    log.info(
        "generating %d procedural motions into %s (seed %d)",
        recipe.num,
        motions,
        recipe.seed,
    )
    generate_library(
        motions,
        recipe.num,
        recipe.seed,
        fps=fps,
        num_subjects=recipe.subjects or None,
        shape_std=shape["std"],
        shape_clip=shape["clip"],
        body=body,
        workers=recipe.workers,
    )


def add_bvh_motions(
    motions: Path, source: Mapping[str, Any], fps: float, body, workers: int = 1
) -> None:
    """Retarget the BVH folder ``source['dir']`` into ``motions`` unless it is there already
    (see :class:`MotionRecipe`), with ``workers`` processes."""
    from rbmcap.motion.folder import build_motion_folder

    folder = Path(str(source["dir"]))
    if not folder.is_dir():
        raise DataError(f"{folder}: no such folder of BVH clips (data.generate.bvh)")
    if (motions / folder.name).is_dir():
        return
    log.info(
        "retargeting the BVH clips of %s into %s (joint map %s)",
        folder,
        motions,
        source.get("joint_map") or "auto",
    )
    splits = {str(k): str(v) for k, v in dict(source.get("splits") or {}).items()}
    lists = build_motion_folder(
        folder,
        motions,
        str(source.get("joint_map") or "auto"),
        splits=splits,
        fps=fps,
        body=body,
        subject_pattern=source.get("subject_pattern"),
        workers=workers,
    )
    log.info("real motion: %s", ", ".join(f"{k} {len(v)}" for k, v in lists.items()))


def check_marker_set(path: Path, markers: MarkerSet) -> None:
    """Refuse a dataset made with another marker set, or another definition of the same name
    (e.g. a ``markers.*`` override on the command line)."""
    made = dict(Manifest.load(path).config.get("markers", {}))
    made.pop("vertex_ids", None)
    if made.get("name") != markers.name:
        raise ConfigError(
            f"{path} was made with marker set {made.get('name')!r}, "
            f"the config asks for {markers.name!r}"
        )
    if load_marker_set(made).fingerprint != markers.fingerprint:
        raise ConfigError(
            f"{path} was made with another definition of marker set {markers.name!r} than the "
            "configured one (a markers.* override?); give the changed set its own name or "
            "data.path"
        )


_RENAME = {"rbm_pos": "pos", "rbm_rot": "rot", "rbm_valid": "valid"}


class WindowDataset(Dataset):
    """Torch view of one split's windows: dict of tensors ``pos``, ``rot``, ``valid``, ``poses``,
    ``betas`` (per window, from its first frame), ``trans``, ``joints``.

    ``oversample`` maps a glob over sequence names (``fnmatch``) to a whole repeat count: each
    window of a matching sequence appears that many times (the first matching glob counts), so
    a small source (e.g. real clips among thousands of procedural ones) weighs more per epoch.
    """

    def __init__(
        self,
        path: str | Path,
        split: str,
        length: int,
        stride: int,
        oversample: dict[str, int] | None = None,
    ) -> None:
        self.data = RBMDataset(path, split)
        self.windows = self.data.windows(length, stride)
        if len(self.windows) == 0:
            longest = max((s.frames for s in self.data.sequences), default=0)
            raise DataError(
                f"{path}: split {split!r} has no window of {length} frames "
                f"(longest sequence: {longest} frames)"
            )
        self.index = window_repeats(self.windows, self.data.sequences, oversample or {})

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, k: int) -> dict[str, torch.Tensor]:
        w = self.windows[int(self.index[k])]
        out = {_RENAME.get(n, n): torch.from_numpy(np.ascontiguousarray(a)) for n, a in w.items()}
        out["betas"] = out["betas"][0]
        return out


def window_repeats(windows, sequences, oversample: dict[str, int]) -> np.ndarray:
    """The window indices of a :class:`WindowDataset`, each repeated as ``oversample`` says
    (window order kept). ConfigError for a count below 1 or a glob that matches nothing."""
    import fnmatch

    repeat = np.ones(len(sequences), dtype=np.int64)
    names = [s.name for s in sequences]
    for pattern, count in oversample.items():
        if int(count) < 1 or int(count) != count:
            raise ConfigError(
                f"data.oversample[{pattern!r}] = {count}: expected a whole number >= 1"
            )
        hit = [i for i, n in enumerate(names) if fnmatch.fnmatchcase(n, pattern)]
        if not hit:
            raise ConfigError(f"data.oversample: {pattern!r} matches no sequence of the split")
        fresh = [i for i in hit if repeat[i] == 1]
        repeat[fresh] = int(count)
    return np.repeat(np.arange(len(windows)), repeat[windows.sequence_positions()])


class EpochShuffle(Sampler[int]):
    """A random order of ``size`` indices that depends only on ``seed`` and the epoch, which
    Lightning sets (``set_epoch``) before each epoch: a run resumed from a checkpoint sees the
    batches the uninterrupted run saw, whatever the global random state."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed, self.epoch = int(size), int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return iter(torch.randperm(self.size, generator=gen).tolist())


class RBMDataModule(L.LightningDataModule):
    """Train / val / test windows of a dataset folder.

    Args:
        path: dataset folder (``rbmcap synth`` output).
        window: frames per window (the training configuration uses 120 = 2 s at 60 Hz).
        batch_size: windows per batch.
        train_stride: frames between training window starts; default ``window`` (no overlap).
        num_workers: data-loader worker processes.
        train_split, val_split, test_split: split names (model selection uses ``val_split``).
        generate: the motions :meth:`prepare_data` makes the dataset from when ``path`` has
            none; without it a missing dataset is a :class:`DataError`.
        body, realism, fps: what the dataset is synthesised with when it is made: a body
            (``standin`` or a folder of SMPL model files), a realism preset and a frame rate (Hz).
        markers: the marker set (a name, path or parsed mapping) the dataset is made with, and
            must have been made with (checked in :meth:`setup`).
        oversample: training split only: glob over sequence names → repeat count of their
            windows (see :class:`WindowDataset`).
        seed: seed of the training order (:class:`EpochShuffle`: one order per epoch).

    Lightning runs :meth:`prepare_data` on local rank 0 of each node; where several nodes share
    the data folder, set ``prepare_data_per_node = False`` so that only global rank 0 makes it.
    """

    def __init__(
        self,
        path: str | Path,
        window: int,
        batch_size: int,
        train_stride: int | None = None,
        num_workers: int = 0,
        train_split: str = "train",
        val_split: str = "val",
        test_split: str = "test",
        *,
        generate: MotionRecipe | None = None,
        body: str | None = None,
        realism: str | None = None,
        fps: float | None = None,
        markers: str | Mapping[str, Any] | None = None,
        oversample: Mapping[str, int] | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.seed = int(seed)
        self.oversample = dict(oversample or {})
        self.path = Path(path)
        self.window = int(window)
        self.train_stride = int(train_stride) if train_stride is not None else self.window
        self.batch_size, self.num_workers = int(batch_size), int(num_workers)
        self.splits = {"train": train_split, "val": val_split, "test": test_split}
        self.generate, self.markers = generate, markers
        self.synthesis = {"body": body, "realism": realism, "fps": fps}
        self._sets: dict[str, WindowDataset] = {}

    def has_dataset(self) -> bool:
        return (self.path / "manifest.json").is_file()

    def prepare_data(self) -> None:
        """Make the dataset from ``generate`` if ``path`` has none (one process per node); refuse
        an existing one made with another body-shape spread than ``generate`` asks."""
        if self.has_dataset():
            if self.generate is not None and self.generate.num > 0:
                check_shape_record(
                    self.path / RECIPE_RECORD, self.generate.shape_spread(), str(self.path)
                )
            return
        if self.generate is None:
            raise DataError(
                f"{self.path}: no dataset there and no recipe (data.generate) to make one"
            )
        unset = [k for k, v in {**self.synthesis, "markers": self.markers}.items() if v is None]
        if unset:
            raise ConfigError(f"{self.path}: making the dataset needs {', '.join(unset)}")
        make_dataset(self.path, self.generate, markers=self.markers, **self.synthesis)

    def setup(self, stage: str | None = None) -> None:
        """Check the dataset exists (``prepare_data`` made it) and has the right marker set."""
        if not self.has_dataset():
            raise DataError(
                f"{self.path}: no dataset there (prepare_data makes it when a recipe is configured)"
            )
        if self.markers is not None:
            check_marker_set(self.path, load_marker_set(self.markers))

    def dataset(self, stage: str) -> WindowDataset:
        if stage not in self._sets:
            stride = self.train_stride if stage == "train" else self.window
            repeats = self.oversample if stage == "train" else None
            self._sets[stage] = WindowDataset(
                self.path, self.splits[stage], self.window, stride, repeats
            )
        return self._sets[stage]

    def _loader(self, stage: str, shuffle: bool) -> DataLoader:
        data = self.dataset(stage)
        return DataLoader(
            data,
            batch_size=self.batch_size,
            sampler=EpochShuffle(len(data), self.seed) if shuffle else None,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            drop_last=False,
            # the loader's own seed draws leave the global generator alone
            generator=torch.Generator().manual_seed(self.seed),
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
