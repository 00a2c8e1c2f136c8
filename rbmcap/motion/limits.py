"""Joint limits as data: a box on each joint's local rotation vector.

The limits live in ``conf/motion/joint_limits.yaml`` (see its header for the axes and signs).
Procedural motion samples inside them and clips to them; tests check motions against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.config.packaged import conf_file
from rbmcap.config.safe_yaml import load_yaml_mapping
from rbmcap.errors import ConfigError
from rbmcap.skeleton import NUM_SMPL_JOINTS, SMPL_JOINT_NAMES


@dataclass(frozen=True)
class JointLimits:
    """Per-joint bounds on local rotation vectors (radians).

    Attributes:
        lower, upper: (24, 3) bounds; the pelvis row is (-inf, inf) (it is not limited).
    """

    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def load(cls, path: str | Path | None = None) -> JointLimits:
        """Read limits from YAML (default ``conf/motion/joint_limits.yaml``)."""
        path = Path(path) if path is not None else conf_file("motion", "joint_limits.yaml")
        data = load_yaml_mapping(path)
        units = data.get("units", "degrees")
        if units not in ("degrees", "radians"):
            raise ConfigError(f"{path}: units must be 'degrees' or 'radians', got {units!r}")
        scale = np.pi / 180.0 if units == "degrees" else 1.0
        lower = np.full((NUM_SMPL_JOINTS, 3), -np.inf)
        upper = np.full((NUM_SMPL_JOINTS, 3), np.inf)
        joints = data.get("joints")
        if not isinstance(joints, dict):
            raise ConfigError(f"{path}: expected a 'joints' mapping of SMPL joint → x/y/z ranges")
        for name, axes in joints.items():
            if name not in SMPL_JOINT_NAMES:
                raise ConfigError(f"{path}: unknown SMPL joint {name!r}")
            j = SMPL_JOINT_NAMES.index(name)
            for a, axis in enumerate("xyz"):
                try:
                    lo, hi = (float(v) for v in axes[axis])
                except (KeyError, TypeError, ValueError):
                    raise ConfigError(
                        f"{path}: {name}.{axis} must be a [min, max] pair of numbers"
                    ) from None
                if lo > hi:
                    raise ConfigError(f"{path}: {name}.{axis} has min {lo} > max {hi}")
                lower[j, a], upper[j, a] = lo * scale, hi * scale
        return cls(lower=lower, upper=upper)

    def clip(self, poses: np.ndarray) -> np.ndarray:
        """Clip (..., 24, 3) axis-angle poses into the limits (the pelvis is left alone)."""
        return np.clip(poses, self.lower, self.upper)

    def violation(self, poses: np.ndarray) -> np.ndarray:
        """(..., 24) how far (radians, ≥ 0) each joint's rotation vector lies outside its box."""
        below = np.maximum(self.lower - poses, 0.0)
        above = np.maximum(poses - self.upper, 0.0)
        return np.nan_to_num(np.maximum(below, above)).max(-1)

    def within(self, poses: np.ndarray, tol: float = 1e-9) -> bool:
        """Whether every joint rotation of (..., 24, 3) poses lies within the limits."""
        return bool((self.violation(poses) <= tol).all())

    def sample_box(self, scale: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
        """The limit box shrunk about its centre by ``scale`` (pelvis row zero): (24, 3) each."""
        lo, hi = self.lower.copy(), self.upper.copy()
        lo[0] = hi[0] = 0.0
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        return mid - scale * half, mid + scale * half
