"""The evaluated sequences of a split: each one's arrays cut to the frames evaluated."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rbmcap.body.params import SMPLParams
from rbmcap.errors import DataError
from rbmcap.evaluation.occlusion import hide_plates

if TYPE_CHECKING:
    from rbmcap.dataset.reader import RBMDataset


@dataclass(frozen=True)
class Sequence:
    """One evaluated sequence.

    Attributes:
        name: the dataset's sequence name.
        arrays: the dataset's arrays cut to the evaluated frames: ``poses`` (T, 24, 3),
            ``betas`` (T, B), ``trans`` (T, 3) m, ``joints`` (T, 24, 3) m, ``rbm_pos``
            (T, N, 3) m, ``rbm_rot`` (T, N, 3, 3), ``rbm_valid`` (T, N) bool.
    """

    name: str
    arrays: dict[str, np.ndarray]

    @property
    def frames(self) -> int:
        return len(self.arrays["poses"])

    @property
    def observations(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """(pos (T, N, 3) m, rot (T, N, 3, 3) or None for point markers, valid (T, N))."""
        a = self.arrays
        return a["rbm_pos"], a.get("rbm_rot"), a["rbm_valid"]

    @property
    def joints(self) -> np.ndarray:
        """(T, 24, 3) true joints (m)."""
        return self.arrays["joints"]

    @property
    def truth(self) -> dict[str, np.ndarray]:
        """The true parameters as arrays: ``poses`` (T, 24, 3), ``betas`` (B,), ``trans`` (T, 3)."""
        a = self.arrays
        return {"poses": a["poses"], "betas": a["betas"][0], "trans": a["trans"]}

    @property
    def truth_params(self) -> SMPLParams:
        """:attr:`truth` as :class:`SMPLParams` (copied: the arrays may be read-only maps)."""
        return SMPLParams.from_mapping({k: np.array(v) for k, v in self.truth.items()})


@dataclass(frozen=True)
class Split:
    """A dataset split as evaluated: the sequences whose names match ``sequences`` (a glob), each
    one's first ``per_sequence`` frames, ``max_frames`` frames in all (None: no cap), the plates
    ``hidden`` (indices) invalid in every frame (:mod:`rbmcap.evaluation.occlusion`). Iterating
    reads it afresh."""

    data: RBMDataset
    max_frames: int | None = None
    per_sequence: int | None = None
    hidden: tuple[int, ...] = ()
    sequences: str | None = None
    """Only the sequences whose names match this glob (``fnmatch``), or all (None)."""

    def __iter__(self) -> Iterator[Sequence]:
        left = self.max_frames
        for i, entry in enumerate(self.data.sequences):
            if left is not None and left <= 0:
                break
            if self.sequences is not None and not fnmatch.fnmatchcase(entry.name, self.sequences):
                continue
            arrays = {k: np.asarray(v) for k, v in self.data.sequence(i).items()}
            cap = min(x for x in (left, self.per_sequence, entry.frames) if x is not None)
            if cap < entry.frames:
                arrays = {k: v[:cap] for k, v in arrays.items()}
            if self.hidden:
                arrays["rbm_valid"] = hide_plates(arrays["rbm_valid"], self.hidden)
            seq = Sequence(entry.name, arrays)
            if left is not None:
                left -= seq.frames
            yield seq


@dataclass(frozen=True)
class CounterpartSplit:
    """The same sequences (names and frames) as ``split``, read from another dataset of the
    same motions (the point-marker data of the point-marker baseline)."""

    data: RBMDataset
    split: Split

    def __iter__(self) -> Iterator[Sequence]:
        for seq in self.split:
            try:
                arrays = self.data.sequence(seq.name)
            except DataError as exc:
                raise DataError(f"{self.data.path}: {exc} (it must hold the same motions)") from exc
            yield Sequence(seq.name, {k: np.asarray(v)[: seq.frames] for k, v in arrays.items()})
