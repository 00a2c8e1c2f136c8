"""The stand-in's skin: zero level set of a smooth union of primitives, meshed and relaxed.

The field is the exponential smooth minimum ``-τ log Σ exp(-dᵢ/τ)`` of the parts' signed
distances, evaluated part by part inside each part's box only (the terms vanish outside), so the
whole body costs a few hundred thousand distance evaluations. Marching cubes gives a closed mesh;
a few rounds of tangential relaxation with re-projection onto the level set even out its triangles
(marching-cubes slivers would make plate frames unstable).
"""

from __future__ import annotations

import numpy as np
from skimage.measure import marching_cubes

from rbmcap.body.standin.primitives import Part
from rbmcap.body.topology import vertex_adjacency

BLEND = 0.008
"""Smooth-union temperature τ in metres (the blend radius is a few τ)."""


def part_distances(parts: tuple[Part, ...], points: np.ndarray) -> np.ndarray:
    """(N, P) signed distance of every point to every part."""
    return np.stack([part.distance(points) for part in parts], axis=-1)


def field(parts: tuple[Part, ...], points: np.ndarray, members=None) -> np.ndarray:
    """Smooth-union signed distance (N,) at arbitrary points.

    ``members`` (from :func:`part_members`) limits each part to the points near it; parts
    farther than the blend margin contribute nothing measurable.
    """
    margin = 8 * BLEND
    if members is None:
        members = [slice(None)] * len(parts)
    total = np.zeros(len(points))
    for part, idx in zip(parts, members):
        d = part.distance(points[idx])
        total[idx] += np.exp(-np.minimum(d, margin) / BLEND)
    return -BLEND * np.log(np.maximum(total, 1e-30))


def part_members(parts: tuple[Part, ...], points: np.ndarray, slack: float) -> list[np.ndarray]:
    """Indices of the points inside each part's box (grown by ``slack`` metres)."""
    out = []
    for part in parts:
        lo, hi = part.bounds(8 * BLEND + slack)
        out.append(np.flatnonzero(((points >= lo) & (points <= hi)).all(axis=1)))
    return out


def grid_field(parts: tuple[Part, ...], spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """Field sampled on a regular grid covering the body; returns (values, grid origin)."""
    margin = 8 * BLEND
    boxes = [part.bounds(margin) for part in parts]
    lo = np.min([b[0] for b in boxes], axis=0) - 2 * spacing
    hi = np.max([b[1] for b in boxes], axis=0) + 2 * spacing
    shape = np.ceil((hi - lo) / spacing).astype(int) + 1
    total = np.zeros(shape)
    for part, (blo, bhi) in zip(parts, boxes):
        i0 = np.floor((blo - lo) / spacing).astype(int)
        i1 = np.ceil((bhi - lo) / spacing).astype(int) + 1
        axes = [lo[k] + spacing * np.arange(i0[k], i1[k]) for k in range(3)]
        pts = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1)
        d = part.distance(pts.reshape(-1, 3)).reshape(pts.shape[:-1])
        total[i0[0] : i1[0], i0[1] : i1[1], i0[2] : i1[2]] += np.exp(-np.minimum(d, margin) / BLEND)
    values = -BLEND * np.log(np.maximum(total, 1e-30))
    return values, lo


def mesh_surface(parts: tuple[Part, ...], spacing: float, relax_steps: int = 6):
    """Closed triangle mesh (vertices (V,3) float64, faces (F,3) int64, outward winding)."""
    values, origin = grid_field(parts, spacing)
    # Keep the level set off the grid nodes: a node at ~0 makes marching-cubes slivers.
    snap = 0.15 * spacing
    near = np.abs(values) < snap
    values[near] = np.where(values[near] < 0, -snap, snap)
    verts, faces, _, _ = marching_cubes(values, 0.0, spacing=(spacing,) * 3, allow_degenerate=False)
    verts = verts + origin
    faces = faces.astype(np.int64)
    if _signed_volume(verts, faces) < 0:
        faces = faces[:, ::-1].copy()
    verts = relax(parts, verts, faces, relax_steps)
    return verts, faces


def _signed_volume(v: np.ndarray, f: np.ndarray) -> float:
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


def relax(parts, verts: np.ndarray, faces: np.ndarray, steps: int) -> np.ndarray:
    """Move vertices toward their neighbours' centroid within the surface, then back onto it."""
    adj = vertex_adjacency(faces, len(verts)).astype(np.float64)
    degree = np.asarray(adj.sum(axis=1)).ravel()
    eps = 1e-4
    members = part_members(parts, verts, slack=0.02)
    for _ in range(steps):
        normals = _field_gradient(parts, verts, eps, members)
        delta = adj @ verts / degree[:, None] - verts
        delta -= (delta * normals).sum(-1, keepdims=True) * normals
        verts = verts + 0.5 * delta
        for _ in range(2):
            g = _field_gradient(parts, verts, eps, members)
            verts = verts - field(parts, verts, members)[:, None] * g
    return verts


def _field_gradient(parts, points: np.ndarray, eps: float, members=None) -> np.ndarray:
    """Unit gradient of the field (the outward normal on the surface), central differences."""
    offsets = np.eye(3) * eps
    g = np.stack(
        [field(parts, points + o, members) - field(parts, points - o, members) for o in offsets],
        axis=-1,
    ) / (2 * eps)
    return g / np.maximum(np.linalg.norm(g, axis=-1, keepdims=True), 1e-12)
