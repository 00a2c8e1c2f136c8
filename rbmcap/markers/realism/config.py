"""Realism configuration: every knob with its unit, loaded from ``conf/realism/<preset>.yaml``
through :func:`rbmcap.config.compose.load_config` (the dataclasses below are the schema).

Presets: ``none`` (paper reproduction: ideal plates), ``realistic`` (a careful lab capture) and
``harsh`` (a hurried capture: loose straps, dirty cameras). Units are in the field names: ``_mm``
millimetres, ``_deg`` degrees, ``_s`` seconds, ``_hz`` hertz, ``_per_min`` events per minute.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rbmcap.config.compose import ConfigValueError, build_config, load_config
from rbmcap.config.packaged import conf_names


@dataclass(frozen=True)
class PlacementConfig:
    """Per-sequence, per-marker plate placement error (how the plate was strapped on).

    Attributes:
        slide_mm: standard deviation of the offset along the skin, per tangent axis (mm).
        spin_deg: standard deviation of the rotation about the skin normal (degrees).
        tilt_deg: standard deviation of the tilt about each tangent axis (degrees).
    """

    slide_mm: float = 0.0
    spin_deg: float = 0.0
    tilt_deg: float = 0.0


@dataclass(frozen=True)
class SoftTissueConfig:
    """Soft-tissue motion: a smooth, stationary Gaussian wobble of each plate on its segment.

    Attributes:
        position_mm: standard deviation of the displacement, per plate axis (mm).
        rotation_deg: standard deviation of the rotation vector, per plate axis (degrees).
        bandwidth_hz: width of the wobble's Gaussian amplitude spectrum exp(-f²/2bw²) (Hz).
    """

    position_mm: float = 0.0
    rotation_deg: float = 0.0
    bandwidth_hz: float = 2.0


@dataclass(frozen=True)
class NoiseConfig:
    """Optical measurement noise, white, independent per frame, in the world frame.

    Attributes:
        position_mm: standard deviation per world axis (mm).
        rotation_deg: standard deviation of the rotation-vector error per world axis (degrees).
    """

    position_mm: float = 0.0
    rotation_deg: float = 0.0


@dataclass(frozen=True)
class OcclusionConfig:
    """Occlusion gaps per marker (stored as ``valid=False``).

    Gaps start as a Poisson process in visible time; durations are log-normal, clipped.

    Attributes:
        rate_per_min: mean number of gaps per marker per minute of visible time.
        median_s: median gap duration (s).
        sigma: log-normal shape (standard deviation of the log-duration).
        min_s, max_s: duration limits (s); a gap lasts at least one frame.
    """

    rate_per_min: float = 0.0
    median_s: float = 0.2
    sigma: float = 0.8
    min_s: float = 0.0
    max_s: float = 2.0


@dataclass(frozen=True)
class RealismConfig:
    """All realism models of one preset; a zero knob switches its effect off."""

    name: str = "none"
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    soft_tissue: SoftTissueConfig = field(default_factory=SoftTissueConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    occlusion: OcclusionConfig = field(default_factory=OcclusionConfig)

    def __post_init__(self) -> None:
        for group in fields(self):
            if group.name != "name":
                _check_group(getattr(self, group.name), group.name)

    @property
    def enabled(self) -> bool:
        """Whether any model changes the ideal observations."""
        p, s, n, o = self.placement, self.soft_tissue, self.noise, self.occlusion
        knobs = (p.slide_mm, p.spin_deg, p.tilt_deg, s.position_mm, s.rotation_deg)
        return any(v > 0 for v in (*knobs, n.position_mm, n.rotation_deg, o.rate_per_min))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def fingerprint(self) -> str:
        """Short hash of the knobs (not the preset name)."""
        d = self.to_dict()
        d.pop("name")
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def _check_group(group, name: str) -> None:
    """Every knob finite and ≥ 0; a bandwidth and a median duration > 0; max_s ≥ min_s."""
    for f in fields(group):
        value = getattr(group, f.name)
        if not (0.0 <= value < math.inf):
            raise ConfigValueError(f"{name}.{f.name}", value, "expected a finite value ≥ 0")
    if isinstance(group, SoftTissueConfig) and group.bandwidth_hz <= 0:
        raise ConfigValueError(f"{name}.bandwidth_hz", group.bandwidth_hz, "must be > 0")
    if isinstance(group, OcclusionConfig) and group.median_s <= 0:
        raise ConfigValueError(f"{name}.median_s", group.median_s, "must be > 0")
    if isinstance(group, OcclusionConfig) and group.max_s < group.min_s:
        raise ConfigValueError(f"{name}.max_s", group.max_s, "must be ≥ min_s")


def available_realism() -> list[str]:
    """Names of the shipped presets."""
    return conf_names("realism")


def load_realism(name_or_path: str | Path | Mapping[str, Any] | RealismConfig) -> RealismConfig:
    """A realism preset by name (``none``, ``realistic``, ``harsh``), YAML path or mapping (e.g.
    the Hydra group holding one of those files); knobs a file leaves out keep the defaults of
    the dataclasses above.

    Raises:
        ConfigError: unknown name or missing file; an unknown key, a wrong type or a value out
            of range (the message names the file and the dotted key).
    """
    if isinstance(name_or_path, RealismConfig):
        return name_or_path
    if isinstance(name_or_path, Mapping):
        return build_config(RealismConfig, [(name_or_path, "realism config")])
    return load_config(name_or_path, "realism", RealismConfig, "realism preset")
