"""``RBMDataModule``: fixed-length windows of a synthesised dataset for Lightning.

Training windows overlap (stride ``train_stride``) and are shuffled; validation and test windows
tile each sequence. Arrays come straight from the dataset's memory maps; the marker-dropout
augmentation happens on the batch in :class:`rbmcap.training.module.RBMRegressor`.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from rbmcap.dataset import RBMDataset
from rbmcap.errors import DataError

_RENAME = {"rbm_pos": "pos", "rbm_rot": "rot", "rbm_valid": "valid"}


class WindowDataset(Dataset):
    """Torch view of one split's windows: dict of tensors ``pos``, ``rot``, ``valid``, ``poses``,
    ``betas`` (per window, from its first frame), ``trans``, ``joints``."""

    def __init__(self, path: str | Path, split: str, length: int, stride: int) -> None:
        self.data = RBMDataset(path, split)
        self.windows = self.data.windows(length, stride)
        if len(self.windows) == 0:
            longest = max((s.frames for s in self.data.sequences), default=0)
            raise DataError(
                f"{path}: split {split!r} has no window of {length} frames "
                f"(longest sequence: {longest} frames)"
            )

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, k: int) -> dict[str, torch.Tensor]:
        w = self.windows[k]
        out = {_RENAME.get(n, n): torch.from_numpy(np.ascontiguousarray(a)) for n, a in w.items()}
        out["betas"] = out["betas"][0]
        return out


class RBMDataModule(L.LightningDataModule):
    """Train / val / test windows of a dataset folder.

    Args:
        path: dataset folder (``rbmcap synth`` output).
        window: frames per window (120 = 2 s at 60 Hz).
        train_stride: frames between training window starts.
        batch_size: windows per batch.
        num_workers: data-loader worker processes.
        train_split, val_split, test_split: split names (model selection uses ``val_split``).
    """

    def __init__(
        self,
        path: str | Path,
        window: int = 120,
        train_stride: int = 20,
        batch_size: int = 15,
        num_workers: int = 0,
        train_split: str = "train",
        val_split: str = "val",
        test_split: str = "test",
    ) -> None:
        super().__init__()
        self.path = Path(path)
        self.window, self.train_stride = int(window), int(train_stride)
        self.batch_size, self.num_workers = int(batch_size), int(num_workers)
        self.splits = {"train": train_split, "val": val_split, "test": test_split}
        self._sets: dict[str, WindowDataset] = {}

    def dataset(self, stage: str) -> WindowDataset:
        if stage not in self._sets:
            stride = self.train_stride if stage == "train" else self.window
            self._sets[stage] = WindowDataset(self.path, self.splits[stage], self.window, stride)
        return self._sets[stage]

    def _loader(self, stage: str, shuffle: bool) -> DataLoader:
        return DataLoader(
            self.dataset(stage),
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            drop_last=False,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
