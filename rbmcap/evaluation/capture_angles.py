"""A motion's clinical angles against the angles its capture carries (a gait model's outputs).

Per angle set and component: the RMS difference, the RMS after removing the mean difference
(what is left once a constant offset of the axis definitions is taken out), the correlation over
the take, and the knee's peak flexion in swing per gait cycle. Frame ``t`` of the motion is
frame ``t`` of the capture (what ``rbmcap infer`` writes); a motion at another rate is
interpolated onto the capture's frames.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

import numpy as np

from rbmcap.biomech.angles import AngleTable, clinical_angles
from rbmcap.biomech.event_match import match_events
from rbmcap.biomech.events import GaitEvent, detect_gait_events
from rbmcap.biomech.frames import Landmarks
from rbmcap.body import load_body_model
from rbmcap.calibrate import Calibration
from rbmcap.calibrate.functional import axis_landmarks
from rbmcap.errors import DataError
from rbmcap.evaluation.gait_cycles import plot_gait_cycles
from rbmcap.io.gait.angles_csv import write_angles_and_events
from rbmcap.io.gait.c3d_angles import read_c3d_angles
from rbmcap.io.gait.events import read_c3d_events
from rbmcap.io.gait.static_landmarks import read_static_landmarks
from rbmcap.motion.smpl_motion import read_motion

COMPARED = (
    "PelvisAngles",
    "HipAngles",
    "KneeAngles",
    "AnkleAngles",
    "FootProgressAngles",
    "ThoraxAngles",
    "ShoulderAngles",
    "ElbowAngles",
)
"""The angle sets compared, each on both sides, where both the motion and the capture have it."""


@dataclass(frozen=True)
class AngleComparison:
    """One component of one angle set over the take (degrees; ``frames`` compared)."""

    name: str
    component: str
    rms: float
    rms_without_offset: float
    offset: float
    correlation: float
    frames: int

    def to_dict(self) -> dict:
        return asdict(self)


def on_capture_frames(table: AngleTable, fps: float, frames: int) -> dict[str, np.ndarray]:
    """The table's angles at the capture's ``frames`` frames of rate ``fps`` (NaN outside the
    motion)."""
    if abs(table.fps - fps) < 1e-6:
        out = {}
        for name, a in table.angles.items():
            padded = np.full((frames, a.shape[1]), np.nan)
            padded[: min(frames, len(a))] = a[:frames]
            out[name] = padded
        return out
    times = np.arange(frames) / fps
    source = np.arange(table.num_frames) / table.fps
    return {
        name: np.stack(
            [np.interp(times, source, col, left=np.nan, right=np.nan) for col in a.T], axis=1
        )
        for name, a in table.angles.items()
    }


def compare_angles(
    table: AngleTable, reference: dict[str, np.ndarray], fps: float
) -> list[AngleComparison]:
    """Every component of :data:`COMPARED` on both sides, ours against ``reference``
    (``{name: (T, 3) degrees}``, NaN where missing, at ``fps``)."""
    ours = on_capture_frames(table, fps, len(next(iter(reference.values()))))
    return compare_on_frames(ours, table.components, reference)


def compare_on_frames(
    ours: dict[str, np.ndarray],
    components: dict[str, tuple[str, ...]],
    reference: dict[str, np.ndarray],
) -> list[AngleComparison]:
    """:func:`compare_angles` of angles already on the capture's frames
    (:func:`on_capture_frames`), with their ``components``."""
    rows = []
    for base in COMPARED:
        for side in "LR":
            name = side + base
            if name not in ours or name not in reference:
                continue
            for k, component in enumerate(components[name]):
                rows.append(_compare(name, component, ours[name][:, k], reference[name][:, k]))
    if not rows:
        raise DataError("no angle set in common between the motion and the capture")
    return rows


def swing_peaks(knee_flexion: np.ndarray, strikes: list[int]) -> list[tuple[int, int, float]]:
    """The peak knee flexion of each gait cycle (from one foot strike to the next of the same
    side, ``strikes`` frames): (first frame, last frame, degrees)."""
    peaks = []
    for a, b in itertools.pairwise(strikes):
        cycle = knee_flexion[a : b + 1]
        if np.isfinite(cycle).any():
            peaks.append((a, b, float(np.nanmax(cycle))))
    return peaks


def _compare(name: str, component: str, ours: np.ndarray, theirs: np.ndarray) -> AngleComparison:
    both = np.isfinite(ours) & np.isfinite(theirs)
    if not both.any():
        nan = float("nan")
        return AngleComparison(name, component, nan, nan, nan, nan, 0)
    d = (ours[both] - theirs[both] + 180.0) % 360.0 - 180.0
    offset = float(d.mean())
    spread = np.std(ours[both]) * np.std(theirs[both])
    r = float(np.corrcoef(ours[both], theirs[both])[0, 1]) if spread > 1e-12 else float("nan")
    return AngleComparison(
        name,
        component,
        rms=float(np.sqrt(np.mean(d**2))),
        rms_without_offset=float(np.sqrt(np.mean((d - offset) ** 2))),
        offset=offset,
        correlation=r,
        frames=int(both.sum()),
    )


@dataclass
class CaptureAnglesReport:
    """A motion's angles and gait events against its capture's (what ``eval-capture --angles``
    prints).

    Attributes:
        rows: one comparison per angle component.
        knee_peaks: ``{side letter: [(ours, theirs)]}`` peak knee flexion per gait cycle.
        events: the capture's events matched to the motion's (empty when it has none).
        events_from: ``'capture'`` when the cycles are cut at the capture's foot strikes,
            ``'motion'`` when at the motion's own.
        ours, theirs: ``{set name: (T, K) degrees}`` on the capture's frames.
        strikes: the foot-strike frames that cut the cycles, per side letter.
        png: the gait-cycle picture, when one was written.
    """

    rows: list[AngleComparison]
    knee_peaks: dict[str, list[tuple[float, float]]]
    events: list
    events_from: str
    ours: dict[str, np.ndarray]
    theirs: dict[str, np.ndarray]
    strikes: dict[str, list[int]]
    png: str | None = None

    def to_dict(self) -> dict:
        return {
            "angles": [r.to_dict() for r in self.rows],
            "knee_swing_peaks": {s: [list(p) for p in v] for s, v in self.knee_peaks.items()},
            "events": [
                {
                    "side": (m.reference or m.detected).side,
                    "kind": (m.reference or m.detected).kind,
                    "reference_s": None if m.reference is None else m.reference.time,
                    "detected_s": None if m.detected is None else m.detected.time,
                    "difference_ms": m.difference_ms,
                }
                for m in self.events
            ],
            "events_from": self.events_from,
            "png": self.png,
        }


def evaluate_capture_angles(
    motion,
    c3d_path,
    body=None,
    convention_name: str = "plug-in-gait",
    png=None,
    landmarks: Landmarks | None = None,
    static=None,
    static_motion=None,
    calib=None,
) -> CaptureAnglesReport:
    """Compare ``motion``'s clinical angles and gait events with those the C3D file carries, on
    ``body`` (a body model or its name; default the stand-in of the motion's gender);
    draw the gait cycles to ``png`` when given. Frames from the subject's ``landmarks``, or
    those read from the ``static`` capture and its ``static_motion`` (files,
    :func:`rbmcap.io.gait.static_landmarks.read_static_landmarks`), instead of the body's; with
    both, ``landmarks`` add to the static's; ``calib``: a calibration file whose joint axes,
    measured from the plates' motion, give the limb segments' flexion axes
    (:func:`calibration_landmarks`)."""
    if body is None or isinstance(body, str):
        body = load_body_model(body or "standin", gender=motion.gender)
    if calib is not None:
        landmarks = calibration_landmarks(calib, body).merged(landmarks)
    from_static = read_static_landmarks(static, static_motion, body)
    landmarks = from_static.merged(landmarks) if from_static is not None else landmarks
    reference = read_c3d_angles(c3d_path)  # first: a C3D without angles fails before any work
    table = clinical_angles(motion, body, convention_name, landmarks=landmarks)
    ours = on_capture_frames(table, reference.fps, len(next(iter(reference.angles.values()))))
    rows = compare_on_frames(ours, table.components, reference.angles)
    detected = detect_gait_events(motion, body)
    theirs = read_c3d_events(c3d_path)
    source = theirs or [
        GaitEvent(e.side, e.kind, round(e.time * reference.fps), e.time) for e in detected
    ]
    strikes = {
        side[0]: sorted(e.frame for e in source if e.side == side and e.kind == "Foot Strike")
        for side in ("Left", "Right")
    }
    peaks = {
        s: [
            (p[2], q[2])
            for p, q in zip(
                swing_peaks(ours[f"{s}KneeAngles"][:, 0], strikes[s]),
                swing_peaks(reference.angles[f"{s}KneeAngles"][:, 0], strikes[s]),
            )
        ]
        for s in strikes
        if f"{s}KneeAngles" in reference.angles
    }
    events = match_events(detected, theirs) if theirs else []
    origin = "capture" if theirs else "motion"
    written = None
    if png is not None:
        title = f"{motion.name} against {reference.path.name} ({convention_name})"
        written = str(plot_gait_cycles(ours, reference.angles, strikes, png, title))
    return CaptureAnglesReport(
        rows, peaks, events, origin, ours, reference.angles, strikes, written
    )


def calibration_landmarks(calib, body):
    """Landmarks on ``body`` from the joint axes the calibration file ``calib`` measured from the
    plates' motion (:func:`rbmcap.calibrate.functional.axis_landmarks`); empty where it measured
    none."""
    return axis_landmarks(Calibration.load(calib), body) or Landmarks({}, str(calib))


def write_angles(
    motion_path,
    out,
    convention_name: str = "plug-in-gait",
    body: str | None = None,
    static=None,
    static_motion=None,
    calib=None,
) -> dict:
    """``rbmcap angles``: :func:`rbmcap.io.gait.angles_csv.write_angles_and_events`, with the limb
    segments' flexion axes from a calibration file ``calib`` when given
    (:func:`calibration_landmarks`)."""
    landmarks = None
    if calib is not None:
        motion = read_motion(motion_path)
        landmarks = calibration_landmarks(
            calib, load_body_model(body or "standin", gender=motion.gender)
        )
    return write_angles_and_events(
        motion_path, out, convention_name, body, static, static_motion, landmarks=landmarks
    )
