"""Plates solved from marker clusters or read from frames given as points (``plates.yaml``).

A plate definition names a plate's member markers (capture point names) and, optionally, their
coordinates in the plate frame (metres). Each frame, the plate's pose is the least-squares rigid
motion taking the definition onto the visible members (Kabsch, :func:`rigid_registration`, with
visibility as weights):

    R, t = argmin Σ_i v_i ‖R l_i + t − y_i‖²
    residual = sqrt(Σ_i v_i ‖R l_i + t − y_i‖² / Σ_i v_i)

so ``R`` is world-from-plate and ``t`` the plate origin in the world. A frame with fewer than three
visible members is invalid.

When ``local`` is absent it is estimated from the capture (:func:`estimate_local`): the mean shape
of the cluster over the frames where every member is seen (each frame aligned rigidly to a
reference, then averaged), with the origin at the members' centroid and the axes along their
principal directions (x the largest spread, y the next; each sign chosen so that the first member
with a clear coordinate on it is positive; z = x × y, right-handed).

A plate may instead be a ``frame`` of three points, ``origin``, ``x`` and ``y``, as models such as
Vicon's Plug-in Gait write their segment frames (``HEDO``, ``HEDA``, ``HEDL``): the pose is then
read, not fitted (:func:`frame_from_points`):

    t = o,   R = [x̂ ŷ x̂ × ŷ],   x̂ = (x − o) / ‖x − o‖,   ŷ = Gram–Schmidt of (y − o) against x̂

valid where the three points are seen and the axes are not degenerate, with ``residual_mm`` NaN.
Shipped definitions live in ``rbmcap/conf/plates/`` (:func:`plates_file`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import roma
import torch
import yaml
from tqdm import tqdm

from rbmcap.atomic import write_text_atomic
from rbmcap.config.compose import load_mapping
from rbmcap.config.packaged import conf_dir, named_yaml
from rbmcap.config.values import finite_vector, short_repr
from rbmcap.errors import ConfigError, DataError
from rbmcap.geometry.registration import rigid_registration
from rbmcap.io.capture import Capture

ESTIMATE_NOTE = (
    "local coordinates estimated from {source} ({frames} frames with every member seen): mean "
    "shape after rigid alignment; origin at the members' centroid; x, y = principal directions "
    "(largest spread first), each signed so the first member with a clear coordinate on it is "
    "positive; z = x × y"
)
_SIGN_EPS = 1e-4  # metres: a coordinate this small does not fix an axis sign
MAX_LOCAL_M = 1000.0
"""Largest local coordinate accepted (metres): a plate is centimetres across."""
MIN_AXIS_M = 1e-6
"""Shortest axis (origin to ``x`` or ``y`` point, metres) of a valid ``frame`` plate."""
MIN_AXIS_SINE = 1e-2
"""Smallest sine of the angle between the two axes of a valid ``frame`` plate (about 0.6°)."""
FRAME_KEYS = ("origin", "x", "y")


@dataclass
class PlateDefinition:
    """One plate of a plates YAML.

    Attributes:
        name: plate name.
        markers: member marker names (capture point names), at least 3, distinct; for a frame
            plate, the frame's three points (origin, x, y).
        local: (K, 3) float64 member coordinates in the plate frame, metres, or None (always
            None for a frame plate).
        note: how ``local`` was obtained when estimated (written as a comment), else "".
        frame: (origin, x, y) point names when the plate's pose is read from a frame given by
            points (module docstring), else None.
    """

    name: str
    markers: tuple[str, ...]
    local: np.ndarray | None = None
    note: str = ""
    frame: tuple[str, str, str] | None = None

    def __post_init__(self) -> None:
        if self.frame is not None and (self.markers != self.frame or self.local is not None):
            raise ValueError(
                f"plate {self.name!r}: a frame plate's markers are its frame "
                "points and it has no local coordinates"
            )

    @classmethod
    def from_frame(cls, name: str, origin: str, x: str, y: str) -> PlateDefinition:
        """A plate whose pose is the frame at point ``origin`` with axes toward ``x`` and ``y``."""
        return cls(name, (origin, x, y), frame=(origin, x, y))


def plates_file(name_or_path: str | Path) -> Path:
    """A plates YAML given by path or by the name of a shipped definition
    (``rbmcap/conf/plates/<name>.yaml``: ``plug-in-gait``); ConfigError listing those names when
    neither exists."""
    return named_yaml(name_or_path, "plates", "plate definition")


def _is_shipped(path: str | Path) -> bool:
    """Whether ``path`` is one of rbmcap's packaged files (never written back)."""
    return Path(path).resolve().is_relative_to(conf_dir().resolve())


