"""A motion's clinical angles and gait events written as CSV files (``rbmcap angles``)."""

from __future__ import annotations

from pathlib import Path

from rbmcap.biomech.angles import clinical_angles
from rbmcap.biomech.events import detect_gait_events
from rbmcap.body import load_body_model
from rbmcap.io.gait.events import write_events_csv
from rbmcap.io.gait.static_landmarks import read_static_landmarks
from rbmcap.motion.smpl_motion import read_motion


def write_angles_and_events(
    motion_path: str | Path,
    out: str | Path,
    convention_name: str = "plug-in-gait",
    body: str | None = None,
    static: str | Path | None = None,
    static_motion: str | Path | None = None,
    landmarks=None,
) -> dict:
    """Read a motion, write its angles to ``out`` and its events to ``out``'s stem +
    ``.events.csv``; return a summary (paths, frames, sets, event counts). With ``static`` and
    ``static_motion`` the frames come from the subject's landmarks in that static capture
    (:func:`rbmcap.io.gait.static_landmarks.read_static_landmarks`); ``landmarks`` (a
    :class:`rbmcap.biomech.frames.Landmarks`, e.g. a calibration's measured axes) add to or stand
    in for them. Nothing is written when an input is bad."""
    motion = read_motion(motion_path)
    model = load_body_model(body or "standin", gender=motion.gender)
    from_static = read_static_landmarks(static, static_motion, model)
    landmarks = from_static.merged(landmarks) if from_static is not None else landmarks
    table = clinical_angles(motion, model, convention_name, landmarks=landmarks)
    events = detect_gait_events(motion, model)
    out = Path(out)
    events_path = out.with_name(out.stem + ".events.csv")
    table.to_csv(out)
    write_events_csv(events_path, events)
    return {
        "name": motion.name,
        "angles": str(out),
        "events": str(events_path),
        "frames": table.num_frames,
        "fps": table.fps,
        "convention": table.convention,
        "landmarks": "static" if landmarks is not None else "body",
        "progression": [round(float(v), 4) for v in table.progression],
        "sets": list(table.angles),
        "foot_strikes": sum(e.kind == "Foot Strike" for e in events),
        "foot_offs": sum(e.kind == "Foot Off" for e in events),
    }
