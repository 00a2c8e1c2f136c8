"""A session's calibration: the subject's shape and each plate's constant offset from its virtual
plate, the one place that offsets are turned into arrays and applied, and the file ``rbmcap
calibrate`` writes (``calib.yaml``).

The offsets, in the virtual plate's frame (:func:`to_physical`; its inverse :func:`to_virtual`)::

    R_phys = R_virt · R_off        p_phys = p_virt + R_virt · t_off

:meth:`Calibration.offsets` gives the arrays for plates in a given order
(:class:`PlateOffsets`, checked against the file's names); :meth:`PlateOffsets.apply` maps
observed plates onto their virtual counterparts frame by frame (``rbmcap live``) and
:meth:`Calibration.apply` a whole capture (``rbmcap infer``, ``rbmcap calibrate``'s checks).

Schema (fixed, so files move between tools and people)::

    betas: [0.12, -0.40, ...]      # the subject's shape
    frames: [[0], [12, 40, 131]]   # the frames used, per capture (array positions)
    captures: [static.npz, walk.npz]   # optional: the captures, in the order of ``frames``
    alignment: {rotation: [rx, ry, rz], translation_m: [x, y, z]}   # virtual -> capture world
    plates:
      left_shin: {rotation_offset: [rx, ry, rz], position_offset_m: [x, y, z],
                  residual_mm: 4.1, residual_deg: 1.2}      # residuals optional (diagnostics)
    joints:        # optional: joints measured from the plates' motion (calibrate.functional)
      left_knee: {parent: left_thigh, child: left_shin, centre_parent_m: [x, y, z],
                  centre_child_m: [x, y, z], axis_parent: [x, y, z], axis_child: [x, y, z],
                  range_deg: 61.0, off_axis_deg: 2.4, residual_mm: 2.7,
                  uncertainty_mm: [9.7, 9.8, 24.0], from_prior: 1, frames: 255,
                  noise: shared}   # optional (older files: shared), calibrate --joint-noise
    joint_offsets:  # optional: the subject's joint correction (calibrate.joint_correction)
      left_knee: [x, y, z]     # m, the body's rest frame: where the joint sits from the regressor's

A file without ``joints`` (every file written before they were measured) means what it meant:
the body model's own joint centres; one without ``joint_offsets`` (written before the
correction) keeps the regressor's joints.

Rotations are rotation vectors in radians.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import roma
import torch
import yaml

from rbmcap.atomic import write_text_atomic
from rbmcap.calibrate.functional import JOINT_KEYS, JOINT_NOISE, FunctionalJoint
from rbmcap.config.safe_yaml import read_yaml, type_name
from rbmcap.config.values import MAX_MAGNITUDE, finite_vector, short_repr
from rbmcap.errors import ConfigError, FormatError
from rbmcap.skeleton import SMPL_JOINT_NAMES

if TYPE_CHECKING:
    from rbmcap.calibrate.report import CalibrationReport
    from rbmcap.io.capture import Capture

HEADER = (
    "# rbmcap calibration. frames: the frames fitted, per capture (array positions).\n"
    "# Rotations: rotation vectors (radians). Offsets in the plate frame:\n"
    "#   R_phys = R_virt R_off, p_phys = p_virt + R_virt t_off. alignment: the virtual body's\n"
    "#   root (rest pose, upright) -> capture world at the first frame fitted.\n"
    "# residual_mm / residual_deg: mean plate residual over the frames fitted.\n"
)
KEYS = ("betas", "frames", "alignment", "plates")
OPTIONAL_KEYS = ("captures", "joints", "joint_offsets")
PLATE_KEYS = ("rotation_offset", "position_offset_m")
PLATE_OPTIONAL = ("residual_mm", "residual_deg")
MAX_JOINT_OFFSET_M = 0.2
"""Largest joint correction a file may hold per axis, m (a real one is a few centimetres)."""
MAX_FRAME = 2.0**53
"""Largest frame position accepted (every integer up to it is exact in a float64)."""


def to_physical(virt_pos, virt_rot, r_off, t_off):
    """Physical plates from virtual ones: ``(p_virt + R_virt t_off, R_virt R_off)``.

    Args:
        virt_pos: (..., N, 3) m; virt_rot: (..., N, 3, 3) world-from-plate; r_off: (N, 3, 3);
            t_off: (N, 3) m, in the virtual plate's frame. NumPy arrays or tensors alike.
    """
    return virt_pos + (virt_rot @ t_off[..., None])[..., 0], virt_rot @ r_off


def to_virtual(pos, rot, r_off, t_off):
    """Virtual plates from observed (physical) ones, the inverse of :func:`to_physical`:
    ``R_virt = R_phys R_offᵀ``, ``p_virt = p_phys − R_virt t_off`` (shapes as there)."""
    r_virt = rot @ r_off.swapaxes(-1, -2)
    return pos - (r_virt @ t_off[..., None])[..., 0], r_virt


def offsets_between(virt_pos, virt_rot, phys_pos, phys_rot):
    """The offsets (R_off (..., 3, 3), t_off (..., 3) m) that carry virtual plates onto physical
    ones, both in the same world: ``R_off = R_virtᵀ R_phys``, ``t_off = R_virtᵀ (p_phys −
    p_virt)``."""
    rt = virt_rot.swapaxes(-1, -2)
    return rt @ phys_rot, (rt @ (phys_pos - virt_pos)[..., None])[..., 0]


@dataclass(frozen=True, eq=False)
class PlateOffsets:
    """A calibration's offsets as arrays, for plates in the order of ``names``.

    Attributes:
        names: the plates, in the order of the arrays.
        rotation: (N, 3, 3) R_off, float64; position: (N, 3) t_off, m, float64.
    """

    names: tuple[str, ...]
    rotation: np.ndarray
    position: np.ndarray

    def apply(self, pos, rot, valid) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Observed plates onto their virtual counterparts (:func:`to_virtual`, in float64).

        Args:
            pos: (..., N, 3) m; rot: (..., N, 3, 3); valid: (..., N) bool, N = ``len(names)``.

        Returns:
            pos, rot as float32 and a copy of valid; plates not seen keep their observed values.
        """
        p = np.asarray(pos, dtype=np.float64)
        r = np.asarray(rot, dtype=np.float64)
        seen = np.array(valid, dtype=bool)
        vp, vr = to_virtual(p, r, self.rotation, self.position)
        vp = np.where(seen[..., None], vp, p)
        vr = np.where(seen[..., None, None], vr, r)
        return vp.astype(np.float32), vr.astype(np.float32), seen


