"""OpenSim scaling: a generic model (an ``.osim``) and a static trial's markers (a ``.trc``) → a
model scaled to the subject, through OpenSim's own ``ScaleTool`` (needs the ``opensim`` extra).

The tool runs its two steps as in OpenSim's own pipeline:

- **scaling by measurements**: each measurement of the marker map (``scale:`` in its YAML: pairs
  of markers and the bodies they scale) compares the mean distance of each pair over the static
  trial with the same pair on the generic model; the bodies it names are scaled by the ratio (the
  mean over its pairs) along all three axes, their masses too (the distribution kept, the total
  the subject's ``mass``, or the generic model's when none is given);
- **marker placement**: the scaled model is posed to the static trial by inverse kinematics (the
  map's marker weights, its held coordinates at their defaults) and each model marker is moved to
  where the trial puts it, so that later inverse kinematics sees the subject's own marker places.

The markers come from the capture or are virtual markers on the calibrated body
(:func:`rbmcap.io.opensim.export.opensim_markers`): the tool reads only the ``.trc``. Markers the
generic model lacks are added at the map's generic places first
(:func:`rbmcap.io.opensim.ik.add_missing_markers`). OpenSim writes into a private folder and the
scaled model reaches its name by ``os.replace``: a failed run leaves nothing behind.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from rbmcap.errors import DataError, FormatError
from rbmcap.io.opensim.api import load_opensim
from rbmcap.io.opensim.ik import (
    add_missing_markers,
    load_model,
    opensim_message,
    run_inverse_kinematics,
    shared_markers,
    stdout_silenced,
)
from rbmcap.io.opensim.markers import OpenSimMarkerMap, load_marker_map


@dataclass(frozen=True)
class ScaleResult:
    """What a scaling wrote and measured: the scaled ``model`` path, the scale factors per body
    (x, y, z), the subject's ``mass`` (kg) the model now has, the static trial's marker error on
    the scaled model after marker placement (m; the mean over frames of each frame's RMS, and
    the largest single error) and the markers used."""

    model: Path
    factors: dict[str, tuple[float, float, float]]
    mass: float
    static_rms_m: float
    static_max_m: float
    markers: tuple[str, ...]


def scale_model(
    model: str | os.PathLike,
    static: str | os.PathLike,
    out: str | os.PathLike,
    *,
    marker_map: str | OpenSimMarkerMap = "gait2392",
    mass: float | None = None,
) -> ScaleResult:
    """Scale ``model`` (an ``.osim``) to the subject of the static trial ``static`` (a ``.trc``,
    its whole time span averaged) and write the scaled model, its markers placed, to ``out``.

    Raises:
        ConfigError: OpenSim is not installed, or the map has no ``scale`` measurements.
        FormatError: a file is missing or does not parse. DataError: a measurement's marker is
        in neither the model nor the trial, a mass that is not positive, or OpenSim failed.
    """
    opensim = load_opensim()
    marker_map = load_marker_map(marker_map)
    static, out = Path(static), Path(out)
    if not static.is_file():
        raise FormatError(f"{static}: no such marker file")
    if not marker_map.measurements:
        raise DataError(f"OpenSim marker map {marker_map.name!r} has no 'scale' measurements")
    generic = load_model(opensim, model)
    add_missing_markers(opensim, generic, marker_map)
    shared, first, last = shared_markers(opensim, generic, static)
    _check_measured(marker_map, shared, static)
    bodies = generic.getBodySet()
    generic_mass = sum(bodies.get(i).getMass() for i in range(bodies.getSize()))
    mass = generic_mass if mass is None else float(mass)
    if not (math.isfinite(mass) and mass > 0):
        raise DataError(f"subject mass {mass!r} kg: expected a positive number")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.stem}.", dir=out.parent) as tmp:
        folder = Path(tmp)
        generic.printToXML(str(folder / "generic.osim"))
        shutil.copyfile(static, folder / "static.trc")  # the tool reads files beside its setup
        if last <= first:  # one frame: the tool needs a time range, so the frame twice
            last = _one_more_frame(opensim, folder / "static.trc")
        setup = folder / "setup_scale.xml"
        setup.write_text(_setup_xml(marker_map, (first, last), mass, generic), "utf-8")
        _run_tool(opensim, setup)
        factors = {
            body: values
            for body, values in _scale_factors(folder / "scale_factors.xml").items()
            if bodies.contains(body)  # not the frames OpenSim lists beside them
        }
        # how well the scaled model, its markers placed, fits the static trial
        fit = run_inverse_kinematics(
            folder / "scaled.osim", static, folder / "static_ik.mot", marker_map=marker_map
        )
        os.replace(folder / "scaled.osim", out)
    return ScaleResult(out, factors, mass, fit.marker_rms_m, fit.marker_max_m, shared)


def _run_tool(opensim, setup: Path) -> None:
    """Run the ScaleTool of ``setup``; DataError (one line) when it fails or writes no model."""
    try:
        tool = opensim.ScaleTool(str(setup))
        with stdout_silenced():
            ok = tool.run()
    except RuntimeError as exc:
        raise DataError(f"OpenSim scaling failed: {opensim_message(str(exc))}") from None
    if not ok or not (setup.parent / "scaled.osim").is_file():
        raise DataError("OpenSim scaling failed (the tool reported no success)")


def _one_more_frame(opensim, path: Path) -> float:
    """Append a copy of the ``.trc``'s only frame one frame period later; its new end time."""
    table = opensim.TimeSeriesTableVec3(str(path))
    rate = float(table.getTableMetaDataAsString("DataRate"))
    end = table.getIndependentColumn()[0] + 1.0 / rate
    first = table.getRowAtIndex(0)  # a view into the table: copied before the table grows
    row = opensim.RowVectorVec3(first.ncol())
    for i in range(first.ncol()):
        row[i] = opensim.Vec3(first[i][0], first[i][1], first[i][2])
    table.appendRow(end, row)
    opensim.TRCFileAdapter().write(table, str(path))
    return end


