"""Signed-distance primitives for the stand-in body's implicit surface (numpy, metres).

Each function takes points (..., 3) and returns approximate signed distances (...), negative
inside. They need only be accurate near the surface: the mesh is the zero level set of their
exponential smooth union.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def round_cone(p: np.ndarray, a, b, ra: float, rb: float) -> np.ndarray:
    """Capsule from ``a`` to ``b`` whose radius goes linearly from ``ra`` to ``rb``."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    ab = b - a
    t = np.clip(((p - a) @ ab) / (ab @ ab), 0.0, 1.0)
    closest = a + t[..., None] * ab
    return np.linalg.norm(p - closest, axis=-1) - (ra + (rb - ra) * t)


def ellipsoid(p: np.ndarray, center, radii) -> np.ndarray:
    """Axis-aligned ellipsoid (Quilez's bound: exact on the surface, smooth off it)."""
    q = (p - np.asarray(center, float)) / np.asarray(radii, float)
    k0 = np.linalg.norm(q, axis=-1)
    k1 = np.linalg.norm(q / np.asarray(radii, float), axis=-1)
    return k0 * (k0 - 1.0) / np.maximum(k1, 1e-9)


@dataclass(frozen=True)
class Part:
    """One primitive of the body, carried by SMPL joint ``joint`` (the bone it moves with)."""

    name: str
    joint: int
    kind: str  # 'cone' | 'ellipsoid'
    a: tuple[float, float, float]
    b: tuple[float, float, float] | None = None
    radii: tuple[float, ...] = ()

    def distance(self, p: np.ndarray) -> np.ndarray:
        if self.kind == "cone":
            return round_cone(p, self.a, self.b, self.radii[0], self.radii[1])
        return ellipsoid(p, self.a, self.radii)

    def bounds(self, margin: float) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned box (lo, hi) outside which the part's distance exceeds ``margin``."""
        if self.kind == "cone":
            r = max(self.radii)
            pts = np.array([self.a, self.b])
            return pts.min(0) - r - margin, pts.max(0) + r + margin
        c, r = np.array(self.a), np.array(self.radii)
        return c - r - margin, c + r + margin

    def mirrored(self, joint: int) -> Part:
        """The same part on the other side of the body (x → -x), carried by ``joint``."""
        flip = lambda v: None if v is None else (-v[0], v[1], v[2])  # noqa: E731
        return Part(
            self.name.replace("left", "right"),
            joint,
            self.kind,
            flip(self.a),
            flip(self.b),
            self.radii,
        )
