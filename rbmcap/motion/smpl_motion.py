"""``SMPLMotion``: the one motion format every source produces.

A motion is SMPL local joint rotations ``poses (T, 24, 3)`` (axis-angle, radians; joint 0 is the
global orientation, which carries the Y-up→Z-up turn), root translation ``trans (T, 3)`` in metres
(world frame, Z up, floor z = 0), shape ``betas (B,)``, ``gender``, ``fps`` and a ``name``. SMPL
turns the body about the rest pelvis joint J0(betas) and then adds ``trans``, so the world pelvis is
``J0 + trans``.

On disk a motion is an AMASS SMPL+H style ``.npz`` (``poses (T, 156)``, ``trans``, ``betas``,
``gender``, ``mocap_framerate``) plus rbmcap's ``name`` and ``source`` keys, so anything that reads
AMASS reads these files and :func:`rbmcap.motion.amass.read_motion` reads both.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import roma
import torch

from rbmcap.atomic import atomic_path
from rbmcap.errors import DataError, location
from rbmcap.geometry.rotations import unitquat_slerp
from rbmcap.motion.resample import resample_times, sample_frames
from rbmcap.skeleton import SMPLH_TO_SMPL

NUM_JOINTS = 24
SMPLH_POSE_WIDTH = 52 * 3
GENDERS = ("neutral", "male", "female")


@dataclass(eq=False)
class SMPLMotion:
    """An SMPL motion sequence.

    Attributes:
        poses: (T, 24, 3) float64 axis-angle local rotations (radians).
        trans: (T, 3) float64 root translation (metres, world frame, Z up).
        betas: (B,) float64 shape coefficients.
        gender: 'neutral', 'male' or 'female'.
        fps: frames per second.
        name: a short identifier (file stem, clip name).
        source: free-form metadata (JSON-serialisable): origin file, generator parameters...
    """

    poses: np.ndarray
    trans: np.ndarray
    betas: np.ndarray = field(default_factory=lambda: np.zeros(16))
    gender: str = "neutral"
    fps: float = 60.0
    name: str = ""
    source: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        label = location(sequence=self.name or "motion")
        self.poses = np.array(self.poses, dtype=np.float64)
        self.trans = np.array(self.trans, dtype=np.float64)
        self.betas = np.array(self.betas, dtype=np.float64).reshape(-1)
        if self.poses.ndim == 2 and self.poses.shape[1] == NUM_JOINTS * 3:
            self.poses = self.poses.reshape(-1, NUM_JOINTS, 3)
        if self.poses.ndim != 3 or self.poses.shape[1:] != (NUM_JOINTS, 3):
            raise DataError(f"{label}: poses of shape {self.poses.shape}, expected (T, 24, 3)")
        if self.trans.shape != (len(self.poses), 3):
            raise DataError(
                f"{label}: trans of shape {self.trans.shape}, expected ({len(self.poses)}, 3)"
            )
        _check_finite(self.poses, "poses", self.name or "motion", "joint")
        _check_finite(self.trans, "trans", self.name or "motion", "axis")
        if not np.isfinite(self.betas).all():
            k = int(np.flatnonzero(~np.isfinite(self.betas))[0])
            raise DataError(f"{label}: betas contains NaN or infinite values (betas[{k}])")
        try:
            self.fps = float(self.fps)
        except (TypeError, ValueError):
            raise DataError(f"{label}: fps must be a positive number, got {self.fps!r}") from None
        if not (math.isfinite(self.fps) and self.fps > 0):
            raise DataError(f"{label}: fps must be a positive number, got {self.fps}")
        self.gender = _normalise_gender(self.gender, label)
        self.name = str(self.name)
        self.source = dict(self.source)

    # ------------------------------------------------------------------------------ basics
    @property
    def num_frames(self) -> int:
        return int(self.poses.shape[0])

    @property
    def duration_s(self) -> float:
        """Length in seconds: frames / fps (each frame lasts 1/fps, as AMASS counts it)."""
        return self.num_frames / self.fps

    def __len__(self) -> int:
        return self.num_frames

    def __getitem__(self, index: int | slice) -> SMPLMotion:
        """Frames ``index`` as a new motion; a slice step k divides fps by k."""
        if isinstance(index, int | np.integer):
            i = range(self.num_frames)[index]
            index = slice(i, i + 1)
        if not isinstance(index, slice):
            raise TypeError(f"SMPLMotion indices must be int or slice, not {type(index).__name__}")
        step = index.step or 1
        if step <= 0:
            raise ValueError("SMPLMotion slices need a positive step")
        return self.replace(poses=self.poses[index], trans=self.trans[index], fps=self.fps / step)

    def replace(self, **changes: Any) -> SMPLMotion:
        """A copy with some fields changed (arrays are copied)."""
        fields = {
            "poses": self.poses,
            "trans": self.trans,
            "betas": self.betas,
            "gender": self.gender,
            "fps": self.fps,
            "name": self.name,
            "source": self.source,
        }
        fields.update(changes)
        return SMPLMotion(**fields)

    def rotmats(self) -> np.ndarray:
        """Local rotation matrices (T, 24, 3, 3)."""
        return roma.rotvec_to_rotmat(torch.from_numpy(self.poses)).numpy()

    # ---------------------------------------------------------------------------- resample
    def resample(self, fps: float) -> SMPLMotion:
        """The same motion sampled at ``fps``: slerp for rotations, linear for translation.

        Output frame k sits at time k / fps; frames run while that time is within the input's
        time span [0, (T-1)/fps_in], so no frame is extrapolated.
        """
        fps = float(fps)
        if not (math.isfinite(fps) and fps > 0):
            raise DataError(f"{self.name or 'motion'}: cannot resample to fps={fps}")
        if fps == self.fps or self.num_frames < 2:
            return self.replace(fps=fps)
        times = resample_times(self.num_frames, self.fps, fps)
        lo, hi, w = sample_frames(self.num_frames, self.fps, times)
        quats = roma.rotvec_to_unitquat(torch.from_numpy(self.poses))
        wt = torch.from_numpy(w)[:, None].expand(len(w), NUM_JOINTS)
        q = unitquat_slerp(quats[lo], quats[hi], wt)
        poses = roma.unitquat_to_rotvec(q).numpy()
        trans = self.trans[lo] * (1.0 - w[:, None]) + self.trans[hi] * w[:, None]
        return self.replace(poses=poses, trans=trans, fps=fps)

    # ----------------------------------------------------------------------------- storage
    def to_npz_dict(self) -> dict[str, np.ndarray]:
        """AMASS SMPL+H style arrays: SMPL's hands go to SMPL-H's first index-finger joints."""
        full = np.zeros((self.num_frames, 52, 3), dtype=np.float64)
        full[:, list(SMPLH_TO_SMPL)] = self.poses
        return {
            "poses": full.reshape(self.num_frames, SMPLH_POSE_WIDTH),
            "trans": self.trans,
            "betas": self.betas,
            "gender": np.array(self.gender),
            "mocap_framerate": np.array(self.fps),
            "name": np.array(self.name),
            "source": np.array(json.dumps(self.source, sort_keys=True)),
        }

    def save(self, path: str | Path) -> Path:
        """Write an AMASS-style ``.npz`` atomically (:func:`rbmcap.atomic.atomic_path`).

        The bytes depend only on the motion (numpy's zip entries carry a fixed timestamp).
        """
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez_compressed(fh, **self.to_npz_dict())
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> SMPLMotion:
        """Read any supported motion ``.npz`` (see :func:`rbmcap.motion.amass.read_motion`)."""
        from rbmcap.motion.amass import read_motion

        return read_motion(path)

    def __repr__(self) -> str:
        return (
            f"SMPLMotion(name={self.name!r}, frames={self.num_frames}, fps={self.fps:g}, "
            f"betas={len(self.betas)}, gender={self.gender!r})"
        )


def _normalise_gender(gender: Any, label: str) -> str:
    if isinstance(gender, np.ndarray):
        gender = gender.item() if gender.size == 1 else gender.tolist()
    if isinstance(gender, bytes):
        gender = gender.decode("utf-8", "replace")
    text = str(gender).strip().lower()
    if text not in GENDERS:
        raise DataError(f"{label}: gender {gender!r}, expected one of {', '.join(GENDERS)}")
    return text


def _check_finite(values: np.ndarray, key: str, name: str, part: str) -> None:
    """DataError naming the sequence and the first frame (and joint or axis) where ``values``
    (T, ...) is NaN or infinite."""
    bad = ~np.isfinite(values)
    if bad.any():
        first = np.argwhere(bad)[0]
        raise DataError(
            f"{location(sequence=name, frame=int(first[0]))}: {key} contains NaN or infinite "
            f"values ({part} {int(first[1])})"
        )
