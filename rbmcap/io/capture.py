"""``Capture``: plates (and labelled points) of a real recording, in rbmcap's conventions.

The capture file (docs/formats.md#capture-npz) is what ``rbmcap import`` writes and
``calibrate`` and ``infer`` read: one ``.npz`` holding

- ``fps`` (), ``format`` () the reader that made it, ``source`` () the file it came from;
- ``names`` (N,) plates in file order; ``pos`` (T, N, 3) float32 metres; ``rot`` (T, N, 3, 3)
  float32 world-from-plate rotations; ``valid`` (T, N) bool;
- ``residual_mm`` (T, N) float32: RMS residual of the rigid fit where a pose was solved from
  marker points, NaN where the pose came from the file;
- ``frame_numbers`` (T,) int: the file's frame numbers;
- where the file has labelled points: ``point_names`` (M,), ``points`` (T, M, 3) metres,
  ``point_valid`` (T, M) bool.

World Z up, metres, rotation matrices (docs/conventions.md#frames). Invalid entries hold zeros
(positions) and identities (rotations), never NaN, so arrays can be used without masking first.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass, field, replace
from pathlib import Path

import numpy as np

from rbmcap.atomic import atomic_path
from rbmcap.errors import DataError, FormatError
from rbmcap.geometry.orthonormal import FLOAT32_ATOL, orthonormalize, where_plate

CAPTURE_KEYS = (
    "fps",
    "format",
    "source",
    "names",
    "pos",
    "rot",
    "valid",
    "residual_mm",
    "frame_numbers",
)
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
        rotation_deviation: the largest correction made to a valid rotation when it was
            re-orthonormalised (``max |σᵢ − 1|`` of the matrices given, see
            :func:`rbmcap.geometry.orthonormal.orthonormalize`): ~6e-8 for float32 rotations,
            ~1e-6 for rotations written with 6 decimals; a matrix off by more than
            ROTATION_TOLERANCE (1e-3) is refused.

    Raises (on construction):
        FormatError: an array of the wrong shape or dtype.
        DataError: a NaN, infinite or float32-overflowing value where a plate or point is valid,
            a matrix that is not a rotation, an fps that is not a positive finite number (each
            named: ``"SOURCE: plate 'NAME', frame F: ..."``).
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

    rotation_deviation: float = 0.0
    origin: InitVar[str | None] = None

    def __post_init__(self, origin: str | None) -> None:
        """Check and convert every array (the boundary where outside numbers come in): shapes and
        dtypes (FormatError), then values (DataError naming the plate and frame): positions and
        points finite in float32 wherever valid, rotations re-orthonormalised within
        :data:`~rbmcap.geometry.orthonormal.ROTATION_TOLERANCE` (the largest correction kept in
        :attr:`rotation_deviation`), fps finite and positive, frame numbers integers.
        ``origin``: the name errors start with (default: ``source``)."""
        label = origin or self.source or "capture"
        self.names = [str(n) for n in self.names]
        pos = _numbers(self.pos, "pos", label)
        if pos.ndim == 0:
            raise FormatError(f"{label}: pos is a scalar, expected (T, N, 3)")
        t, n = len(pos), len(self.names)
        pos = _shaped(pos, (t, n, 3), "pos", label)
        rot = _shaped(_numbers(self.rot, "rot", label), (t, n, 3, 3), "rot", label)
        self.valid = _shaped(_flags(self.valid, "valid", label), (t, n), "valid", label)
        self.fps = _frame_rate(self.fps, label)
        where = where_plate(label, self.names)
        self.pos = _finite32(pos, self.valid, where, "position")
        self.rot, dev = orthonormalize(
            rot, self.valid, atol=FLOAT32_ATOL, dtype=np.float32, where=where
        )
        self.rotation_deviation = max(float(self.rotation_deviation), dev)
        self.residual_mm = _residuals(self.residual_mm, self.valid, where, label)
        self.frame_numbers = _frame_numbers(self.frame_numbers, t, label)
        if self.points is not None:
            self.point_names = [str(p) for p in self.point_names or []]
            m = len(self.point_names)
            pts = _shaped(_numbers(self.points, "points", label), (t, m, 3), "points", label)
            pv = self.point_valid if self.point_valid is not None else np.ones((t, m), bool)
            self.point_valid = _shaped(
                _flags(pv, "point_valid", label), (t, m), "point_valid", label
            )
            self.points = _finite32(
                pts, self.point_valid, where_plate(label, self.point_names, "point"), "position"
            )

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
            raise FormatError(
                f"{self.source or 'capture'}: no plate {name!r}; it has {', '.join(self.names)}"
            ) from None

    def select(self, names: list[str], rename: list[str] | None = None) -> Capture:
        """The plates ``names`` in that order (optionally renamed), points kept."""
        idx = [self.index(n) for n in names]
        return replace(
            self,
            names=list(rename or names),
            pos=self.pos[:, idx],
            rot=self.rot[:, idx],
            valid=self.valid[:, idx],
            residual_mm=self.residual_mm[:, idx],
        )

    def frames(self, start: int, stop: int) -> Capture:
        """Frames [start, stop) (positions in the arrays, not frame numbers)."""
        s = slice(start, stop)
        pts = {}
        if self.points is not None:
            pts = {"points": self.points[s], "point_valid": self.point_valid[s]}
        return replace(
            self,
            pos=self.pos[s],
            rot=self.rot[s],
            valid=self.valid[s],
            residual_mm=self.residual_mm[s],
            frame_numbers=self.frame_numbers[s],
            **pts,
        )

    def to_npz_dict(self) -> dict[str, np.ndarray]:
        """The capture file's arrays (see the module docstring)."""
        out = {
            "fps": np.float64(self.fps),
            "format": np.str_(self.format),
            "source": np.str_(self.source),
            "names": np.array(self.names, dtype=str),
            "pos": self.pos,
            "rot": self.rot,
            "valid": self.valid,
            "residual_mm": self.residual_mm,
            "frame_numbers": self.frame_numbers,
        }
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
        """Read a capture file.

        Raises:
            FormatError: the file is missing, not an ``.npz`` (truncated, corrupted, pickled
                objects), lacks a key, or holds arrays of the wrong shape or dtype.
            DataError: the values are unusable (see the class); named after ``path``.
        """
        path = Path(path)
        data = _read_npz(path)
        missing = [k for k in CAPTURE_KEYS if k not in data]
        if missing:
            raise FormatError(f"{path}: not a capture file: missing {', '.join(missing)}")
        pts = {}
        if all(k in data for k in POINT_KEYS):
            pts = {
                "point_names": _strings(data["point_names"], "point_names", path),
                "points": data["points"],
                "point_valid": data["point_valid"],
            }
        names = _strings(data["names"], "names", path)
        if data["pos"].ndim != 3 or data["pos"].shape[1:] != (len(names), 3):
            raise FormatError(
                f"{path}: pos of shape {data['pos'].shape}, expected (T, "
                f"{len(names)}, 3) for {len(names)} names"
            )
        if len(data["pos"]) == 0:
            raise DataError(f"{path}: the capture has no frames")
        return cls(
            fps=_scalar(data["fps"], "fps", path),
            names=names,
            pos=data["pos"],
            rot=data["rot"],
            valid=data["valid"],
            residual_mm=data["residual_mm"],
            frame_numbers=data["frame_numbers"],
            format=_text(data["format"], "format", path),
            source=_text(data["source"], "source", path),
            origin=str(path),
            **pts,
        )


