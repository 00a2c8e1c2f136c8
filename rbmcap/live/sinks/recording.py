"""Recording: each subject's live poses kept in memory, written as a motion ``.npz`` and a BVH
when the session closes (also when it was interrupted or failed).

Files, per subject with at least one pose (a subject without any is reported in
:attr:`RecordingSink.notes` and the log, and gets no file):

- ``.npz``: an AMASS-style motion (:class:`~rbmcap.motion.smpl_motion.SMPLMotion`: ``poses``
  axis-angle, ``trans``, ``betas``, ``gender``, ``mocap_framerate``, ``name``, ``source``) plus
  two keys of its own, ``frame_numbers (T,) int64`` (the source's frame number of each pose) and
  ``timestamps (T,) float64`` (the source's time, seconds). Anything reading AMASS reads it;
- ``.bvh``: the same motion on the body's SMPL skeleton (:mod:`rbmcap.io.exports.bvh`).

The poses are stored as received: a frame the session never posed (lost on the network, or
dropped because the consumer was behind) is missing, not filled in, so the file's timeline is
shorter than the take by the missing frames; ``frame_numbers`` places every pose, and
``source["frames_missing"]`` counts the gaps' frames. ``fps`` is the subject's rate (the
source's; estimated from the timestamps when the source states none). ``betas`` are the
calibration's, else the last pose's running estimate.

With several subjects, each file name gets the subject's name before its suffix
(``take.npz`` → ``take_alice.npz``, see :func:`subject_path`); one subject writes the names as
given. Every file is written atomically (:func:`rbmcap.atomic.atomic_path`): a write that fails
or is killed leaves no partial file. Memory: about 0.9 kB a frame and subject (float32 rotation
matrices), e.g. 200 MB an hour at 60 Hz, held in chunks of :data:`CHUNK_FRAMES` frames that are
allocated as needed and never copied while recording.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.atomic import atomic_path
from rbmcap.errors import ConfigError, DataError, FormatError, RBMCapError
from rbmcap.io.exports.bvh import write_motion_bvh
from rbmcap.live.frames import LivePose, LiveStats
from rbmcap.live.sinks.base import SubjectInfo
from rbmcap.motion.smpl_motion import SMPLMotion

log = logging.getLogger("rbmcap.live")

CHUNK_FRAMES = 4096
"""Frames per allocation of a subject's buffers."""
SUFFIXES = {"npz": ".npz", "bvh": ".bvh"}


class _Chunks:
    """A growing array of rows of one shape and dtype: appends are O(1) (a row copied into the
    current chunk; a new chunk allocated every ``chunk`` rows, the old ones never copied)."""

    def __init__(self, row_shape: tuple[int, ...], dtype, chunk: int = CHUNK_FRAMES) -> None:
        self.row_shape, self.dtype, self.chunk = row_shape, dtype, chunk
        self._chunks: list[np.ndarray] = []
        self.count = 0

    def append(self, row) -> None:
        k = self.count % self.chunk
        if k == 0:
            self._chunks.append(np.empty((self.chunk, *self.row_shape), dtype=self.dtype))
        self._chunks[-1][k] = row
        self.count += 1

    def parts(self) -> list[np.ndarray]:
        """The filled rows, chunk by chunk (views)."""
        out = []
        for i, c in enumerate(self._chunks):
            out.append(c[: min(self.chunk, self.count - i * self.chunk)])
        return out

    def array(self) -> np.ndarray:
        """(count, *row_shape) all rows in one array."""
        parts = self.parts()
        return np.concatenate(parts) if parts else np.empty((0, *self.row_shape), self.dtype)


class _Track:
    """One subject's received poses: rotations (T, 24, 3, 3), trans (T, 3), frame numbers and
    source times (T,), and the last pose's betas."""

    def __init__(self, info: SubjectInfo) -> None:
        self.info = info
        self.rotmats = _Chunks((24, 3, 3), np.float32)
        self.trans = _Chunks((3,), np.float32)
        self.frames = _Chunks((), np.int64)
        self.times = _Chunks((), np.float64)
        self.betas: np.ndarray | None = None
        self.joint_offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return self.frames.count

    def append(self, pose: LivePose) -> None:
        self.rotmats.append(pose.rotmats)
        self.trans.append(pose.trans)
        self.frames.append(pose.frame)
        self.times.append(pose.timestamp)
        self.betas = np.array(pose.betas, dtype=np.float32)
        self.joint_offsets = pose.joint_offsets

    def motion(self, name: str) -> SMPLMotion:
        """The poses as an :class:`SMPLMotion` (module docstring: fps, betas, source)."""
        poses = np.concatenate(
            [
                roma.rotmat_to_rotvec(torch.from_numpy(p.astype(np.float64))).numpy()
                for p in self.rotmats.parts()
            ]
        )
        frames = self.frames.array()
        steps = np.diff(frames)
        info = self.info
        return SMPLMotion(
            poses=poses,
            trans=self.trans.array(),
            betas=info.betas if info.betas is not None else self.betas,
            gender=info.gender,
            fps=self._fps(),
            name=name,
            source={
                "recorder": "rbmcap live",
                "subject": info.name,
                "body": str(getattr(info.body, "identity", "")),
                "first_frame": int(frames[0]),
                "last_frame": int(frames[-1]),
                "frames_missing": int(np.maximum(steps - 1, 0).sum()),
            },
            joint_offsets=self.joint_offsets,
        )

    def _fps(self) -> float:
        """The subject's rate; without one, the median step of the timestamps; else 60 Hz."""
        fps = self.info.fps
        if fps is not None and math.isfinite(fps) and fps > 0:
            return float(fps)
        steps = np.diff(self.times.array())
        steps = steps[steps > 0]
        return float(1.0 / np.median(steps)) if len(steps) else 60.0