def _check_measured(marker_map, shared: tuple[str, ...], static: Path) -> None:
    """Raise DataError (one line) when a measurement's marker is not in ``shared``."""
    for measurement in marker_map.measurements:
        for pair in measurement.pairs:
            missing = [m for m in pair if m not in shared]
            if missing:
                raise DataError(
                    f"{static}: scaling measurement {measurement.name!r} needs marker "
                    f"{missing[0]}, which the trial or the model lacks"
                )


def _setup_xml(marker_map, span, mass: float, generic) -> str:
    """The ScaleTool's setup (OpenSim's XML), its files in the setup's folder."""
    times = f"{span[0]:.6f} {span[1]:.6f}"
    measurements = []
    for m in marker_map.measurements:
        pairs = "".join(f"<MarkerPair><markers>{a} {b}</markers></MarkerPair>" for a, b in m.pairs)
        scales = "".join(f'<BodyScale name="{b}"><axes>X Y Z</axes></BodyScale>' for b in m.bodies)
        measurements.append(
            f'<Measurement name="{m.name}"><apply>true</apply>'
            f"<MarkerPairSet><objects>{pairs}</objects></MarkerPairSet>"
            f"<BodyScaleSet><objects>{scales}</objects></BodyScaleSet></Measurement>"
        )
    tasks = [
        f'<IKMarkerTask name="{m.name}"><apply>true</apply><weight>{m.weight}</weight>'
        "</IKMarkerTask>"
        for m in marker_map.markers
    ]
    coordinates = generic.getCoordinateSet()
    tasks += [
        f'<IKCoordinateTask name="{name}"><apply>true</apply><weight>{weight}</weight>'
        "<value_type>default_value</value_type></IKCoordinateTask>"
        for name, weight in marker_map.coordinates.items()
        if coordinates.contains(name)
    ]
    return f"""<?xml version="1.0" encoding="UTF-8" ?>
<OpenSimDocument Version="40000">
<ScaleTool name="subject">
<mass>{mass}</mass><height>-1</height><age>-1</age>
<GenericModelMaker><model_file>generic.osim</model_file></GenericModelMaker>
<ModelScaler><apply>true</apply><scaling_order>measurements</scaling_order>
<MeasurementSet><objects>{"".join(measurements)}</objects></MeasurementSet>
<marker_file>static.trc</marker_file><time_range>{times}</time_range>
<preserve_mass_distribution>true</preserve_mass_distribution>
<output_scale_file>scale_factors.xml</output_scale_file></ModelScaler>
<MarkerPlacer><apply>true</apply><IKTaskSet><objects>{"".join(tasks)}</objects></IKTaskSet>
<marker_file>static.trc</marker_file><time_range>{times}</time_range>
<output_model_file>scaled.osim</output_model_file><max_marker_movement>-1</max_marker_movement>
</MarkerPlacer>
</ScaleTool>
</OpenSimDocument>
"""


def _scale_factors(path: Path) -> dict[str, tuple[float, float, float]]:
    """Body → (x, y, z) scale factors from the ScaleTool's ``output_scale_file``."""
    factors = {}
    for scale in ET.parse(path).getroot().iter("Scale"):
        body = (scale.findtext("segment") or "").strip()
        values = tuple(float(v) for v in (scale.findtext("scales") or "").split())
        if body and len(values) == 3:
            factors[body] = values
    return factors