def load_plate_definitions(name_or_path: str | Path) -> dict[str, PlateDefinition]:
    """Read a plates YAML, by path or shipped name (:func:`plates_file`), as
    {plate name: PlateDefinition}, in file order. A file may compose others through a
    ``defaults:`` list (:func:`rbmcap.config.compose.load_mapping`): e.g. ``defaults:
    [plug-in-gait, _self_]`` then the plates it adds or replaces.

    Raises:
        FormatError: the file is not UTF-8, not YAML (``file:line:column``) or not a mapping.
        ConfigError: the file is missing or the name unknown; no plate, a plate with fewer than 3
            (distinct) markers, a ``local`` entry that is not 3 finite numbers or does not match
            the markers, a ``frame`` that is not three distinct point names ``origin``, ``x``,
            ``y``, or both ``markers`` and ``frame`` (file and plate named).
    """
    path = plates_file(name_or_path)
    data = load_mapping(path, "plates", "plate definition")
    if not data:
        raise ConfigError(f"{path}: no plate defined")
    return {str(name): _parse_plate(str(name), entry, path) for name, entry in data.items()}


def _is_name(value: object) -> bool:
    return not isinstance(value, (list, dict, bool)) and value not in (None, "")


def _parse_plate(name: str, entry: object, path: Path) -> PlateDefinition:
    where = f"{path}: plate {short_repr(name)}"
    if isinstance(entry, dict) and "frame" in entry:
        return _parse_frame_plate(name, entry, where)
    if not isinstance(entry, dict) or not isinstance(entry.get("markers"), list):
        raise ConfigError(
            f"{where}: expected 'markers: [names]' or 'frame: {{origin: NAME, x: NAME, y: NAME}}'"
        )
    bad = [m for m in entry["markers"] if not _is_name(m)]
    if bad:
        raise ConfigError(f"{where}: markers: {short_repr(bad[0])} is not a marker name")
    markers = tuple(str(m) for m in entry["markers"])
    if len(set(markers)) != len(markers):
        raise ConfigError(f"{where}: a marker is listed twice in {short_repr(list(markers))}")
    if len(markers) < 3:
        raise ConfigError(f"{where}: {len(markers)} markers defined; a plate needs at least 3")
    unknown = set(map(str, entry)) - {"markers", "local"}
    if unknown:
        raise ConfigError(
            f"{where}: unknown keys {short_repr(sorted(unknown))} (expected markers, local)"
        )
    local = entry.get("local")
    if local is None:
        return PlateDefinition(name, markers)
    if (
        not isinstance(local, dict)
        or set(map(str, local)) != set(markers)
        or len(local) != len(markers)
    ):
        raise ConfigError(f"{where}: 'local' must give coordinates for exactly {list(markers)}")
    local = {str(k): v for k, v in local.items()}
    rows = []
    for m in markers:
        xyz = finite_vector(local[m], 3, bound=MAX_LOCAL_M)
        if xyz is None:
            raise ConfigError(
                f"{where}: local[{m!r}] = {short_repr(local[m])} is not 3 finite numbers (m, "
                f"|x| ≤ {MAX_LOCAL_M:g})"
            )
        rows.append(xyz)
    return PlateDefinition(name, markers, np.stack(rows))


def _parse_frame_plate(name: str, entry: dict, where: str) -> PlateDefinition:
    keys = set(map(str, entry))
    if "markers" in keys or "local" in keys:
        raise ConfigError(f"{where}: give either 'markers' (and 'local') or 'frame', not both")
    if keys != {"frame"}:
        raise ConfigError(
            f"{where}: unknown keys {short_repr(sorted(keys - {'frame'}))} (expected frame)"
        )
    frame = entry["frame"]
    expected = "'frame: {origin: NAME, x: NAME, y: NAME}'"
    if not isinstance(frame, dict) or set(map(str, frame)) != set(FRAME_KEYS) or len(frame) != 3:
        raise ConfigError(f"{where}: expected {expected}, got {short_repr(frame)}")
    frame = {str(k): v for k, v in frame.items()}
    for key in FRAME_KEYS:
        if not _is_name(frame[key]):
            raise ConfigError(f"{where}: frame.{key}: {short_repr(frame[key])} is not a point name")
    origin, x, y = (str(frame[k]) for k in FRAME_KEYS)
    if len({origin, x, y}) != 3:
        raise ConfigError(
            f"{where}: frame: origin, x and y must be three different points, got "
            f"{short_repr([origin, x, y])}"
        )
    return PlateDefinition.from_frame(name, origin, x, y)