@dataclass(eq=False)
class PlateOffset:
    """One plate's constant offset: ``rotation`` (3,) rotation vector (rad), ``position`` (3,) m,
    both in the virtual plate's frame."""

    rotation: np.ndarray
    position: np.ndarray
    residual_mm: float | None = None
    residual_deg: float | None = None


@dataclass(eq=False)
class Calibration:
    """A session's calibration.

    Attributes:
        betas: (B,) the subject's shape.
        frames: per capture, the frame indices (array positions) the fit used.
        rotation: (3,) rotation vector and translation: (3,) metres of the alignment that maps
            the virtual rest pose (upright, canonical Z-up frame) into the capture world at the
            first frame used.
        plates: plate name -> :class:`PlateOffset`, in the marker set's order.
        captures: the captures' names, in the order of ``frames`` (may be empty).
        joints: SMPL joint name → the joint measured from its two plates' motion
            (:class:`rbmcap.calibrate.functional.FunctionalJoint`); empty in files from before.
        joint_offsets: SMPL joint name → (3,) m, the subject's joint correction in the body's
            rest frame (:mod:`rbmcap.calibrate.joint_correction`); empty in files from before.
        report: the fit's diagnostics (:class:`rbmcap.calibrate.report.CalibrationReport`), or
            None for a calibration read from a file.
        source: the file it was read from or written to (errors name it), or None.
        lines: plate name -> its line in ``source`` (1-based), where known.
    """

    betas: np.ndarray
    frames: list[list[int]]
    rotation: np.ndarray
    translation: np.ndarray
    plates: dict[str, PlateOffset] = field(default_factory=dict)
    captures: list[str] = field(default_factory=list)
    joints: dict[str, FunctionalJoint] = field(default_factory=dict)
    joint_offsets: dict[str, np.ndarray] = field(default_factory=dict)
    report: CalibrationReport | None = None
    source: str | None = None
    lines: dict[str, int] = field(default_factory=dict)

    def offsets(self, names) -> PlateOffsets:
        """The offsets of the plates ``names`` (a marker set's, in its order) as arrays.

        Raises:
            ConfigError: a plate of ``names`` has no offset here; the message names the
                calibration file, the line and name of a plate it has that ``names`` lacks (a
                misspelling), and the names expected.
        """
        names = tuple(names)
        missing = [n for n in names if n not in self.plates]
        if missing:
            raise ConfigError(self._mismatch(names, missing))
        offs = [self.plates[n] for n in names]
        rotvecs = torch.as_tensor(np.stack([o.rotation for o in offs]), dtype=torch.float64)
        return PlateOffsets(
            names,
            roma.rotvec_to_rotmat(rotvecs).numpy(),
            np.stack([o.position for o in offs]).astype(np.float64),
        )

    def joint_offset_array(self) -> np.ndarray | None:
        """The joint correction as (24, 3) m for
        :meth:`rbmcap.body.BodyModel.with_joint_offsets`, or None when there is none."""
        if not self.joint_offsets:
            return None
        out = np.zeros((24, 3))
        for name, d in self.joint_offsets.items():
            out[SMPL_JOINT_NAMES.index(name)] = d
        return out if out.any() else None

    def apply(self, capture: Capture) -> Capture:
        """``capture`` with every plate mapped onto its virtual counterpart (a new Capture,
        float32; plates not seen keep their values). Raises ConfigError as :meth:`offsets`."""
        pos, rot, valid = self.offsets(capture.names).apply(capture.pos, capture.rot, capture.valid)
        return replace(capture, pos=pos, rot=rot, valid=valid)

    def _mismatch(self, names: tuple[str, ...], missing: list[str]) -> str:
        """The message of :meth:`offsets` for plates ``missing`` from the calibration."""
        where = self.source or "calibration"
        unknown = [n for n in self.plates if n not in names]
        expected = f"expected the plates {', '.join(names)}"
        if unknown:
            line = self.lines.get(unknown[0])
            head = f"{where}:{line}" if line else where
            return (
                f"{head}: unknown plate {unknown[0]!r} (no offset for {missing[0]!r}); {expected}"
            )
        return f"{where}: no offset for plate {missing[0]!r}; {expected}"

    def to_dict(self) -> dict:
        """The YAML content (plain lists and floats)."""

        def f(x) -> list[float]:
            return [float(v) for v in np.asarray(x).reshape(-1)]

        def plate(o: PlateOffset) -> dict:
            out = {"rotation_offset": f(o.rotation), "position_offset_m": f(o.position)}
            for key in PLATE_OPTIONAL:
                value = getattr(o, key)
                if value is not None and np.isfinite(value):
                    out[key] = round(float(value), 3)
            return out

        data = {
            "betas": f(self.betas),
            "frames": [[int(i) for i in fr] for fr in self.frames],
        }
        if self.captures:
            data["captures"] = [str(c) for c in self.captures]
        data["alignment"] = {"rotation": f(self.rotation), "translation_m": f(self.translation)}
        data["plates"] = {name: plate(o) for name, o in self.plates.items()}
        if self.joints:
            data["joints"] = {name: j.to_dict() for name, j in self.joints.items()}
        if self.joint_offsets:
            data["joint_offsets"] = {n: f(d) for n, d in self.joint_offsets.items()}
        return data

    def save(self, path: str | Path) -> Path:
        """Write the YAML file atomically; it becomes the calibration's ``source``."""
        text = HEADER + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)
        out = write_text_atomic(path, text)
        self.source, self.lines = str(out), _plate_lines(text)
        return out

    @classmethod
    def load(cls, path: str | Path) -> Calibration:
        """Read a calibration file.

        Raises:
            ConfigError: no such file; a bad value (the message names the file and the key).
            FormatError: the file is not UTF-8, not YAML (``file:line:column``) or not a mapping.
        """
        path = Path(path)
        data = read_yaml(path)
        if not isinstance(data, dict):
            raise FormatError(
                f"{path}: not a calibration file: expected a mapping with keys "
                f"{', '.join(KEYS)}, got {type_name(data)}"
            )
        calib = from_dict(data, str(path))
        calib.source, calib.lines = str(path), _plate_lines(path.read_text(encoding="utf-8"))
        return calib


