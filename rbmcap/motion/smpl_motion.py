"""``SMPLMotion``: the one motion format every source produces.

A motion is SMPL local joint rotations ``poses (T, 24, 3)`` (axis-angle, radians; joint 0 is the
global orientation, which carries the Y-up→Z-up turn), root translation ``trans (T, 3)`` in metres
(world frame, Z up, floor z = 0), shape ``betas (B,)``, ``gender``, ``fps`` and a ``name``. SMPL
turns the body about the rest pelvis joint J0(betas) and then adds ``trans``, so the world pelvis is
``J0 + trans``.

On disk a motion is an AMASS SMPL+H style ``.npz`` (``poses (T, 156)``, ``trans``, ``betas``,
``gender``, ``mocap_framerate``) plus rbmcap's ``name`` and ``source`` keys, so anything that reads
AMASS reads these files. :func:`read_motion` reads them and both AMASS releases, told apart by
their keys:

* SMPL+H G (``*_poses.npz``): ``poses (T, 156)`` (52 joints), ``trans``, ``betas (16,)``,
  ``gender``, ``mocap_framerate``. rbmcap's own files are of this kind (plus ``name``/``source``).
* SMPL-X N (``*_stageii.npz``): ``poses (T, 165)`` (55 joints) or the split keys ``root_orient``,
  ``pose_body``, ``pose_hand``..., ``trans``, ``betas``, ``gender``, ``mocap_frame_rate``.

Both become an :class:`SMPLMotion`: the first 22 joints are SMPL's body; SMPL's hand joints
(22, 23) take the first index-finger joint of each hand.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import roma
import torch

from rbmcap.atomic import atomic_path
from rbmcap.errors import DataError, FormatError, location
from rbmcap.geometry.rotations import unitquat_slerp
from rbmcap.motion.resample import resample_times, sample_frames
from rbmcap.skeleton import SMPLH_TO_SMPL

NUM_JOINTS = 24
SMPLH_POSE_WIDTH = 52 * 3
GENDERS = ("neutral", "male", "female")
SEQUENCE_SUFFIXES = ("_poses.npz", "_stageii.npz")
# SMPL-X joints: 22 body, jaw, two eyes, then 15 joints per hand (index finger first).
_SMPLX_HANDS = (25, 40)
_SMPLH_HANDS = (22, 37)


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
        joint_offsets: None, or (24, 3) float64 m: the subject's joint correction (a
            calibration's ``joint_offsets``, :meth:`rbmcap.body.BodyModel.with_joint_offsets`),
            in the body's rest frame: the body that poses this motion has its joints there.
            Saved as the ``joint_offsets`` array (other AMASS readers ignore it).
    """

    poses: np.ndarray
    trans: np.ndarray
    betas: np.ndarray = field(default_factory=lambda: np.zeros(16))
    gender: str = "neutral"
    fps: float = 60.0
    name: str = ""
    source: dict[str, Any] = field(default_factory=dict)
    joint_offsets: np.ndarray | None = None

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
        if self.joint_offsets is not None:
            d = np.array(self.joint_offsets, dtype=np.float64)
            if d.shape != (NUM_JOINTS, 3) or not np.isfinite(d).all():
                raise DataError(f"{label}: joint_offsets of shape {d.shape}, expected (24, 3)")
            self.joint_offsets = d if d.any() else None

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
            "joint_offsets": self.joint_offsets,
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
        arrays = {
            "poses": full.reshape(self.num_frames, SMPLH_POSE_WIDTH),
            "trans": self.trans,
            "betas": self.betas,
            "gender": np.array(self.gender),
            "mocap_framerate": np.array(self.fps),
            "name": np.array(self.name),
            "source": np.array(json.dumps(self.source, sort_keys=True)),
        }
        if self.joint_offsets is not None:
            arrays["joint_offsets"] = self.joint_offsets
        return arrays

    def save(self, path: str | Path) -> Path:
        """Write an AMASS-style ``.npz`` atomically (:func:`rbmcap.atomic.atomic_path`).

        The bytes depend only on the motion (numpy's zip entries carry a fixed timestamp).
        """
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez_compressed(fh, **self.to_npz_dict())
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> SMPLMotion:
        """Read any supported motion ``.npz`` (:func:`read_motion`)."""
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