# ----------------------------------------------------------------------- checks and readers
def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` (no pickles); FormatError for anything unreadable. Decoding a
    damaged archive can fail in many ways (zipfile, zlib, numpy's header parser, a huge
    declared shape), so every exception of the decoding itself is a format error."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise FormatError(f"{path}: not a capture file (a single .npy array, not .npz)")
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise FormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise FormatError(f"{path}: is a folder, not a capture file") from None
    except FormatError:
        raise
    except Exception as exc:  # the decoding of a damaged file: see the docstring
        reason = str(exc) or type(exc).__name__
        if "allow_pickle" in reason or "Object arrays" in reason:
            reason = "it holds pickled objects, which rbmcap does not load"
        raise FormatError(f"{path}: not a capture file ({reason})") from None


def _scalar(value: np.ndarray, key: str, path) -> float:
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "biuf":
        raise FormatError(
            f"{path}: {key} of dtype {arr.dtype} and shape {arr.shape}, expected one number"
        )
    return float(arr.reshape(-1)[0])


def _text(value: np.ndarray, key: str, path) -> str:
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "US":
        raise FormatError(
            f"{path}: {key} of dtype {arr.dtype} and shape {arr.shape}, expected one string"
        )
    item = arr.reshape(-1)[0]
    return item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)


def _strings(value: np.ndarray, key: str, path) -> list[str]:
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.dtype.kind not in "US":
        raise FormatError(
            f"{path}: {key} of dtype {arr.dtype} and shape {arr.shape}, expected (N,) strings"
        )
    return [s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s) for s in arr]


def _numbers(value, key: str, label: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise FormatError(f"{label}: {key} has dtype {arr.dtype}, expected numbers")
    return arr


def _flags(value, key: str, label: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype.kind not in "biu":
        raise FormatError(f"{label}: {key} has dtype {arr.dtype}, expected booleans")
    return arr.astype(bool, copy=False)


def _shaped(arr: np.ndarray, shape: tuple[int, ...], key: str, label: str) -> np.ndarray:
    """``arr`` as ``shape`` (any layout with that many elements, as numpy reshapes)."""
    if arr.shape == shape:
        return arr
    if arr.size != int(np.prod(shape)):
        raise FormatError(
            f"{label}: {key} of shape {arr.shape}, expected {shape} (frames, names, ...)"
        )
    return arr.reshape(shape)


def _frame_rate(fps, label: str) -> float:
    try:
        value = float(fps)
    except (TypeError, ValueError):
        raise FormatError(f"{label}: frame rate {fps!r} is not a number") from None
    if not (np.isfinite(value) and value > 0):
        raise DataError(f"{label}: frame rate {fps!r} is not a positive finite number")
    return value


def _finite32(arr: np.ndarray, valid: np.ndarray, where, what: str) -> np.ndarray:
    """(T, N, 3) float32 copy of ``arr``, zeros where not ``valid``; DataError naming the first
    valid entry that is NaN, infinite, or beyond float32's range (it would become infinite)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.array(arr, dtype=np.float32)
    bad = valid & ~np.isfinite(out).all(axis=-1)
    if bad.any():
        f, i = (int(k) for k in np.argwhere(bad)[0])
        value = np.asarray(arr[f, i], dtype=np.float64)
        why = f"{what} {value.tolist()} is NaN or infinite"
        if np.isfinite(value).all():
            why = f"{what} {value.tolist()} is beyond float32's range (±3.4e38)"
        raise DataError(f"{where((f, i))}: {why}")
    out[~valid] = 0.0
    return out


def _residuals(value, valid: np.ndarray, where, label: str) -> np.ndarray:
    """(T, N) float32 residuals: NaN allowed (pose from the file), infinite refused."""
    if value is None:
        return np.full(valid.shape, np.nan, dtype=np.float32)
    arr = _shaped(_numbers(value, "residual_mm", label), valid.shape, "residual_mm", label)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.array(arr, dtype=np.float32)
    bad = valid & np.isinf(out)
    if bad.any():
        f, i = (int(k) for k in np.argwhere(bad)[0])
        raise DataError(
            f"{where((f, i))}: residual_mm {arr[f, i]!r} is infinite or beyond float32's range"
        )
    return out


def _frame_numbers(value, t: int, label: str) -> np.ndarray:
    """(T,) int64 frame numbers (default 0, 1, …); whole, finite numbers only."""
    if value is None:
        return np.arange(t, dtype=np.int64)
    arr = _shaped(_numbers(value, "frame_numbers", label), (t,), "frame_numbers", label)
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float64)
        whole = np.isfinite(arr) & (np.abs(arr) < 2.0**62)
        whole[whole] = arr[whole] == np.round(arr[whole])
        if not whole.all():
            f = int(np.flatnonzero(~whole)[0])
            raise DataError(f"{label}: frame {f}: frame number {arr[f]!r} is not a whole number")
    return arr.astype(np.int64)
