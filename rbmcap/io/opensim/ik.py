"""OpenSim inverse kinematics: a model, a ``.trc`` of markers → a ``.mot`` of the model's
coordinates, through OpenSim's own ``InverseKinematicsTool`` (needs the ``opensim`` extra).

The tool's settings come from an OpenSim setup file (``setup=``: its marker and coordinate tasks
and weights; its model, marker file, output and time range are replaced by the arguments) or from
an :class:`~rbmcap.io.opensim.markers.OpenSimMarkerMap` (``marker_map=``: one marker task per mapped
marker with the map's weight; markers the model lacks are added at the map's generic locations;
the map's coordinates are held at the model's default values). OpenSim writes into a private
folder; the ``.mot`` (and the marker errors, ``errors=``) reach their names by ``os.replace``,
so a failed run leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.errors import DataError, FormatError
from rbmcap.io.opensim.api import load_opensim
from rbmcap.io.opensim.files import read_mot
from rbmcap.io.opensim.markers import OpenSimMarkerMap, load_marker_map

MIN_MARKERS = 3
"""Fewest markers shared by the model and the ``.trc`` that inverse kinematics accepts."""


@dataclass(frozen=True)
class IKResult:
    """What a run wrote and measured: the ``.mot`` path, ``frames`` solved, the markers used,
    the marker error (m) as the mean over frames of each frame's RMS and as the largest single
    marker error, and the wall time (s)."""

    mot: Path
    frames: int
    markers: tuple[str, ...]
    marker_rms_m: float
    marker_max_m: float
    seconds: float


def load_model(opensim, path: str | os.PathLike):
    """An ``opensim.Model`` read from ``path``. Raises FormatError (one line) for a file that is
    missing, does not parse or holds no body."""
    path = Path(path)
    if not path.is_file():
        raise FormatError(f"{path}: no such OpenSim model file")
    try:
        model = opensim.Model(str(path))
    except RuntimeError as exc:
        raise FormatError(f"{path}: not an OpenSim model ({opensim_message(str(exc))})") from None
    if model.getNumBodies() == 0:
        raise FormatError(f"{path}: not an OpenSim model (no bodies)")
    return model


def opensim_message(text: str) -> str:
    """The informative line of a SWIG-wrapped OpenSim exception's text."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("std::exception", "Thrown at"))]
    return (useful or lines or ["OpenSim gave no message"])[0][:200]


def add_missing_markers(opensim, model, marker_map: OpenSimMarkerMap) -> list[str]:
    """Add to ``model`` each mapped marker it lacks, on the map's body at its location; returns
    the names added. Raises FormatError when the model has no body of that name."""
    have = {model.getMarkerSet().get(i).getName() for i in range(model.getMarkerSet().getSize())}
    bodies = model.getBodySet()
    added = []
    for m in marker_map.markers:
        if m.name in have:
            continue
        if not bodies.contains(m.body):
            raise FormatError(f"model {model.getName()!r}: no body {m.body!r} for marker {m.name}")
        location = opensim.Vec3(*m.location)
        model.addMarker(opensim.Marker(m.name, bodies.get(m.body), location))
        added.append(m.name)
    model.finalizeConnections()
    return added


def map_tasks(opensim, marker_map: OpenSimMarkerMap, model):
    """An ``IKTaskSet``: a marker task per mapped marker (the map's weight) and a task holding
    each mapped coordinate the model has at its default value."""
    tasks = opensim.IKTaskSet()
    for m in marker_map.markers:
        task = opensim.IKMarkerTask()
        task.setName(m.name)
        task.setWeight(m.weight)
        task.setApply(True)
        tasks.cloneAndAppend(task)
    coordinates = model.getCoordinateSet()
    for name, weight in marker_map.coordinates.items():
        if coordinates.contains(name):
            task = opensim.IKCoordinateTask()
            task.setName(name)
            task.setWeight(weight)
            task.setValueType(opensim.IKCoordinateTask.DefaultValue)
            tasks.cloneAndAppend(task)
    return tasks


def shared_markers(opensim, model, markers: Path) -> tuple[tuple[str, ...], float, float]:
    """Marker names in both the model and the ``.trc``, and the file's first and last times."""
    try:
        table = opensim.TimeSeriesTableVec3(str(markers))
    except RuntimeError as exc:
        raise FormatError(f"{markers}: not a marker file ({opensim_message(str(exc))})") from None
    in_model = model.getMarkerSet()
    shared = tuple(n for n in table.getColumnLabels() if in_model.contains(n))
    if len(shared) < MIN_MARKERS:
        raise DataError(
            f"{markers}: {len(shared)} of its markers are in the model (at least {MIN_MARKERS} "
            "needed); give a marker map that names the model's markers"
        )
    times = table.getIndependentColumn()
    return shared, float(times[0]), float(times[len(times) - 1])