# ------------------------------------------------------------------------------------ files
def read_motion(path: str | Path) -> SMPLMotion:
    """Read an AMASS SMPL+H G, SMPL-X N or rbmcap ``.npz`` motion, telling them apart by keys.

    Raises:
        FileNotFoundError: there is no such file.
        FormatError: the file is not a readable ``.npz`` (truncated, corrupted, pickled objects),
            lacks the keys of every known kind, or holds arrays of the wrong shape or dtype.
        DataError: the arrays are readable but unusable: no frames, NaN or infinite values
            (``"FILE: sequence 'NAME', frame F: poses contains NaN or infinite values (joint
            J)"``), a frame rate that is not a positive number.
    """
    path = Path(path)
    arrays = _load_npz(path)
    fps_key = next((k for k in ("mocap_framerate", "mocap_frame_rate") if k in arrays), None)
    try:
        if "pose_body" in arrays or "root_orient" in arrays:
            poses = _poses_from_split_keys(arrays, path)
        elif "poses" in arrays:
            poses = _poses_from_full(_numeric(arrays, "poses", path), path)
        else:
            raise _missing(path, arrays, "poses (or root_orient + pose_body)")
        for key in ("trans", "betas"):
            if key not in arrays:
                raise _missing(path, arrays, key)
        if fps_key is None:
            raise _missing(path, arrays, "mocap_framerate (SMPL+H) or mocap_frame_rate (SMPL-X)")
        if len(poses) == 0:
            raise DataError(f"{path}: the motion has no frames")
        fps = _numeric(arrays, fps_key, path)
        if fps.size != 1:
            raise FormatError(f"{path}: {fps_key} of shape {fps.shape}, expected one number")
        name = str(arrays["name"]) if "name" in arrays else _stem(path)
        return SMPLMotion(
            poses=poses,
            trans=_numeric(arrays, "trans", path),
            betas=_numeric(arrays, "betas", path).reshape(-1),
            gender=arrays.get("gender", "neutral"),
            fps=float(fps.reshape(-1)[0]),
            name=name,
            source=_source(arrays, path),
            joint_offsets=_numeric(arrays, "joint_offsets", path)
            if "joint_offsets" in arrays
            else None,
        )
    except DataError as exc:
        message = str(exc)
        raise DataError(
            message if message.startswith(str(path)) else f"{path}: {message}"
        ) from None
    except (ValueError, TypeError) as exc:
        raise FormatError(f"{path}: malformed motion arrays ({exc})") from None


def _numeric(arrays: Mapping[str, np.ndarray], key: str, path: Path) -> np.ndarray:
    """``arrays[key]`` as float64; FormatError unless it holds numbers (not text, not complex)."""
    arr = np.asarray(arrays[key])
    if arr.dtype.kind not in "biuf":
        raise FormatError(f"{path}: {key} has dtype {arr.dtype}, expected numbers")
    return arr.astype(np.float64)


def _source(arrays: Mapping[str, np.ndarray], path: Path) -> dict:
    source = {"file": str(path), "format": _kind(arrays)}
    if "source" in arrays:
        try:
            extra = json.loads(str(arrays["source"]))
        except (ValueError, RecursionError):
            raise FormatError(f"{path}: source is not JSON") from None
        if not isinstance(extra, dict):
            raise FormatError(f"{path}: source is not a JSON object")
        source.update(extra)
    return source


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the file. Decoding a damaged archive can fail in many ways (zipfile, zlib,
    numpy's header parser, a huge declared shape), so every exception of the decoding itself is
    a FormatError."""
    if not path.is_file():
        raise FileNotFoundError(2, "No such file", str(path))
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise ValueError("a single .npy array")
            return {key: data[key] for key in data.files}
    except Exception as exc:  # the decoding of a damaged file: see the docstring
        reason = str(exc) or type(exc).__name__
        if "allow_pickle" in reason or "Object arrays" in reason:
            reason = "it holds pickled objects, which rbmcap does not load"
        raise FormatError(
            f"{path}: cannot read as an AMASS .npz (truncated or not a numpy archive: {reason})"
        ) from None


def _poses_from_full(poses: np.ndarray, path: Path) -> np.ndarray:
    poses = np.asarray(poses, dtype=np.float64)
    if poses.ndim != 2 or poses.shape[1] not in (72, 156, 165):
        raise FormatError(
            f"{path}: poses of shape {poses.shape}, expected (T, 72) SMPL, (T, 156) SMPL+H "
            f"or (T, 165) SMPL-X"
        )
    joints = poses.reshape(len(poses), poses.shape[1] // 3, 3)
    if joints.shape[1] == 24:
        return joints
    hands = _SMPLH_HANDS if joints.shape[1] == 52 else _SMPLX_HANDS
    return np.concatenate([joints[:, :22], joints[:, list(hands)]], axis=1)


def _poses_from_split_keys(arrays: Mapping[str, np.ndarray], path: Path) -> np.ndarray:
    for key in ("root_orient", "pose_body"):
        if key not in arrays:
            raise _missing(path, arrays, key)
    root = _numeric(arrays, "root_orient", path)
    body = _numeric(arrays, "pose_body", path)
    if root.ndim != 2 or root.shape[1] != 3 or body.shape != (len(root), 63):
        raise FormatError(
            f"{path}: root_orient {root.shape} / pose_body {body.shape}, "
            f"expected (T, 3) and (T, 63)"
        )
    hands = np.zeros((len(root), 2, 3))
    if "pose_hand" in arrays:
        pose_hand = _numeric(arrays, "pose_hand", path)
        if pose_hand.shape != (len(root), 90):
            raise FormatError(f"{path}: pose_hand of shape {pose_hand.shape}, expected (T, 90)")
        hands = pose_hand.reshape(len(root), 2, 15, 3)[:, :, 0]
    return np.concatenate([root[:, None], body.reshape(-1, 21, 3), hands], axis=1)


def _kind(arrays: Mapping[str, np.ndarray]) -> str:
    if "mocap_frame_rate" in arrays or "pose_body" in arrays:
        return "amass-smplx"
    width = np.asarray(arrays["poses"]).shape[-1]
    return {72: "smpl", 156: "amass-smplh"}.get(width, "amass-smplx")


def _missing(path: Path, arrays: Mapping[str, np.ndarray], key: str) -> FormatError:
    have = ", ".join(sorted(arrays)) or "nothing"
    return FormatError(f"{path}: not an AMASS motion file: missing {key} (it has: {have})")


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (*SEQUENCE_SUFFIXES, ".npz"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return path.stem
