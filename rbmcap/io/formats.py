"""Reading any supported export into a :class:`~rbmcap.io.capture.Capture`, with the format told
from the file's content (overridable).

Formats: ``vicon-segments`` (Nexus ``Segments`` / ``Model Outputs`` / ``Joints`` sections, 6
columns per object), ``vicon-tracker`` (``Global Angle Object:Segment`` objects), ``vicon-
trajectories`` (marker points only: plates come from plate solving), ``optitrack`` (Motive CSV
1.2x) and ``c3d``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rbmcap.errors import ConfigError, FormatError
from rbmcap.io.c3d import read_c3d
from rbmcap.io.capture import Capture
from rbmcap.io.optitrack import looks_like_optitrack, read_optitrack
from rbmcap.io.vicon import ROTATIONS, detect_vicon_kind, read_vicon

FORMATS = ("vicon-segments", "vicon-tracker", "vicon-trajectories", "optitrack", "c3d")
"""Every format name :func:`read_capture` takes (besides 'auto')."""


def detect_format(path: str | Path) -> str:
    """The format of ``path``, from its content: C3D by its header bytes, Motive CSV by its
    ``Format Version`` first row, Vicon CSV by its section or header rows.

    Raises:
        FormatError: naming the file, when no format matches.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    if len(head) >= 2 and head[1] == 0x50 and path.suffix.lower() == ".c3d":
        return "c3d"
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    if looks_like_optitrack(text):
        return "optitrack"
    kind = detect_vicon_kind(text)
    if kind is not None:
        return kind
    raise FormatError(
        f"{path}: unknown capture format (expected a Vicon CSV, an OptiTrack Motive CSV or a "
        f"C3D file; give --format to say which)"
    )


def read_capture(
    path: str | Path,
    format: str = "auto",
    *,
    rotation: str = "helical",
    angle_unit: str | None = None,
    fps: float | None = None,
) -> Capture:
    """Read an export as a :class:`Capture` (world Z up, metres).

    Args:
        path: the file.
        format: one of :data:`FORMATS`, or 'auto' (:func:`detect_format`).
        rotation: Vicon's RX/RY/RZ convention, one of
            :data:`rbmcap.io.vicon.ROTATIONS` (other formats ignore it).
        angle_unit: 'deg' or 'rad' for Vicon rotations; None reads it from the units row.
        fps: frame rate (Hz) to use instead of the file's; None keeps the file's (a Vicon file
            trimmed to its header rows has none: then 100 Hz, with a warning).

    Raises:
        FormatError: the file does not parse as that format (file, line and column named).
        ConfigError: an unknown format or rotation option.
    """
    if format != "auto" and format not in FORMATS:
        raise ConfigError(
            f"unknown format {format!r}; expected auto or one of {', '.join(FORMATS)}"
        )
    if rotation not in ROTATIONS:
        raise ConfigError(f"unknown rotation {rotation!r}; expected one of {', '.join(ROTATIONS)}")
    if angle_unit not in (None, "deg", "rad"):
        raise ConfigError(f"unknown angle unit {angle_unit!r}; expected deg or rad")
    if fps is not None and not (np.isfinite(fps) and fps > 0):
        raise ConfigError(f"fps must be a positive number of frames per second, got {fps!r}")
    fmt = detect_format(path) if format == "auto" else format
    if fmt.startswith("vicon"):
        return read_vicon(path, kind=fmt, rotation=rotation, angle_unit=angle_unit, fps=fps)
    if fmt == "optitrack":
        capture = read_optitrack(path)
    else:
        capture = read_c3d(path)
    if fps is not None:
        capture.fps = float(fps)
    return capture