def _plate_lines(text: str) -> dict[str, int]:
    """Plate name -> line (1-based) of its key under ``plates`` in a calibration's YAML text
    (already read safely, so composing it again is bounded); empty where it is not that shape."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    if not isinstance(root, yaml.MappingNode):
        return {}
    for key, value in root.value:
        if key.value == "plates" and isinstance(value, yaml.MappingNode):
            return {str(k.value): k.start_mark.line + 1 for k, _ in value.value}
    return {}


def from_dict(data, where: str = "calibration") -> Calibration:
    """A :class:`Calibration` from the YAML content; ConfigError naming ``where`` and the key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping with keys {', '.join(KEYS)}")
    unknown = [k for k in data if k not in KEYS + OPTIONAL_KEYS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {short_repr(unknown[0])}; expected {', '.join(KEYS)}"
        )
    for key in KEYS:
        if key not in data:
            raise ConfigError(f"{where}: missing key {key!r}")
    frames = _frames(data["frames"], where)
    captures = data.get("captures") or []
    if not isinstance(captures, list) or not all(isinstance(c, str) for c in captures):
        raise ConfigError(
            f"{where}: captures: expected a list of names, got {short_repr(captures)}"
        )
    align = _mapping(data["alignment"], ("rotation", "translation_m"), where, "alignment")
    plates = _mapping(data["plates"], None, where, "plates")
    offsets = {}
    for name, entry in plates.items():
        if isinstance(name, (bool, list, dict)) or name is None or name == "":
            raise ConfigError(f"{where}: plates: {short_repr(name)} is not a plate name")
        key = f"plates.{name}"
        e = _mapping(entry, PLATE_KEYS, where, key, optional=PLATE_OPTIONAL)
        diag = {
            k: float(_vector([e[k]], 1, where, f"{key}.{k}")[0]) for k in PLATE_OPTIONAL if k in e
        }
        offsets[str(name)] = PlateOffset(
            _vector(e["rotation_offset"], 3, where, f"{key}.rotation_offset"),
            _vector(e["position_offset_m"], 3, where, f"{key}.position_offset_m"),
            **diag,
        )
    joints = {}
    for name, entry in _mapping(data.get("joints") or {}, None, where, "joints").items():
        joints[str(name)] = _joint(name, entry, offsets, where)
    corrections = {}
    for name, d in _mapping(data.get("joint_offsets") or {}, None, where, "joint_offsets").items():
        if name not in SMPL_JOINT_NAMES:
            raise ConfigError(
                f"{where}: joint_offsets: {short_repr(name)} is not an SMPL joint name"
            )
        corrections[str(name)] = _vector(d, 3, where, f"joint_offsets.{name}", MAX_JOINT_OFFSET_M)
    return Calibration(
        betas=_vector(data["betas"], None, where, "betas"),
        frames=frames,
        rotation=_vector(align["rotation"], 3, where, "alignment.rotation"),
        translation=_vector(align["translation_m"], 3, where, "alignment.translation_m"),
        plates=offsets,
        captures=list(captures),
        joints=joints,
        joint_offsets=corrections,
    )


