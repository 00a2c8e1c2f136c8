"""``import_capture``: an export → the capture file; the library of ``rbmcap import``.

Steps: read the export (:func:`~rbmcap.io.formats.read_capture`) → when a plates YAML is given,
solve the plates from the labelled points (estimating and writing back missing local
coordinates) → when a mapping or marker set is given, rename and reorder the plates into the
marker set → save (atomically).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.io.capture import Capture
from rbmcap.io.formats import read_capture
from rbmcap.io.names import apply_mapping, load_mapping
from rbmcap.io.plates import plates_from_points
from rbmcap.markers.markerset import DEFAULT_MARKERS


@dataclass
class ImportOptions:
    """Options of an import; the defaults of ``rbmcap import`` live here, once.

    Attributes:
        format: 'auto' or one of :data:`rbmcap.io.formats.FORMATS`.
        rotation: Vicon RX/RY/RZ convention (:data:`rbmcap.io.vicon.ROTATIONS`).
        angle_unit: 'deg' or 'rad', or None to read it from the file.
        fps: frame rate (Hz) overriding the file's, or None (needed for a trimmed Vicon file).
        plates: plates YAML to solve plates from marker points, or None.
        mapping: name mapping YAML, or None (default rule when ``markers`` is set).
        markers: marker set (name or YAML) to map the plates into; with a mapping and no marker
            set, ``default_markers`` is used.
        allow_missing: marker-set plates absent from the capture become all-invalid columns.
        progress: progress bar on stderr.
    """

    format: str = "auto"
    rotation: str = "helical"
    angle_unit: str | None = None
    fps: float | None = None
    plates: str | Path | None = None
    mapping: str | Path | None = None
    markers: str | Path | None = None
    allow_missing: bool = False
    progress: bool = False
    default_markers: str = DEFAULT_MARKERS


def import_capture(path: str | Path, options: ImportOptions | None = None) -> Capture:
    """Read ``path`` and apply the plate solving and name mapping ``options`` ask for."""
    o = options or ImportOptions()
    capture = read_capture(path, o.format, rotation=o.rotation, angle_unit=o.angle_unit, fps=o.fps)
    if o.plates is not None:
        capture = plates_from_points(capture, o.plates, progress=o.progress)
    if o.mapping is not None or o.markers is not None:
        mapping = load_mapping(o.mapping) if o.mapping is not None else None
        marker_set = o.markers if o.markers is not None else o.default_markers
        capture = apply_mapping(capture, marker_set, mapping, allow_missing=o.allow_missing)
    return capture


def summarize(capture: Capture) -> dict:
    """One JSON-able object: format, fps, frames, rotation_deviation (the largest correction
    made re-orthonormalising the file's rotations, max |σ − 1|; see
    :data:`rbmcap.geometry.ROTATION_TOLERANCE`), per plate name, valid_fraction and
    residual_mm_mean (mean over valid frames, mm; None where poses came from the file)."""
    plates = []
    for j, name in enumerate(capture.names):
        v = capture.valid[:, j]
        r = capture.residual_mm[v, j]
        mean = float(np.nanmean(r)) if np.isfinite(r).any() else None
        frac = float(v.mean()) if len(v) else 0.0
        plates.append({"name": name, "valid_fraction": frac, "residual_mm_mean": mean})
    return {
        "format": capture.format,
        "fps": capture.fps,
        "frames": capture.num_frames,
        "rotation_deviation": capture.rotation_deviation,
        "plates": plates,
    }


def import_file(
    path: str | Path, out: str | Path, options: ImportOptions | None = None
) -> tuple[Capture, dict]:
    """Import ``path``, save the capture file ``out`` (atomically); return it and its summary."""
    capture = import_capture(path, options)
    capture.save(out)
    return capture, summarize(capture)
