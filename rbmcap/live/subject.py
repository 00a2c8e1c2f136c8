"""One subject of a live stream: its plates picked out of each frame, calibrated, and posed.

A subject's plates are the stream's rigid bodies whose names start with the subject's name and
a separator (``alice_left_forearm``, ``alice:left_forearm``; every name when the stream has one
unnamed subject); what follows the prefix is matched to the marker set as ``rbmcap import``
matches names (:func:`rbmcap.io.names.map_names`: by rule, or by an explicit mapping).

The model runs at its training rate. A source ``P`` times faster (``P = round(source fps /
model fps)``, at least 1) is split into ``P`` interleaved phases, frame number ``f`` going to
phase ``f mod P``: each phase is a stream session of its own seeing frames at the model's rate,
so every frame is posed, at the source's rate, by one network step, and the poses of one phase
are exactly those the causal model gives offline on that phase's frames: every frame in order
that came, those the session had no time to pose stepped through the phase's state without a
pose (:meth:`SubjectGroup.hold`).

Where a subject's calibration measured joint centres from the plates' motion
(:mod:`rbmcap.calibrate.functional`), each refined frame's centres are placed by that frame's
observed plates (before the calibration's offsets) and refinement draws the body's joints to them.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass

import numpy as np

from rbmcap.calibrate.calibration import PlateOffsets
from rbmcap.calibrate.functional import joint_centres
from rbmcap.errors import ConfigError
from rbmcap.io.names import map_names
from rbmcap.live.frames import LivePose, RigidBodyFrame

log = logging.getLogger("rbmcap.live")

SEPARATORS = "_:-. /"
"""What may stand between a subject's name and a plate's name in a rigid body's name."""
CATCH_UP_FRAMES = 6
"""How many of its frames left unposed a phase keeps to step through its state before its next
pose (at the model's 60 Hz, 100 ms of them); a phase with more starts afresh."""


@dataclass
class Subject:
    """A subject of a live stream.

    Attributes:
        name: the prefix of its rigid bodies' names ("" : the stream's only subject, every
            rigid body).
        calibration: a :class:`~rbmcap.calibrate.Calibration` of its plates, or None.
        mapping: {rigid-body name without the prefix: marker-set plate name}, or None for the
            default naming rule.
    """

    name: str = ""
    calibration: object | None = None
    mapping: dict[str, str] | None = None


def phase_count(source_fps: float | None, model_fps: float) -> int:
    """Interleaved phases for a source at ``source_fps`` (unknown: 1)."""
    if not source_fps or source_fps <= 0:
        return 1
    return max(1, round(source_fps / model_fps))


def strip_prefix(name: str, prefix: str) -> str | None:
    """``name`` without the subject prefix and its separators, or None when it is not one of
    the subject's rigid bodies."""
    if not prefix:
        return name
    if not name.startswith(prefix) or len(name) == len(prefix):
        return None
    rest = name[len(prefix) :]
    if rest[0] not in SEPARATORS:
        return None
    rest = rest.lstrip(SEPARATORS)
    return rest or None


