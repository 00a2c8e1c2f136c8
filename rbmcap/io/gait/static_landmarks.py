"""A subject's landmarks read from a static capture and the motion inferred from it."""

from __future__ import annotations

from pathlib import Path

from rbmcap.biomech.frames import Landmarks
from rbmcap.biomech.landmarks import landmarks_from_static
from rbmcap.errors import ConfigError, DataError
from rbmcap.io.capture import Capture
from rbmcap.motion.smpl_motion import read_motion


def read_static_landmarks(
    static: str | Path | None,
    static_motion: str | Path | None,
    body,
    landmark_map: str | Path = "plug-in-gait",
) -> Landmarks | None:
    """The landmarks of the static capture ``static`` (``rbmcap import``'s ``.npz``, with its
    labelled points) carried by the bones of ``body`` posed as ``static_motion`` (that capture
    inferred on the calibrated body, ``rbmcap infer``'s ``.npz``); None when neither is given.

    Raises:
        ConfigError: one of the two files is given without the other.
        DataError: the capture has no labelled points or none of the map's, or the two files
            differ in frames.
    """
    if static is None and static_motion is None:
        return None
    if static is None or static_motion is None:
        raise ConfigError("landmarks from a static need both the static capture and its motion")
    capture = Capture.load(static)
    if not capture.point_names or capture.points is None:
        raise DataError(
            f"{static}: no labelled points; import the static with its markers "
            "(rbmcap import static.c3d --plates …) to take landmarks from it"
        )
    motion = read_motion(static_motion)
    try:
        return landmarks_from_static(
            body,
            motion,
            capture.point_names,
            capture.points,
            capture.point_valid,
            landmark_map,
        )
    except DataError as exc:
        raise DataError(f"{static} with {static_motion}: {exc}") from None
