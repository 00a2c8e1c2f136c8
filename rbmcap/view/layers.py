"""What ``rbmcap view`` shows, read from its inputs: body layers (one SMPL motion each) and plate
layers (observed 6-DoF plates), without any viewer library.

An input is one of
- a motion ``.npz`` (:meth:`SMPLMotion.load`): one body layer named after the file;
- a capture ``.npz`` from ``rbmcap import`` (:class:`~rbmcap.io.capture.Capture`): one plate layer;
- a saved evaluation sequence ``.npz`` (``<eval>/sequences/NNN.npz``), or an ``rbmcap eval`` output
  folder (one of its sequences: ``sequence``, a name or glob, default the network's worst): a
  body layer per method (the truth first) and the plates the methods saw.

The truth, when there is one (an evaluation's, or a motion passed as ``truth``), is what the
per-frame error readout compares every other body against.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.errors import DataError, FormatError
from rbmcap.evaluation.saved import TRUTH, load_sequence, load_sequences, worst_sequence
from rbmcap.io.capture import Capture
from rbmcap.motion.smpl_motion import SMPLMotion

METHOD_COLOURS = {
    "truth": (150, 150, 150),
    "network": (70, 130, 230),
    "baseline_6dof": (235, 140, 40),
    "hybrid": (160, 90, 200),
}
"""RGB per evaluation method key; other layers take :data:`OTHER_COLOURS` in turn."""

OTHER_COLOURS = ((60, 170, 110), (220, 80, 90), (200, 180, 60), (90, 190, 200), (180, 120, 90))


@dataclass(frozen=True)
class BodyLayer:
    """One body to draw: ``motion`` (an SMPLMotion) posed on the body ``body_id`` (a stand-in
    id ``standin-v1/<gender>``, or ``kind:/path/<gender>`` as a checkpoint records it)."""

    key: str
    label: str
    motion: SMPLMotion
    body_id: str
    colour: tuple[int, int, int]

    @property
    def fps(self) -> float:
        return self.motion.fps

    @property
    def frames(self) -> int:
        return self.motion.num_frames


@dataclass(frozen=True)
class PlateLayer:
    """Plates to draw: ``names`` (N,), ``pos`` (T, N, 3) m, ``rot`` (T, N, 3, 3) world-from-plate
    or None (point markers), ``valid`` (T, N) bool, at ``fps``."""

    key: str
    label: str
    names: tuple[str, ...]
    pos: np.ndarray
    rot: np.ndarray | None
    valid: np.ndarray
    fps: float

    @property
    def frames(self) -> int:
        return len(self.valid)


@dataclass(frozen=True)
class ViewContent:
    """Everything one view shows; ``truth`` is the key of the reference body layer, or None."""

    title: str
    bodies: tuple[BodyLayer, ...]
    plates: tuple[PlateLayer, ...]
    truth: str | None

    @property
    def fps(self) -> float:
        """The timeline's rate: the highest layer's, so that every frame of every layer shows."""
        return max(layer.fps for layer in (*self.bodies, *self.plates))

    @property
    def duration_s(self) -> float:
        return max(layer.frames / layer.fps for layer in (*self.bodies, *self.plates))


def load_view(
    paths, sequence: str | None = None, truth: str | os.PathLike | None = None
) -> ViewContent:
    """Read the inputs of ``rbmcap view`` (see the module docstring) into layers.

    Args:
        paths: motion / capture / saved-sequence ``.npz`` files and eval output folders.
        sequence: for eval folders, the sequence name or glob (default: the network's worst).
        truth: a motion file to compare the other bodies against (it is shown too).

    Raises:
        DataError: no input, two truths, or an eval folder without the sequence.
        FormatError: a file that is none of the above.
    """
    paths = [Path(p) for p in paths] + ([Path(truth)] if truth is not None else [])
    if not paths:
        raise DataError("nothing to view: give motion/capture .npz files or eval folders")
    bodies: list[BodyLayer] = []
    plates: list[PlateLayer] = []
    truth_key = None
    for i, path in enumerate(paths):
        b, p, t = _read_input(path, sequence, is_truth=truth is not None and i == len(paths) - 1)
        b = [_with_unique_key(layer, bodies, len(bodies) + k) for k, layer in enumerate(b)]
        if t is not None and truth_key is not None:
            raise DataError(
                f"{path}: a second truth (already comparing against {truth_key!r}); "
                "view one evaluation at a time, or leave out --truth"
            )
        truth_key = b[0].key if t is not None else truth_key
        bodies += b
        plates += [_unique_plates(layer, plates) for layer in p]
    title = ", ".join(p.name for p in paths)
    return ViewContent(title, tuple(bodies), tuple(plates), truth_key)


def _read_input(path: Path, sequence: str | None, is_truth: bool):
    """(body layers, plate layers, truth marker) of one input path."""
    if path.is_dir():
        return _saved_layers(_eval_sequence(path, sequence))
    if not path.is_file():
        raise FormatError(f"{path}: no such file or folder")
    keys = _npz_keys(path)
    if "methods" in keys and "rbm_pos" in keys:
        return _saved_layers(load_sequence(path))
    if {"names", "pos", "rot", "valid"} <= keys:
        return [], [_capture_layer(path)], None
    motion = SMPLMotion.load(path)
    label = f"{path.stem} (truth)" if is_truth else path.stem
    # a motion file names no body: the stand-in in the motion's gender (or the viewer's --model)
    layer = BodyLayer(path.stem, label, motion, f"standin/{motion.gender}", (0, 0, 0))
    return [layer], [], (True if is_truth else None)


def _npz_keys(path: Path) -> set[str]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return set(z.files)
    except (OSError, ValueError) as exc:
        raise FormatError(f"{path}: not a motion, capture or saved sequence .npz ({exc})") from None


def _eval_sequence(folder: Path, sequence: str | None):
    """The one saved sequence of an eval folder to view: ``sequence`` (a name or glob; the
    first match) or the sequence where the network did worst."""
    if sequence is None:
        try:
            sequence = worst_sequence(folder, "network")
        except DataError:
            return load_sequences(folder)[0]  # an evaluation without the network
    return load_sequences(folder, sequence)[0]


def _saved_layers(seq):
    """A saved evaluation sequence: one body layer per method (truth first) and its plates."""
    bodies = [
        BodyLayer(key, label, seq.motion(key), seq.body, (0, 0, 0))
        for key, label in seq.labels.items()
    ]
    plates = [
        PlateLayer(
            "plates", f"plates ({seq.name})", seq.plate_names, seq.pos, seq.rot, seq.valid, seq.fps
        )
    ]
    return bodies, plates, (True if TRUTH in seq.labels else None)


def _capture_layer(path: Path) -> PlateLayer:
    cap = Capture.load(path)
    names = tuple(cap.names)
    return PlateLayer(
        path.stem, f"plates ({path.stem})", names, cap.pos, cap.rot, cap.valid, cap.fps
    )


def _with_unique_key(layer: BodyLayer, taken: list[BodyLayer], index: int) -> BodyLayer:
    """``layer`` with a key not in ``taken`` and its colour."""
    keys = {b.key for b in taken}
    key, n = layer.key, 2
    while key in keys:
        key, n = f"{layer.key}_{n}", n + 1
    colour = METHOD_COLOURS.get(layer.key, OTHER_COLOURS[index % len(OTHER_COLOURS)])
    label = layer.label if key == layer.key else f"{layer.label} #{n - 1}"
    return BodyLayer(key, label, layer.motion, layer.body_id, colour)


def _unique_plates(layer: PlateLayer, taken: list[PlateLayer]) -> PlateLayer:
    keys = {p.key for p in taken}
    key, n = layer.key, 2
    while key in keys:
        key, n = f"{layer.key}_{n}", n + 1
    return PlateLayer(key, layer.label, layer.names, layer.pos, layer.rot, layer.valid, layer.fps)