def _configure(opensim, model, markers: Path, setup, marker_map):
    """The tool (from ``setup`` or a map's tasks) on ``model`` and ``markers``; the markers
    used and the file's time span."""
    if marker_map is not None:
        add_missing_markers(opensim, model, marker_map)
    shared, first, last = shared_markers(opensim, model, markers)
    if setup is not None:
        if not Path(setup).is_file():
            raise FormatError(f"{setup}: no such OpenSim setup file")
        try:
            tool = opensim.InverseKinematicsTool(str(setup))
        except RuntimeError as exc:
            raise FormatError(f"{setup}: not an IK setup ({opensim_message(str(exc))})") from None
    else:
        tool = opensim.InverseKinematicsTool()
        tool.setName("rbmcap")
    if marker_map is not None:
        tool.set_IKTaskSet(map_tasks(opensim, marker_map, model))
    tool.setModel(model)
    tool.setMarkerDataFileName(str(markers))
    tool.set_report_errors(True)
    return tool, shared, first, last


def run_inverse_kinematics(
    model: str | os.PathLike,
    markers: str | os.PathLike,
    out: str | os.PathLike,
    *,
    setup: str | os.PathLike | None = None,
    marker_map: str | OpenSimMarkerMap | None = None,
    time_range: tuple[float, float] | None = None,
    errors: str | os.PathLike | None = None,
) -> IKResult:
    """Solve OpenSim inverse kinematics of ``markers`` (a ``.trc``) on ``model`` (an ``.osim``)
    and write the coordinates to ``out`` (a ``.mot``, degrees).

    Args:
        setup: an OpenSim IK setup file whose tasks to use; else ``marker_map``'s tasks (the
            shipped ``gait2392`` map when neither is given).
        time_range: (start, end) s; default the whole marker file.
        errors: where to write OpenSim's per-frame marker errors (``.sto``, metres), if wanted.

    Raises:
        ConfigError: OpenSim is not installed. FormatError: a file is missing or does not parse.
        DataError: too few shared markers, or OpenSim's solver failed.
    """
    opensim = load_opensim()
    out, markers = Path(out), Path(markers)
    if not markers.is_file():
        raise FormatError(f"{markers}: no such marker file")
    if setup is None and marker_map is None:
        marker_map = load_marker_map()
    marker_map = load_marker_map(marker_map) if marker_map is not None else None
    osim_model = load_model(opensim, model)
    tool, shared, first, last = _configure(opensim, osim_model, markers, setup, marker_map)
    start, end = time_range if time_range is not None else (first, last)
    tool.setStartTime(float(start))
    tool.setEndTime(float(end))
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out.stem}.", dir=out.parent) as folder:
        tool.setResultsDir(folder)
        tool.setOutputMotionFileName(str(Path(folder) / "ik.mot"))
        began = time.perf_counter()
        _run(tool)
        seconds = time.perf_counter() - began
        found = sorted(Path(folder).glob("*_ik_marker_errors.sto"))
        rms, worst = _marker_errors(found[0]) if found else (float("nan"), float("nan"))
        frames = len(read_mot(Path(folder) / "ik.mot")[1])
        if errors is not None and found:
            shutil.move(found[0], Path(folder) / "errors.sto")
            os.replace(Path(folder) / "errors.sto", errors)
        os.replace(Path(folder) / "ik.mot", out)
    return IKResult(out, frames, shared, rms, worst, seconds)


@contextlib.contextmanager
def stdout_silenced() -> Iterator[None]:
    """Send file descriptor 1 to /dev/null: OpenSim prints a model summary there directly."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _run(tool) -> None:
    try:
        with stdout_silenced():
            ok = tool.run()
    except RuntimeError as exc:
        why = opensim_message(str(exc))
        raise DataError(f"OpenSim inverse kinematics failed: {why}") from None
    if not ok:
        raise DataError("OpenSim inverse kinematics failed (the tool reported no success)")


def _marker_errors(path: Path) -> tuple[float, float]:
    """Mean of the per-frame marker RMS and the largest marker error (m) of OpenSim's
    ``*_ik_marker_errors.sto``."""
    names, values = read_mot(path)
    rms = values[:, names.index("marker_error_RMS")]
    worst = values[:, names.index("marker_error_max")]
    return float(np.mean(rms)), float(np.max(worst))
