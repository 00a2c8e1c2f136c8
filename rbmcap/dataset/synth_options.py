"""What a synthesis run needs: :class:`SynthOptions`, the one place its defaults and checks live.

``rbmcap synth`` takes its option defaults from the dataclass fields, the Hydra twin
(``rbmcap-synthesize``, :mod:`rbmcap.cli.synth`) composes its configuration from them, the
training data recipe (:mod:`rbmcap.dataset.recipe`) and library callers
build it directly; all go through :meth:`SynthOptions.__post_init__`, so a
bad value is the same :class:`~rbmcap.errors.ConfigError`, naming the field, from each.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rbmcap.errors import ConfigError
from rbmcap.markers.markerset import DEFAULT_MARKERS

GENDERS = ("neutral", "male", "female")
"""Body model genders (``gender``)."""


@dataclass
class SynthOptions:
    """Everything ``rbmcap synth`` needs.

    Attributes:
        motions: folder of AMASS-style ``*_poses.npz`` files (or one file).
        out: dataset folder to write.
        body: ``'standin'`` or a path to SMPL/SMPL-H model files.
        gender: one of :data:`GENDERS`.
        markers: marker set name (``rbm14``, ``rbm_a`` …), YAML path or parsed mapping.
        realism: realism preset name (``none``, ``realistic``, ``harsh``), YAML path or mapping.
        fps: frame rate of the output (Hz).
        seed: seed of the realism models.
        workers: worker processes.
        shard: ``(i, n)`` or ``"i/n"``: the i-th (0-based) of n shards, merged later with
            ``rbmcap dataset merge``; ``None`` for all.
        split_lists: folder with ``train.txt``/``val.txt``/``test.txt`` (default: lists in
            ``motions``, else AMASS's recommended split).
        progress: show a progress bar on stderr.

    Raises:
        ConfigError: a value of the wrong type or out of range; the message names the field.
    """

    motions: str | Path
    out: str | Path
    body: str = "standin"
    gender: str = "neutral"
    markers: str | Mapping[str, Any] = DEFAULT_MARKERS
    realism: str | Mapping[str, Any] = "none"
    fps: float = 60.0
    seed: int = 0
    workers: int = 1
    shard: tuple[int, int] | str | None = None
    split_lists: str | Path | None = None
    progress: bool = True

    def __post_init__(self) -> None:
        self.motions = _path("motions", self.motions)
        self.out = _path("out", self.out)
        if self.split_lists is not None:
            self.split_lists = _path("split_lists", self.split_lists)
        if isinstance(self.body, Path):
            self.body = str(self.body)
        if not isinstance(self.body, str) or not self.body:
            raise ConfigError(f"body={self.body!r}: expected 'standin' or a model path")
        if self.gender not in GENDERS:
            raise ConfigError(f"gender={self.gender!r}: expected one of {', '.join(GENDERS)}")
        for name in ("markers", "realism"):
            value = getattr(self, name)
            if isinstance(value, Path):
                setattr(self, name, str(value))
            elif isinstance(value, str) and not value:
                raise ConfigError(f"{name}='': expected a name, a YAML path or a mapping")
            elif not isinstance(value, (str, Mapping)) and not hasattr(value, "to_dict"):
                raise ConfigError(f"{name}={value!r}: expected a name, a YAML path or a mapping")
        self.fps = _number("fps", self.fps, float)
        if not math.isfinite(self.fps) or self.fps <= 0:
            raise ConfigError(f"fps={self.fps}: must be a positive frame rate (Hz)")
        self.seed = _number("seed", self.seed, int)
        self.workers = _number("workers", self.workers, int)
        if self.workers < 1:
            raise ConfigError(f"workers={self.workers}: need at least 1")
        if self.shard is not None:
            self.shard = parse_shard(self.shard)
        if not isinstance(self.progress, bool):
            raise ConfigError(f"progress={self.progress!r}: expected true or false")

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The fields that have defaults, with them: ``{"body": "standin", …}``."""
        return {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING
        }

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> SynthOptions:
        """Options from a mapping (e.g. a Hydra config); keys that are not fields are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


def parse_shard(text: str | tuple[int, int] | list[int]) -> tuple[int, int]:
    """'i/n' (or (i, n)) → (i, n) with 0 ≤ i < n."""
    try:
        if isinstance(text, (tuple, list)):
            i, n = (_number("shard", x, int) for x in text)
        else:
            i, n = (int(x) for x in str(text).split("/"))
    except (ValueError, ConfigError):
        raise ConfigError(f"shard={text!r}: expected i/n, e.g. 0/8") from None
    if not 0 <= i < n:
        raise ConfigError(f"shard={text!r}: need 0 ≤ i < n")
    return i, n


def _path(name: str, value: Any) -> Path:
    if isinstance(value, Path):
        return value
    if isinstance(value, str) and value:
        return Path(value)
    raise ConfigError(f"{name}={value!r}: expected a path")


def _number(name: str, value: Any, kind: type) -> Any:
    """``value`` as ``kind`` (int or float); bools, strings and fractional ints are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name}={value!r}: expected a number")
    if kind is int and not (math.isfinite(value) and value == int(value)):
        raise ConfigError(f"{name}={value!r}: expected a whole number")
    return kind(value)