def save_plate_definitions(path: str | Path, defs: dict[str, PlateDefinition]) -> Path:
    """Write ``defs`` as a plates YAML (atomically); estimated coordinates carry their note."""
    lines = [
        "# plates.yaml: plate -> member markers, local coordinates in metres (plate frame),",
        "# or a frame given by three points (origin, x, y)",
    ]
    for d in defs.values():
        if d.note:
            lines.append(f"# {d.name}: {d.note}")
        if d.frame is not None:
            entry: dict = {"frame": dict(zip(FRAME_KEYS, d.frame))}
        else:
            entry = {"markers": list(d.markers)}
        if d.local is not None:
            entry["local"] = {
                m: [round(float(x), 6) for x in xyz] for m, xyz in zip(d.markers, d.local)
            }
        text = yaml.safe_dump(
            {d.name: entry}, sort_keys=False, default_flow_style=None, allow_unicode=True
        )
        lines.append(text.rstrip("\n"))
    return write_text_atomic(path, "\n".join(lines) + "\n")


def _member_points(capture: Capture, d: PlateDefinition) -> tuple[np.ndarray, np.ndarray]:
    """(T, K, 3) metres and (T, K) visibility of the plate's members; ConfigError if absent."""
    names = capture.point_names or []
    missing = [m for m in d.markers if m not in names]
    if missing:
        raise ConfigError(
            f"plate {d.name!r}: markers {missing} are not in the capture "
            f"{capture.source or ''} (its points: {', '.join(names) or 'none'})"
        )
    idx = [names.index(m) for m in d.markers]
    return capture.points[:, idx].astype(np.float64), capture.point_valid[:, idx]


def estimate_local(capture: Capture, definition: PlateDefinition) -> PlateDefinition:
    """``definition`` with ``local`` (K, 3) estimated from the capture (module docstring).

    Raises:
        DataError: no frame sees every member, or the members are (nearly) collinear.
    """
    pts, vis = _member_points(capture, definition)
    full = vis.all(axis=1)
    if not full.any():
        raise DataError(
            f"plate {definition.name!r}: no frame sees all of "
            f"{list(definition.markers)}; give its local coordinates"
        )
    x = torch.from_numpy(pts[full])
    x = x - x.mean(dim=1, keepdim=True)
    ref = x[0]
    for _ in range(3):  # re-align to the mean shape: the first frame's noise no longer matters
        rot, _ = rigid_registration(x, ref)
        ref = torch.einsum("tij,tkj->tki", rot, x).mean(0)
    local = _principal_frame(ref.numpy(), definition.name)
    note = ESTIMATE_NOTE.format(source=capture.source or "the capture", frames=int(full.sum()))
    return replace(definition, local=local, note=note)


def _principal_frame(shape: np.ndarray, name: str) -> np.ndarray:
    """(K, 3) centred ``shape`` expressed in its principal axes (signs fixed, right-handed)."""
    shape = shape - shape.mean(0)
    evals, evecs = np.linalg.eigh(shape.T @ shape)
    if evals[1] < 1e-10:
        raise DataError(f"plate {name!r}: its markers are collinear; the plate frame is undefined")
    axes = evecs[:, ::-1].copy()  # columns: largest spread first
    for k in range(2):
        coords = shape @ axes[:, k]
        first = coords[np.abs(coords) > _SIGN_EPS]
        if len(first) and first[0] < 0:
            axes[:, k] *= -1
    axes[:, 2] = np.cross(axes[:, 0], axes[:, 1])
    return shape @ axes


def solve_plates(
    capture: Capture, defs: dict[str, PlateDefinition], *, progress: bool = False
) -> Capture:
    """Plate poses solved per frame from the capture's labelled points.

    Args:
        capture: a capture with ``points`` (T, M, 3) metres and ``point_valid`` (T, M).
        defs: plate definitions with ``local`` given (see :func:`estimate_local`).
        progress: show a progress bar (stderr) over the plates.

    Returns:
        The capture with the solved plates in ``defs`` order (names, pos (T, N, 3) m, rot
        world-from-plate, valid: ≥ 3 visible members, or for a frame plate its three points seen
        and its axes not degenerate, residual_mm (T, N) RMS residual, NaN where invalid and for
        frame plates); its points are kept.
    """
    if capture.points is None:
        raise ConfigError(f"{capture.source or 'capture'}: has no labelled points to solve plates")

    t, n = capture.num_frames, len(defs)
    pos, rot = np.zeros((t, n, 3)), np.tile(np.eye(3), (t, n, 1, 1))
    valid, res = np.zeros((t, n), bool), np.full((t, n), np.nan)
    for j, d in enumerate(tqdm(list(defs.values()), disable=not progress, unit="plate")):
        if d.frame is None and d.local is None:
            raise ConfigError(f"plate {d.name!r}: local coordinates missing; estimate them first")
        pts, vis = _member_points(capture, d)
        if d.frame is not None:
            rot[:, j], ok = frame_from_points(pts[:, 0], pts[:, 1], pts[:, 2])
            valid[:, j] = ok & vis.all(axis=1)
            pos[:, j] = np.where(valid[:, j, None], pts[:, 0], 0.0)
            continue
        rot[:, j], pos[:, j], res[:, j], valid[:, j] = _fit_plate(d.local, pts, vis)
    res[~valid] = np.nan
    return replace(capture, names=list(defs), pos=pos, rot=rot, valid=valid, residual_mm=res)