def _joint(name, entry, plates: dict, where: str) -> FunctionalJoint:
    """One ``joints`` entry; ConfigError naming the key."""
    key = f"joints.{name}"
    if name not in SMPL_JOINT_NAMES:
        raise ConfigError(f"{where}: joints: {short_repr(name)} is not an SMPL joint name")
    e = _mapping(entry, JOINT_KEYS, where, key, optional=("noise",))
    for side in ("parent", "child"):
        if e[side] not in plates:
            raise ConfigError(
                f"{where}: {key}.{side}: {short_repr(e[side])} is not one of the plates"
            )

    def vec(k, size):
        return _vector(e[k], size, where, f"{key}.{k}")

    def number(k):
        return float(_vector([e[k]], 1, where, f"{key}.{k}")[0])

    frames, from_prior = number("frames"), number("from_prior")
    if frames < 0 or frames != round(frames) or from_prior not in range(7):
        raise ConfigError(f"{where}: {key}: frames and from_prior must be counts (0..6 directions)")
    noise = e.get("noise", "shared")  # files from before the choice: the one rule there was
    if noise not in JOINT_NOISE:
        known = ", ".join(JOINT_NOISE)
        raise ConfigError(f"{where}: {key}.noise: expected one of {known}, got {short_repr(noise)}")
    return FunctionalJoint(
        str(name), str(e["parent"]), str(e["child"]),
        vec("centre_parent_m", 3), vec("centre_child_m", 3),
        vec("axis_parent", 3), vec("axis_child", 3),
        number("range_deg"), number("off_axis_deg"), number("residual_mm"),
        vec("uncertainty_mm", 3), int(from_prior), int(frames), str(noise),
    )  # fmt: skip


def _frames(value, where: str) -> list[list[int]]:
    """``frames``: a list per capture of frame indices (a flat list: one capture)."""
    bad = ConfigError(
        f"{where}: frames: expected a list per capture of frame indices (integers ≥ 0), got "
        f"{short_repr(value)}"
    )
    if not isinstance(value, list) or not value:
        raise bad
    groups = value if all(isinstance(v, list) for v in value) else [value]
    out = []
    for group in groups:
        arr = finite_vector(group, None, MAX_FRAME) if group else np.zeros(0)
        if arr is None or (arr != np.round(arr)).any() or (arr < 0).any():
            raise bad
        out.append([int(i) for i in arr])
    return out


def _mapping(value, keys, where: str, key: str, optional=()) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: expected a mapping, got {short_repr(value)}")
    for k in keys or ():
        if k not in value:
            raise ConfigError(f"{where}: {key}: missing key {k!r}")
    extra = [k for k in value if k not in keys and k not in optional] if keys else []
    if extra:
        raise ConfigError(f"{where}: {key}: unknown key {short_repr(extra[0])}")
    return value


def _vector(
    value, size: int | None, where: str, key: str, bound: float = MAX_MAGNITUDE
) -> np.ndarray:
    """``value`` as float64 (size,): finite numbers of magnitude ≤ ``bound``, else ConfigError
    ``where: key: expected N finite numbers ...``."""
    arr = finite_vector(value, size, bound)
    if arr is None:
        want = f"{size} finite numbers" if size else "a list of finite numbers"
        raise ConfigError(
            f"{where}: {key}: expected {want} (|x| ≤ {bound:g}), got {short_repr(value)}"
        )
    return arr