class SubjectStream:
    """A subject's plates out of each :class:`RigidBodyFrame`, calibrated (:meth:`plates`);
    :class:`SubjectGroup` poses them.

    Attributes:
        count: frames posed for the subject so far.
        offsets: its calibration's plate offsets in the marker set's order, or None.
    """

    def __init__(self, subject: Subject, predictor) -> None:
        self.subject = subject
        self.marker_names = tuple(predictor.marker_names)
        self.marker_set = predictor.marker_set
        self.count = 0
        self._columns: dict[tuple[str, ...], np.ndarray] = {}
        self.offsets: PlateOffsets | None = None
        self.set_calibration(subject.calibration)

    def set_calibration(self, calibration) -> None:
        """Map the plates through ``calibration`` from the next frame on (None: as observed).

        Raises:
            ConfigError: the calibration has no offset for a plate of the marker set (naming
                the subject and the calibration file).
        """
        offsets = None
        if calibration is not None:
            try:
                offsets = calibration.offsets(self.marker_names)
            except ConfigError as exc:
                raise ConfigError(f"subject {self.subject.name or '(unnamed)'}: {exc}") from None
        self.subject.calibration = calibration
        self.offsets = offsets

    def columns(self, names: tuple[str, ...], strict: bool = False) -> np.ndarray:
        """(N,) index of each marker-set plate among a frame's ``names`` (cached per names);
        -1 for a plate no name maps to, unless ``strict`` (the session's first frame), when
        that is an error too. A plate lost later (a rigid body deleted in Motive) is then
        unseen until it comes back, with one warning.

        Raises:
            ConfigError: the stream's names do not map onto the marker set (every problem).
        """
        found = self._columns.get(names)
        if found is not None:
            return found
        own = {}
        for i, name in enumerate(names):
            short = strip_prefix(name, self.subject.name)
            if short is not None:
                own.setdefault(short, i)
        who = f"subject {self.subject.name!r}" if self.subject.name else "the stream"
        try:
            mapped = map_names(
                list(own),
                list(self.marker_names),
                self.subject.mapping
                and {k: v for k, v in self.subject.mapping.items() if k in own},
                allow_missing=not strict,
            )
        except ConfigError as exc:
            raise ConfigError(f"{who}: {exc}") from None
        where = {plate: own[short] for short, plate in mapped.items()}
        found = np.array([where.get(n, -1) for n in self.marker_names], dtype=np.int64)
        if (found < 0).any():
            gone = [n for n, i in zip(self.marker_names, found) if i < 0]
            log.warning("%s: no rigid body for plate %s any more: unseen", who, ", ".join(gone))
        self._columns[names] = found
        return found

    def observed(self, frame: RigidBodyFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The subject's plates of ``frame`` in marker-set order, as observed: pos (N, 3),
        rot (N, 3, 3), valid (N,) (a plate no rigid body maps to: unseen)."""
        idx = self.columns(frame.names)
        pos, rot, valid = frame.pos[idx], frame.rot[idx], frame.valid[idx]
        if idx.min() < 0:
            gone = idx < 0
            pos[gone], rot[gone], valid[gone] = 0.0, np.eye(3, dtype=rot.dtype), False
        return pos, rot, valid

    def plates(self, frame: RigidBodyFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`observed`, mapped onto the virtual plates by the calibration when there is one
        (:meth:`rbmcap.calibrate.PlateOffsets.apply`: pos, rot float32)."""
        pos, rot, valid = self.observed(frame)
        if self.offsets is None:
            return pos, rot, valid
        return self.offsets.apply(pos, rot, valid)


class SubjectGroup:
    """Every subject of a session posed together: per phase one stream session that steps all
    subjects at once (their plates stacked, :class:`~rbmcap.inference.stream.FrameStep`), so a
    frame reads the network's weights once, however many subjects it holds.

    A frame the session had no time to pose is held (:meth:`hold`) and stepped through its
    phase's state without a pose before that phase's next pose (or earlier, :meth:`catch_up`),
    so that a phase's poses stay the causal answer on every frame of it that came. A phase keeps
    at most ``catch_up`` such frames: one more, and it starts afresh from the last ``catch_up``
    (its state set back to the first frame's).
    """

    def __init__(
        self, streams: list[SubjectStream], template, phases: int, catch_up: int = CATCH_UP_FRAMES
    ) -> None:
        """``template``: a :class:`~rbmcap.inference.stream.StreamSession` of the predictor for
        ``len(streams)`` subjects, whose frame step every phase shares (forked)."""
        if template.subjects != len(streams):
            raise ConfigError(
                f"a stream of {template.subjects} subjects cannot pose {len(streams)} subjects"
            )
        self.streams = list(streams)
        self.template = template
        self.sessions = [template.fork() for _ in range(phases)]
        self.pending = [collections.deque(maxlen=catch_up) for _ in range(phases)]
        self._afresh = [False] * phases  # the phase's state is to start again before its steps
        self._layouts: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray | None]] = {}
        self._calibrations: tuple = ()
        self._offsets: PlateOffsets | None = None
        self._betas: list[np.ndarray | None] = []
        self._joints: list[list | None] = []  # each subject's measured joints, or None
        self._corrections: list[np.ndarray | None] = []  # each subject's joint correction
        self._joint_offsets: np.ndarray | None = None  # the same, stacked for the refiner
        self._hinges: np.ndarray | None = None  # each subject's hinges, for the refiner

    # ----------------------------------------------------------------------- plates
    def plates(self, frame: RigidBodyFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every subject's :meth:`SubjectStream.plates` of ``frame``, stacked (a leading S
        where there are several subjects): one gather from the frame for all subjects, and
        one calibration for all of them."""
        return self._calibrate(*self.observed(frame))

    def observed(self, frame: RigidBodyFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every subject's :meth:`SubjectStream.observed` of ``frame``, stacked as
        :meth:`plates` stacks them."""
        layout = self._layouts.get(frame.names)
        if layout is None:
            layout = self._layout(frame.names)
        columns, gone = layout
        pos, rot, valid = frame.pos[columns], frame.rot[columns], frame.valid[columns]
        if gone is not None:
            pos[gone], rot[gone], valid[gone] = 0.0, np.eye(3, dtype=rot.dtype), False
        if len(self.streams) > 1:
            s = len(self.streams)
            pos, rot, valid = pos.reshape(s, -1, 3), rot.reshape(s, -1, 3, 3), valid.reshape(s, -1)
        return pos, rot, valid

    def _calibrate(self, pos, rot, valid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Observed plates (stacked) mapped through every subject's calibration."""
        offsets = self._calibrated()
        if offsets is None:
            return pos, rot, valid
        return offsets.apply(pos, rot, valid)

    def joint_centres(self, pos, rot, valid) -> tuple[np.ndarray, np.ndarray] | None:
        """Where observed plates (stacked, :meth:`observed`) put the joints each subject's
        calibration measured (:func:`rbmcap.calibrate.functional.joint_centres`): ((24, 3) m,
        (24,) bool where there is one), a leading S where there are several subjects; a subject
        without measured joints has none. None when no subject has any."""
        self._calibrated()
        if not any(self._joints):
            return None
        names = list(self.streams[0].marker_names)
        several = len(self.streams) > 1
        if not several:
            pos, rot, valid = pos[None], rot[None], valid[None]
        centres = np.zeros((len(self.streams), 24, 3))
        seen = np.zeros((len(self.streams), 24), dtype=bool)
        for k, joints in enumerate(self._joints):
            if joints:
                c, m = joint_centres(
                    joints, pos[k : k + 1], rot[k : k + 1], valid[k : k + 1], names
                )
                centres[k], seen[k] = c[0], m[0]
        return (centres, seen) if several else (centres[0], seen[0])

    def _layout(self, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray | None]:
        """Where every subject's plates are among ``names`` (S·N,), and which are missing."""
        columns = np.concatenate([s.columns(names) for s in self.streams])
        gone = columns < 0
        self._layouts[names] = columns, (gone if gone.any() else None)
        return self._layouts[names]

    def _calibrated(self) -> PlateOffsets | None:
        """Every subject's plate offsets stacked (an uncalibrated subject's: none), or None when
        no subject is calibrated; made again when a subject's calibration changes."""
        calibrations = tuple(s.subject.calibration for s in self.streams)
        if len(calibrations) == len(self._calibrations) and all(
            a is b for a, b in zip(calibrations, self._calibrations)
        ):
            return self._offsets
        self._calibrations = calibrations
        self._betas = [
            None if (b := getattr(c, "betas", None)) is None else np.asarray(b, dtype=np.float32)
            for c in calibrations
        ]
        self._joints = [
            list(j.values()) if (j := getattr(c, "joints", None)) else None for c in calibrations
        ]
        corrections = [
            c.joint_offset_array() if hasattr(c, "joint_offset_array") else None
            for c in calibrations
        ]
        self._corrections = corrections
        self._joint_offsets = _stacked(corrections, (24, 3))
        refiner = self.template.refiner
        if refiner is not None:
            hinges = [refiner.calibration_hinges(c) for c in calibrations]
            self._hinges = _stacked(hinges, (23, 3, 3))
        offsets = [s.offsets for s in self.streams]
        if all(o is None for o in offsets):
            self._offsets = None
            return None
        n = len(self.streams[0].marker_names)
        rotation = np.stack(
            [np.broadcast_to(np.eye(3), (n, 3, 3)) if o is None else o.rotation for o in offsets]
        )
        position = np.stack([np.zeros((n, 3)) if o is None else o.position for o in offsets])
        if len(offsets) == 1:
            rotation, position = rotation[0], position[0]
        self._offsets = PlateOffsets(self.streams[0].marker_names, rotation, position)
        return self._offsets

    # ----------------------------------------------------------------------- posing
    def hold(self, frame: RigidBodyFrame, number: int) -> bool:
        """Keep ``frame`` (its unwrapped frame ``number``), which is not posed, to step through
        its phase's state before that phase's next pose. True when the phase had ``catch_up``
        frames held already and so starts afresh: its state set back, from the oldest of the
        ``catch_up`` frames it then holds."""
        phase = number % len(self.sessions)
        pending = self.pending[phase]
        full = len(pending) == pending.maxlen
        afresh = full and not self._afresh[phase]
        self._afresh[phase] |= full
        pending.append(frame)
        return afresh

    def catch_up(self, newest: int) -> bool:
        """Step one held frame through its phase's state, of the phase whose turn comes first
        after frame ``newest``; False when no frame is held."""
        count = len(self.sessions)
        for ahead in range(1, count + 1):
            phase = (newest + ahead) % count
            if self.pending[phase]:
                self._step_held(phase)
                return True
        return False

    def _step_held(self, phase: int) -> None:
        if self._afresh[phase]:
            self.sessions[phase] = self.template.fork()
            self._afresh[phase] = False
        frame = self.pending[phase].popleft()
        self.sessions[phase].advance(*self.plates(frame))

    def pose(self, frame: RigidBodyFrame, number: int | None = None) -> list[LivePose]:
        """Pose ``frame`` for every subject: its phase's session steps the frames held for it,
        then takes this one. ``number``: the frame's number unwrapped (default: its own)."""
        phase = (frame.frame if number is None else number) % len(self.sessions)
        while self.pending[phase]:
            self._step_held(phase)
        observed = self.observed(frame)
        pos, rot, valid = self._calibrate(*observed)
        session = self.sessions[phase]
        centres = None if session.refiner is None else self.joint_centres(*observed)
        calibrated = self._betas
        held = None  # refinement holds the calibrated shapes when every subject has one
        if calibrated and all(b is not None for b in calibrated):
            held = calibrated[0] if len(calibrated) == 1 else np.stack(calibrated)
        refined = session.refiner is not None
        rotmats, trans = session.push(
            pos,
            rot,
            valid,
            betas=held,
            joint_centres=centres,
            joint_offsets=self._joint_offsets if refined else None,
            hinges=self._hinges if refined else None,
        )
        running = None if all(b is not None for b in calibrated) else session.betas
        if len(self.streams) == 1:
            pos, rot, valid, rotmats, trans = (a[None] for a in (pos, rot, valid, rotmats, trans))
            running = None if running is None else running[None]
        poses = []
        for k, stream in enumerate(self.streams):
            stream.count += 1
            betas = calibrated[k]
            if betas is None:
                betas = None if running is None else running[k]
            poses.append(
                LivePose(
                    subject=stream.subject.name,
                    frame=frame.frame,
                    timestamp=frame.timestamp,
                    received=frame.received,
                    rotmats=rotmats[k],
                    trans=trans[k],
                    betas=np.asarray(betas, dtype=np.float32),
                    plates_pos=pos[k],
                    plates_rot=rot[k],
                    plates_valid=valid[k],
                    index=stream.count,
                    joint_offsets=self._corrections[k],
                )
            )
        return poses


def _stacked(values: list, shape: tuple[int, ...]) -> np.ndarray | None:
    """Each subject's array (None: zeros of ``shape``) stacked, without the leading axis for one
    subject; None when no subject has one."""
    if all(v is None for v in values):
        return None
    stacked = np.stack([np.zeros(shape) if v is None else v for v in values])
    return stacked[0] if len(stacked) == 1 else stacked
