"""Which virtual markers on the body stand for which markers of an OpenSim model.

A map is YAML (``conf/opensim/<name>.yaml`` or any path; ``gait2392`` is shipped): the marker set
the virtual markers come from, and per OpenSim marker the virtual markers whose mean it is, its
inverse-kinematics weight, and its body and location (metres, that body's frame) on the generic
model, used where a model file lacks the marker. ``coordinates`` lists coordinates held at the
model's default value during inverse kinematics, with their weights.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rbmcap.config.compose import load_mapping
from rbmcap.errors import ConfigError

DEFAULT_MAP = "gait2392"


@dataclass(frozen=True)
class OpenSimMarker:
    """One OpenSim marker: ``name``, the ``virtual`` marker names it is the mean of, its IK
    ``weight``, and its ``body`` and ``location`` (3,) m on the generic model."""

    name: str
    virtual: tuple[str, ...]
    weight: float
    body: str
    location: tuple[float, float, float]


@dataclass(frozen=True)
class OpenSimMeasurement:
    """One scaling measurement: its ``name``, the marker ``pairs`` whose distances it compares
    and the ``bodies`` it scales (:mod:`rbmcap.io.opensim.scale`)."""

    name: str
    pairs: tuple[tuple[str, str], ...]
    bodies: tuple[str, ...]


@dataclass(frozen=True)
class OpenSimMarkerMap:
    """A map's ``name``, its ``marker_set`` name, its ``markers`` in file order, the
    ``coordinates`` (name → weight) held at their default values, and its scaling
    ``measurements`` (none: the map cannot scale a model)."""

    name: str
    marker_set: str
    markers: tuple[OpenSimMarker, ...]
    coordinates: Mapping[str, float]
    measurements: tuple[OpenSimMeasurement, ...] = ()

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.markers]


def load_marker_map(spec: str | Path | OpenSimMarkerMap = DEFAULT_MAP) -> OpenSimMarkerMap:
    """The map named ``spec`` (packaged name or YAML path). Raises ConfigError naming the key
    that is missing or wrong."""
    if isinstance(spec, OpenSimMarkerMap):
        return spec
    data = load_mapping(spec, "opensim", "OpenSim marker map")
    where = f"OpenSim marker map {spec!s}"
    for key in ("marker_set", "markers"):
        if key not in data:
            raise ConfigError(f"{where}: no '{key}'")
    if not isinstance(data["markers"], Mapping) or not data["markers"]:
        raise ConfigError(f"{where}: 'markers' must map OpenSim marker names to entries")
    markers = tuple(_marker(str(k), v, where) for k, v in data["markers"].items())
    coords = data.get("coordinates") or {}
    if not isinstance(coords, Mapping):
        raise ConfigError(f"{where}: 'coordinates' must map coordinate names to weights")
    scale = data.get("scale") or {}
    if not isinstance(scale, Mapping):
        raise ConfigError(f"{where}: 'scale' must map measurement names to pairs and bodies")
    names = {m.name for m in markers}
    return OpenSimMarkerMap(
        name=str(data.get("name", Path(str(spec)).stem)),
        marker_set=str(data["marker_set"]),
        markers=markers,
        coordinates={str(k): _weight(v, f"{where}: coordinate {k}") for k, v in coords.items()},
        measurements=tuple(_measurement(str(k), v, names, where) for k, v in scale.items()),
    )


def _measurement(name: str, entry: Any, markers: set[str], where: str) -> OpenSimMeasurement:
    where = f"{where}: scale {name}"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a mapping with pairs and bodies")
    pairs = entry.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        raise ConfigError(f"{where}: 'pairs' must list pairs of the map's markers")
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and set(map(str, pair)) <= markers):
            raise ConfigError(f"{where}: pair {pair!r} is not two of the map's markers")
    bodies = _names(
        entry.get("bodies"), f"{where}: 'bodies' must list the model's bodies it scales"
    )
    return OpenSimMeasurement(
        name=name,
        pairs=tuple((str(a), str(b)) for a, b in pairs),
        bodies=tuple(bodies),
    )


def _names(value: Any, message: str) -> list[str]:
    """``value`` as a non-empty list of names (one name alone taken as a list of one); raises
    ConfigError with ``message`` otherwise."""
    if isinstance(value, str):
        value = [value]
    if not value or not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(message)
    return value


def _weight(value: Any, where: str) -> float:
    try:
        weight = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: weight {value!r} is not a number") from None
    if not (math.isfinite(weight) and weight >= 0):
        raise ConfigError(f"{where}: weight {value!r} must be ≥ 0")
    return weight


def _marker(name: str, entry: Any, where: str) -> OpenSimMarker:
    where = f"{where}: marker {name}"
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a mapping with virtual, weight, body, location")
    virtual = _names(
        entry.get("virtual"), f"{where}: 'virtual' must list marker names of the marker set"
    )
    location = entry.get("location")
    try:
        loc = tuple(float(x) for x in location)
    except (TypeError, ValueError):
        loc = ()
    if len(loc) != 3 or not all(math.isfinite(x) for x in loc):
        raise ConfigError(f"{where}: 'location' must be three numbers (m)")
    return OpenSimMarker(
        name=name,
        virtual=tuple(virtual),
        weight=_weight(entry.get("weight", 1.0), where),
        body=str(entry.get("body", "")),
        location=loc,  # type: ignore[arg-type]
    )