def subject_path(path: str | Path, subject: str, index: int, several: bool) -> Path:
    """Where a subject's file goes: ``path`` itself for a single subject, else the subject's name
    (characters other than letters, digits, ``.``, ``_`` and ``-`` replaced by ``_``; the
    subject's 1-based position when nothing is left) inserted before the suffix."""
    path = Path(path)
    if not several:
        return path
    tag = re.sub(r"[^A-Za-z0-9._-]+", "_", subject).strip("._") or f"subject{index + 1}"
    return path.with_name(f"{path.stem}_{tag}{path.suffix}")


def write_recording_npz(path: str | Path, motion: SMPLMotion, frames, times) -> Path:
    """``motion``'s AMASS-style arrays plus ``frame_numbers`` and ``timestamps`` (T,), written
    atomically to ``path``."""
    arrays = motion.to_npz_dict()
    arrays["frame_numbers"] = np.asarray(frames, dtype=np.int64)
    arrays["timestamps"] = np.asarray(times, dtype=np.float64)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    return Path(path)


class RecordingSink:
    """Keeps each subject's poses and writes them on :meth:`close` (module docstring).

    Args:
        npz: the motion ``.npz`` to write, or None.
        bvh: the BVH to write, or None (at least one of the two is needed).

    Raises:
        ConfigError: neither path, a wrong suffix, or a folder that does not exist (checked
            here, before any capture starts).

    Attributes:
        written: the files written by ``close``; notes: one line for each subject that got no
            file because it received no pose.
    """

    inline = True

    def __init__(self, npz: str | Path | None = None, bvh: str | Path | None = None) -> None:
        targets = {k: Path(v) for k, v in (("npz", npz), ("bvh", bvh)) if v is not None}
        if not targets:
            raise ConfigError("a recording needs an .npz or a .bvh path (or both)")
        for kind, path in targets.items():
            if path.suffix.lower() != SUFFIXES[kind]:
                raise ConfigError(f"{path}: a {kind} recording must end in {SUFFIXES[kind]}")
            if not path.parent.is_dir():
                raise ConfigError(f"{path}: the folder {path.parent} does not exist")
        self.targets = targets
        self.name = "recording:" + ",".join(str(p) for p in targets.values())
        self.written: list[Path] = []
        self.notes: list[str] = []
        self._tracks: dict[str, _Track] = {}
        self._lock = threading.Lock()
        self._closed = False

    def open(self, subjects: list[SubjectInfo], stats: LiveStats) -> None:
        several = len(subjects) > 1
        names = {
            subject_path(path, info.name, k, several)
            for k, info in enumerate(subjects)
            for path in self.targets.values()
        }
        if len(names) != len(subjects) * len(self.targets):
            raise ConfigError(f"{self.name}: two subjects' names give the same file name")
        self._tracks = {info.name: _Track(info) for info in subjects}

    def send(self, pose: LivePose) -> None:
        with self._lock:
            if self._closed:
                return
            track = self._tracks.get(pose.subject)
            if track is None:
                raise DataError(f"{self.name}: a pose of subject {pose.subject!r}, not opened")
            track.append(pose)

    def frames(self, subject: str) -> int:
        """Poses of ``subject`` received so far."""
        return len(self._tracks[subject])

    def close(self) -> list[Path]:
        """Write every subject's files; returns them (also in :attr:`written`). Safe to call
        twice (the second call writes nothing).

        Raises:
            FormatError: a file could not be written (the first such; the other files are
                still written, and none is left half-written).
        """
        with self._lock:
            if self._closed:
                return []
            self._closed = True
        tracks = list(self._tracks.values())
        failures: list[RBMCapError] = []
        for k, track in enumerate(tracks):
            paths = {
                kind: subject_path(p, track.info.name, k, len(tracks) > 1)
                for kind, p in self.targets.items()
            }
            if len(track) == 0:
                note = f"{self.name}: subject {track.info.name!r} received no pose, nothing written"
                self.notes.append(note)
                log.warning(note)
                continue
            failures += self._write(track, paths)
        if failures:
            raise failures[0]
        return self.written

    def _write(self, track: _Track, paths: dict[str, Path]) -> list[RBMCapError]:
        """Write one subject's files; returns the failures."""
        try:
            motion = track.motion(track.info.name or next(iter(paths.values())).stem)
        except RBMCapError as exc:  # e.g. a pose with NaN
            return [exc]
        writers = {
            "npz": lambda p: write_recording_npz(
                p, motion, track.frames.array(), track.times.array()
            ),
            "bvh": lambda p: write_motion_bvh(p, motion, track.info.body),
        }
        failures: list[RBMCapError] = []
        for kind, path in paths.items():
            try:
                self.written.append(writers[kind](path))
            except OSError as exc:
                failures.append(FormatError(f"{path}: cannot write ({exc.strerror or exc})"))
            except RBMCapError as exc:
                failures.append(exc)
        return failures
