"""One subject of a live stream: its plates picked out of each frame, calibrated, and posed.

A subject's plates are the stream's rigid bodies whose names start with the subject's name and
a separator (``alice_left_forearm``, ``alice:left_forearm``; every name when the stream has one
unnamed subject); what follows the prefix is matched to the marker set as ``rbmcap import``
matches names (:func:`rbmcap.io.names.map_names`: by rule, or by an explicit mapping).

The model runs at its training rate. A source ``P`` times faster (``P = round(source fps /
model fps)``, at least 1) is split into ``P`` interleaved phases, frame number ``f`` going to
phase ``f mod P``: each phase is a stream session of its own seeing frames at the model's rate,
so every frame is posed, at the source's rate, by one network step, and the poses of one phase
are exactly those the causal model gives offline on that phase's frames.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from rbmcap.errors import ConfigError
from rbmcap.io.names import map_names
from rbmcap.live.frames import LivePose, RigidBodyFrame

log = logging.getLogger("rbmcap.live")

SEPARATORS = "_:-. /"
"""What may stand between a subject's name and a plate's name in a rigid body's name."""


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
    :class:`SubjectGroup` poses them."""

    def __init__(self, subject: Subject, predictor) -> None:
        self.subject = subject
        self.marker_names = tuple(predictor.marker_names)
        self.marker_set = predictor.marker_set
        self.count = 0
        self._columns: dict[tuple[str, ...], np.ndarray] = {}
        self._offsets = None
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
        self._offsets = offsets

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
        if self._offsets is None:
            return pos, rot, valid
        return self._offsets.apply(pos, rot, valid)


class SubjectGroup:
    """Every subject of a session posed together: per phase one stream session that steps all
    subjects at once (their plates stacked, :class:`~rbmcap.inference.stream.FrameStep`), so a
    frame reads the network's weights once, however many subjects it holds."""

    def __init__(self, streams: list[SubjectStream], template, phases: int) -> None:
        """``template``: a :class:`~rbmcap.inference.stream.StreamSession` of the predictor for
        ``len(streams)`` subjects, whose frame step every phase shares (forked)."""
        if template.subjects != len(streams):
            raise ConfigError(
                f"a stream of {template.subjects} subjects cannot pose {len(streams)} subjects"
            )
        self.streams = list(streams)
        self.sessions = [template.fork() for _ in range(phases)]

    def plates(self, frame: RigidBodyFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every subject's :meth:`SubjectStream.plates` of ``frame``, stacked (a leading S
        where there are several subjects)."""
        if len(self.streams) == 1:
            return self.streams[0].plates(frame)
        pos, rot, valid = zip(*(s.plates(frame) for s in self.streams))
        return np.stack(pos), np.stack(rot), np.stack(valid)

    def pose(self, frame: RigidBodyFrame) -> list[LivePose]:
        """Pose ``frame`` for every subject: its phase's session takes one step."""
        pos, rot, valid = self.plates(frame)
        session = self.sessions[frame.frame % len(self.sessions)]
        rotmats, trans = session.push(pos, rot, valid)
        running = session.betas
        if len(self.streams) == 1:
            pos, rot, valid, rotmats, trans = (a[None] for a in (pos, rot, valid, rotmats, trans))
            running = None if running is None else running[None]
        poses = []
        for k, stream in enumerate(self.streams):
            stream.count += 1
            calibrated = getattr(stream.subject.calibration, "betas", None)
            if calibrated is not None:
                betas = calibrated
            else:
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
                )
            )
        return poses
