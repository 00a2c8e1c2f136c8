"""``RBMDataModule``: fixed-length windows of a synthesised dataset for Lightning.

Training windows overlap (stride ``train_stride``) and are shuffled; validation and test windows
tile each sequence. Arrays come straight from the dataset's memory maps; the marker-dropout
augmentation happens on the batch in :class:`rbmcap.training.module.RegressorLitModule`.

A dataset that does not exist yet is made by :meth:`RBMDataModule.prepare_data` from its
:class:`~rbmcap.dataset.recipe.MotionRecipe` (:func:`~rbmcap.dataset.recipe.make_dataset`).
Lightning calls ``prepare_data`` in one process only (local rank 0 of each node), never in every
DDP process; ``setup`` (every process) then checks that the dataset was made with the configured
marker set.

The data module is the ``_target_`` of the ``data`` configuration group (``conf/data``), the recipe
that of its ``generate`` node.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from rbmcap.dataset.reader import RBMDataset
from rbmcap.dataset.recipe import (
    RECIPE_RECORD,
    MotionRecipe,
    check_marker_set,
    check_shape_record,
    make_dataset,
)
from rbmcap.errors import ConfigError, DataError
from rbmcap.markers.markerset import load_marker_set

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