def frame_from_points(
    origin: np.ndarray, x_point: np.ndarray, y_point: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """World-from-plate rotations of frames given by three points, in float64.

    Args:
        origin, x_point, y_point: (..., 3) positions, metres.

    Returns:
        R (..., 3, 3) with columns x̂ toward ``x_point``, ŷ the part of ``y_point − origin``
        orthogonal to x̂ (Gram–Schmidt, :func:`roma.special_gramschmidt`) and x̂ × ŷ; identity
        where not ok. ok (...) bool: both axes at least :data:`MIN_AXIS_M` long and the sine of
        their angle at least :data:`MIN_AXIS_SINE`. NaN points are not ok.
    """
    x = np.asarray(x_point, np.float64) - np.asarray(origin, np.float64)
    y = np.asarray(y_point, np.float64) - np.asarray(origin, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        nx, ny = np.linalg.norm(x, axis=-1), np.linalg.norm(y, axis=-1)
        sine = np.linalg.norm(np.cross(x, y), axis=-1) / np.maximum(nx * ny, 1e-300)
        ok = (nx >= MIN_AXIS_M) & (ny >= MIN_AXIS_M) & (sine >= MIN_AXIS_SINE)
    axes = np.stack([x, y], axis=-1)  # (..., 3, 2) columns
    axes[~ok] = np.eye(3)[:, :2]
    rot = roma.special_gramschmidt(torch.from_numpy(axes)).numpy()
    return rot, ok


def _fit_plate(
    local: np.ndarray, pts: np.ndarray, vis: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rigid fit of ``local`` (K, 3) to ``pts`` (T, K, 3) weighted by ``vis`` (T, K), in float64.

    Returns R (T, 3, 3), t (T, 3) metres, RMS residual (T,) mm, valid (T,) (≥ 3 visible).
    """
    src = torch.from_numpy(np.asarray(local, np.float64))
    dst = torch.from_numpy(pts)
    w = torch.from_numpy(vis.astype(np.float64))
    valid = w.sum(-1) >= 3
    # a tiny weight everywhere keeps frames with < 3 visible members well-posed; they are invalid
    r, t = rigid_registration(src.expand_as(dst), dst, w + 1e-9)
    err = torch.einsum("tij,kj->tki", r, src) + t[:, None] - dst
    rms = torch.sqrt((w * err.square().sum(-1)).sum(-1) / w.sum(-1).clamp_min(1.0)) * 1000.0
    return r.numpy(), t.numpy(), rms.numpy(), valid.numpy()


def plates_from_points(
    capture: Capture, plates_path: str | Path, *, progress: bool = False
) -> Capture:
    """Solve the plates of ``plates_path`` (a path or a shipped name, :func:`plates_file`) from
    the capture's points; when some cluster plates have no local coordinates, estimate them and
    write the plates file back (atomically) with a note. A shipped file is never written: a
    shipped cluster plate without coordinates is a ConfigError."""
    path = plates_file(plates_path)
    defs = load_plate_definitions(path)
    if capture.points is None:
        raise ConfigError(f"{capture.source or 'capture'}: has no labelled points to solve plates")
    for d in defs.values():  # every member present before anything is written back
        _member_points(capture, d)
    missing = [name for name, d in defs.items() if d.frame is None and d.local is None]
    if missing and _is_shipped(path):
        raise ConfigError(
            f"{path}: plates {missing} have no local coordinates; copy the file "
            "and pass its path to estimate them"
        )
    for name in missing:
        defs[name] = estimate_local(capture, defs[name])
    if missing:
        save_plate_definitions(path, defs)
    return solve_plates(capture, defs, progress=progress)
