"""``Capture``: plates (and labelled points) of a real recording, in rbmcap's conventions.

The capture file (design §8) is what ``rbmcap import`` writes and ``calibrate`` and ``infer``
read: one ``.npz`` holding

- ``fps`` (), ``format`` () the reader that made it, ``source`` () the file it came from;
- ``names`` (N,) plates in file order; ``pos`` (T, N, 3) float32 metres; ``rot`` (T, N, 3, 3)
  float32 world-from-plate rotations; ``valid`` (T, N) bool;
- ``residual_mm`` (T, N) float32: RMS residual of the rigid fit where a pose was solved from
  marker points, NaN where the pose came from the file;
- ``frame_numbers`` (T,) int: the file's frame numbers;
- where the file has labelled points: ``point_names`` (M,), ``points`` (T, M, 3) metres,
  ``point_valid`` (T, M) bool.

World Z up, metres, rotation matrices (design §2). Invalid entries hold zeros (positions) and
identities (rotations), never NaN, so arrays can be used without masking first.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rbmcap.atomic import atomic_path
from rbmcap.errors import FormatError

CAPTURE_KEYS = ("fps", "format", "source", "names", "pos", "rot", "valid", "residual_mm",
                "frame_numbers")  # fmt: skip
POINT_KEYS = ("point_names", "points", "point_valid")


@dataclass(eq=False)
class Capture:
    """Plate poses of a recording (see the module docstring for units and frames).

    Attributes:
        fps: frames per second.
        names: (N,) plate names as the file gives them (or mapped to a marker set's names).
        pos: (T, N, 3) float32 plate positions, metres, world Z up.
        rot: (T, N, 3, 3) float32 world-from-plate rotations.
        valid: (T, N) bool.
        residual_mm: (T, N) float32 RMS rigid-fit residual, NaN where the pose came from the file.
        frame_numbers: (T,) int64 frame numbers of the file.
        format: name of the reader that made it (e.g. 'vicon-segments', 'optitrack', 'c3d').
        source: path of the file it was read from.
        point_names, points, point_valid: labelled points (M,), (T, M, 3) m, (T, M) bool, or None.
    """

    fps: float
    names: list[str]
    pos: np.ndarray
    rot: np.ndarray
    valid: np.ndarray
    residual_mm: np.ndarray | None = None
    frame_numbers: np.ndarray | None = None
    format: str = ""
    source: str = ""
    point_names: list[str] | None = None
    points: np.ndarray | None = None
    point_valid: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.names = [str(n) for n in self.names]
        t, n = len(self.pos), len(self.names)
        self.pos = np.asarray(self.pos, dtype=np.float32).reshape(t, n, 3)
        self.rot = np.asarray(self.rot, dtype=np.float32).reshape(t, n, 3, 3)
        self.valid = np.asarray(self.valid, dtype=bool).reshape(t, n)
        if self.residual_mm is None:
            self.residual_mm = np.full((t, n), np.nan, dtype=np.float32)
        self.residual_mm = np.asarray(self.residual_mm, dtype=np.float32).reshape(t, n)
        if self.frame_numbers is None:
            self.frame_numbers = np.arange(t)
        self.frame_numbers = np.asarray(self.frame_numbers, dtype=np.int64).reshape(t)
        if not (np.isfinite(self.fps) and self.fps > 0):
            raise FormatError(
                f"{self.source or 'capture'}: frame rate {self.fps!r} is not positive"
            )
        self.fps = float(self.fps)
        # invalid entries: zeros and identities, never NaN
        self.pos[~self.valid] = 0.0
        self.rot[~self.valid] = np.eye(3, dtype=np.float32)
        if self.points is not None:
            m = len(self.point_names or [])
            self.point_names = [str(p) for p in self.point_names or []]
            self.points = np.asarray(self.points, dtype=np.float32).reshape(t, m, 3)
            pv = self.point_valid if self.point_valid is not None else np.ones((t, m), bool)
            self.point_valid = np.asarray(pv, dtype=bool).reshape(t, m)
            self.points[~self.point_valid] = 0.0

    @property
    def num_frames(self) -> int:
        return int(self.pos.shape[0])

    @property
    def num_plates(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int:
        """Position of plate ``name``; FormatError listing the plates when absent."""
        try:
            return self.names.index(name)
        except ValueError:
            raise FormatError(f"{self.source or 'capture'}: no plate {name!r}; it has "
                              f"{', '.join(self.names)}") from None  # fmt: skip

    def select(self, names: list[str], rename: list[str] | None = None) -> Capture:
        """The plates ``names`` in that order (optionally renamed), points kept."""
        idx = [self.index(n) for n in names]
        return replace(
            self, names=list(rename or names), pos=self.pos[:, idx], rot=self.rot[:, idx],
            valid=self.valid[:, idx], residual_mm=self.residual_mm[:, idx],
        )  # fmt: skip

    def frames(self, start: int, stop: int) -> Capture:
        """Frames [start, stop) (positions in the arrays, not frame numbers)."""
        s = slice(start, stop)
        pts = {}
        if self.points is not None:
            pts = {"points": self.points[s], "point_valid": self.point_valid[s]}
        return replace(
            self, pos=self.pos[s], rot=self.rot[s], valid=self.valid[s],
            residual_mm=self.residual_mm[s], frame_numbers=self.frame_numbers[s], **pts,
        )  # fmt: skip

    def to_npz_dict(self) -> dict[str, np.ndarray]:
        """The capture file's arrays (see the module docstring)."""
        out = {
            "fps": np.float64(self.fps), "format": np.str_(self.format),
            "source": np.str_(self.source), "names": np.array(self.names, dtype=str),
            "pos": self.pos, "rot": self.rot, "valid": self.valid,
            "residual_mm": self.residual_mm, "frame_numbers": self.frame_numbers,
        }  # fmt: skip
        if self.points is not None:
            out["point_names"] = np.array(self.point_names, dtype=str)
            out["points"] = self.points
            out["point_valid"] = self.point_valid
        return out

    def save(self, path: str | Path) -> Path:
        """Write the capture file atomically (nothing half-written is ever left)."""
        path = Path(path)
        if path.suffix != ".npz":
            raise FormatError(f"{path}: a capture file must end in .npz")
        with atomic_path(path) as tmp:
            np.savez(tmp, **self.to_npz_dict())
        return path

    @classmethod
    def load(cls, path: str | Path) -> Capture:
        """Read a capture file; FormatError naming the file and what is missing or wrong."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
        except FileNotFoundError:
            raise FormatError(f"{path}: no such file") from None
        except (OSError, ValueError) as exc:
            raise FormatError(f"{path}: not a capture file ({exc})") from None
        missing = [k for k in CAPTURE_KEYS if k not in data]
        if missing:
            raise FormatError(f"{path}: not a capture file: missing {', '.join(missing)}")
        pts = {}
        if all(k in data for k in POINT_KEYS):
            pts = {"point_names": [str(s) for s in data["point_names"]],
                   "points": data["points"], "point_valid": data["point_valid"]}  # fmt: skip
        t, n = data["pos"].shape[:2] if data["pos"].ndim == 3 else (0, -1)
        if n < 0 or data["rot"].shape != (t, n, 3, 3) or data["valid"].shape != (t, n) or len(
            data["names"]) != n:  # fmt: skip
            raise FormatError(f"{path}: inconsistent shapes: names {data['names'].shape}, pos "
                              f"{data['pos'].shape}, rot {data['rot'].shape}, valid "
                              f"{data['valid'].shape}")  # fmt: skip
        return cls(
            fps=float(data["fps"]), names=[str(s) for s in data["names"]], pos=data["pos"],
            rot=data["rot"], valid=data["valid"], residual_mm=data["residual_mm"],
            frame_numbers=data["frame_numbers"], format=str(data["format"]),
            source=str(data["source"]), **pts,
        )  # fmt: skip
