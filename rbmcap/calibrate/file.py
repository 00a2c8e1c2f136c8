"""The calibration file (design §8, "calib.yaml"): what ``rbmcap calibrate`` writes.

Schema (fixed, so files move between tools and people)::

    betas: [0.12, -0.40, ...]      # the subject's shape
    frames: [12, 132]              # the T-pose window used: array positions [a, b), half-open
    alignment: {rotation: [rx, ry, rz], translation_m: [x, y, z]}   # virtual -> capture world
    plates:
      left_shin: {rotation_offset: [rx, ry, rz], position_offset_m: [x, y, z]}

Rotations are rotation vectors in radians; offsets are in the plate's (virtual) frame:
``R_phys = R_virt · R_off`` and ``p_phys = p_virt + R_virt · t_off``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from rbmcap.atomic import write_text_atomic
from rbmcap.configfiles import MAX_MAGNITUDE, finite_vector, read_yaml, short_repr, type_name
from rbmcap.errors import ConfigError, FormatError

HEADER = (
    "# rbmcap calibration (design §8). frames: array positions [a, b) of the T-pose window.\n"
    "# Rotations: rotation vectors (radians). Offsets in the plate frame:\n"
    "#   R_phys = R_virt R_off, p_phys = p_virt + R_virt t_off. alignment: virtual -> world.\n"
)
KEYS = ("betas", "frames", "alignment", "plates")
MAX_FRAME = 2.0**53
"""Largest frame position accepted (every integer up to it is exact in a float64)."""


@dataclass(eq=False)
class PlateOffset:
    """One plate's constant offset: ``rotation`` (3,) rotation vector (rad), ``position`` (3,) m,
    both in the virtual plate's frame."""

    rotation: np.ndarray
    position: np.ndarray


@dataclass(eq=False)
class Calibration:
    """A session's calibration.

    Attributes:
        betas: (B,) the subject's shape.
        frames: (a, b) the T-pose window, array positions, half-open.
        rotation: (3,) rotation vector and translation: (3,) metres of the alignment that maps
            the virtual T-pose (zero pose, canonical Z-up frame) into the capture world.
        plates: plate name -> :class:`PlateOffset`, in the marker set's order.
    """

    betas: np.ndarray
    frames: tuple[int, int]
    rotation: np.ndarray
    translation: np.ndarray
    plates: dict[str, PlateOffset] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The YAML content (plain lists and floats)."""

        def f(x) -> list[float]:
            return [float(v) for v in np.asarray(x).reshape(-1)]

        return {
            "betas": f(self.betas),
            "frames": [int(self.frames[0]), int(self.frames[1])],
            "alignment": {"rotation": f(self.rotation), "translation_m": f(self.translation)},
            "plates": {
                name: {"rotation_offset": f(o.rotation), "position_offset_m": f(o.position)}
                for name, o in self.plates.items()
            },
        }

    def save(self, path: str | Path) -> Path:
        """Write the YAML file atomically."""
        text = yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)
        return write_text_atomic(path, HEADER + text)

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """Read a calibration file.

        Raises:
            ConfigError: no such file; a bad value (the message names the file and the key).
            FormatError: the file is not UTF-8, not YAML (``file:line:column``) or not a mapping.
        """
        path = Path(path)
        data = read_yaml(path)
        if not isinstance(data, dict):
            raise FormatError(
                f"{path}: not a calibration file: expected a mapping with keys "
                f"{', '.join(KEYS)}, got {type_name(data)}"
            )
        return from_dict(data, str(path))


def from_dict(data, where: str = "calibration") -> Calibration:
    """A :class:`Calibration` from the YAML content; ConfigError naming ``where`` and the key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping with keys {', '.join(KEYS)}")
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {short_repr(unknown[0])}; expected {', '.join(KEYS)}"
        )
    for key in KEYS:
        if key not in data:
            raise ConfigError(f"{where}: missing key {key!r}")
    frames = _vector(data["frames"], 2, where, "frames", bound=MAX_FRAME)
    if frames[0] != int(frames[0]) or frames[1] != int(frames[1]) or not 0 <= frames[0] < frames[1]:
        raise ConfigError(
            f"{where}: frames: expected two integers 0 ≤ a < b, got {short_repr(data['frames'])}"
        )
    align = _mapping(data["alignment"], ("rotation", "translation_m"), where, "alignment")
    plates = _mapping(data["plates"], None, where, "plates")
    offsets = {}
    for name, entry in plates.items():
        if isinstance(name, (bool, list, dict)) or name is None or name == "":
            raise ConfigError(f"{where}: plates: {short_repr(name)} is not a plate name")
        key = f"plates.{name}"
        e = _mapping(entry, ("rotation_offset", "position_offset_m"), where, key)
        offsets[str(name)] = PlateOffset(
            _vector(e["rotation_offset"], 3, where, f"{key}.rotation_offset"),
            _vector(e["position_offset_m"], 3, where, f"{key}.position_offset_m"),
        )
    return Calibration(
        betas=_vector(data["betas"], None, where, "betas"),
        frames=(int(frames[0]), int(frames[1])),
        rotation=_vector(align["rotation"], 3, where, "alignment.rotation"),
        translation=_vector(align["translation_m"], 3, where, "alignment.translation_m"),
        plates=offsets,
    )


def _mapping(value, keys, where: str, key: str) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: expected a mapping, got {short_repr(value)}")
    for k in keys or ():
        if k not in value:
            raise ConfigError(f"{where}: {key}: missing key {k!r}")
    extra = [k for k in value if k not in keys] if keys else []
    if extra:
        raise ConfigError(f"{where}: {key}: unknown key {short_repr(extra[0])}")
    return value


def _vector(
    value, size: int | None, where: str, key: str, bound: float = MAX_MAGNITUDE
) -> np.ndarray:
    """``value`` as float64 (size,): finite numbers of magnitude ≤ ``bound``, else ConfigError
    ``where: key: expected N finite numbers ...``."""
    arr = finite_vector(value, size, bound)
    if arr is None:
        want = f"{size} finite numbers" if size else "a list of finite numbers"
        raise ConfigError(
            f"{where}: {key}: expected {want} (|x| ≤ {bound:g}), got {short_repr(value)}"
        )
    return arr
