"""Plate frames at mesh vertices (docs/architecture.md#conventions), batched in torch.

At marker vertex v of the posed mesh, every frame:

- x = the angle-weighted vertex normal Σ αᵢ nᵢ / ‖Σ αᵢ nᵢ‖ over the faces around v (αᵢ the
  face's interior angle at v, nᵢ its unit normal);
- r = centroid of one fixed adjacent face − v (the smallest-area adjacent face on the rest mesh,
  chosen once and reused in every frame);
- z = normalise(x × r), y = z × x, R = [x y z] (columns, world-from-plate);
- p = v + 0.0095 m · x (the plate stands off the skin).

Only v and its one-ring enter, so the frames need the sparse skinning of those vertices alone:
:func:`plate_topology` gathers, once per body and marker set, which vertices to skin and how
each marker's fan of faces indexes them; :func:`plate_frames` turns skinned positions into frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import trimesh

from rbmcap.errors import ModelError

PLATE_STANDOFF = 0.0095
"""Distance (m) from the skin vertex to the plate origin, along the normal."""


@dataclass(frozen=True)
class PlateTopology:
    """Index arrays that turn skinned vertices into plate frames.

    Attributes:
        skin_ids: (K,) body vertex ids to skin: the marker vertices and their one-rings, sorted.
        centre: (N,) index into ``skin_ids`` of each marker vertex.
        fan_a, fan_b: (N, M) indices into ``skin_ids`` of the two other corners of each face
            around the marker vertex, in the face's winding order (v, a, b); padded with the
            first face where a vertex has fewer than M faces.
        fan_mask: (N, M) 1.0 for real faces, 0.0 for padding.
        ref: (N, 2) indices into ``skin_ids`` of the reference face's other two corners.
    """

    skin_ids: np.ndarray
    centre: np.ndarray
    fan_a: np.ndarray
    fan_b: np.ndarray
    fan_mask: np.ndarray
    ref: np.ndarray


def faces_around(faces: np.ndarray, vertex_id: int) -> np.ndarray:
    """Faces (n, 3) that use ``vertex_id``, each rotated so it comes first (winding kept)."""
    f = np.asarray(faces, dtype=np.int64)
    rows, cols = np.nonzero(f == vertex_id)
    return np.stack([np.roll(f[r], -c) for r, c in zip(rows, cols, strict=True)], 0)


def plate_topology(
    faces: np.ndarray, rest_vertices: np.ndarray, vertex_ids: np.ndarray
) -> PlateTopology:
    """Precompute the fans and reference faces of ``vertex_ids`` (N,) on a mesh.

    Args:
        faces: (F, 3) vertex indices.
        rest_vertices: (V, 3) rest mesh; the reference face is chosen on it.
        vertex_ids: (N,) marker vertices.
    """
    faces = np.asarray(faces, dtype=np.int64)
    ids = np.asarray(vertex_ids, dtype=np.int64).reshape(-1)
    fans, refs = [], []
    for v in ids:
        fan = faces_around(faces, int(v)) if np.any(faces == v) else np.zeros((0, 3), np.int64)
        if len(fan) < 2:
            raise ModelError(f"vertex {int(v)} lies on fewer than two faces; no plate frame there")
        fans.append(fan)
        areas = trimesh.triangles.area(np.asarray(rest_vertices, dtype=np.float64)[fan])
        refs.append(fan[int(np.argmin(areas))])
    skin_ids = np.unique(np.concatenate([ids, *[f.reshape(-1) for f in fans]]))
    local = {int(g): i for i, g in enumerate(skin_ids)}
    to_local = np.vectorize(local.__getitem__, otypes=[np.int64])
    m = max(len(f) for f in fans)
    fan_a = np.zeros((len(ids), m), np.int64)
    fan_b = np.zeros((len(ids), m), np.int64)
    mask = np.zeros((len(ids), m), np.float32)
    for i, fan in enumerate(fans):
        padded = np.concatenate([fan, np.repeat(fan[:1], m - len(fan), 0)], 0)
        fan_a[i], fan_b[i] = to_local(padded[:, 1]), to_local(padded[:, 2])
        mask[i, : len(fan)] = 1.0
    return PlateTopology(
        skin_ids=skin_ids,
        centre=to_local(ids),
        fan_a=fan_a,
        fan_b=fan_b,
        fan_mask=mask,
        ref=to_local(np.stack(refs)[:, 1:]),
    )


def angle_weighted_normals(
    centre: torch.Tensor, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Angle-weighted unit normals at fan centres.

    Args:
        centre: (..., N, 3) the vertices.
        a, b: (..., N, M, 3) the other two corners of each face around the vertex, in winding
            order (centre, a, b).
        mask: (N, M) weights of the faces (1 real, 0 padding); default all ones.

    Returns:
        (..., N, 3) unit normals Σ αᵢ nᵢ / ‖Σ αᵢ nᵢ‖.
    """
    e1 = a - centre[..., None, :]
    e2 = b - centre[..., None, :]
    c = torch.linalg.cross(e1, e2)
    sin_len = torch.linalg.vector_norm(c, dim=-1)
    angle = torch.atan2(sin_len, (e1 * e2).sum(-1))
    w = angle / sin_len.clamp_min(1e-20)  # α / ‖c‖ turns c into α n
    if mask is not None:
        w = w * mask
    n = (w[..., None] * c).sum(-2)
    return n / torch.linalg.vector_norm(n, dim=-1, keepdim=True).clamp_min(1e-20)


def frames_from_normal(normal: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Rotation (..., 3, 3) with columns x = normal, z = normalise(x × r), y = z × x.

    ``normal`` (..., 3) is unit length; ``reference`` (..., 3) is the in-plane reference vector r.
    """
    z = torch.linalg.cross(normal, reference)
    z = z / torch.linalg.vector_norm(z, dim=-1, keepdim=True).clamp_min(1e-20)
    y = torch.linalg.cross(z, normal)
    return torch.stack([normal, y, z], dim=-1)


def plate_frames(
    skinned: torch.Tensor, topology: PlateTopology, standoff: float = PLATE_STANDOFF
) -> tuple[torch.Tensor, torch.Tensor]:
    """Plate poses from skinned vertices.

    Args:
        skinned: (..., K, 3) positions of ``topology.skin_ids`` (metres, world frame).
        topology: from :func:`plate_topology`.
        standoff: plate distance from the skin along the normal (m).

    Returns:
        pos (..., N, 3) plate origins and rot (..., N, 3, 3) world-from-plate rotations.
    """
    # The maths of angle_weighted_normals and frames_from_normal, laid out components-first
    # (3, ..., frames) so every step is a long contiguous vector operation.
    batch, k = skinned.shape[:-2], skinned.shape[-2]
    x = skinned.reshape(-1, k, 3).permute(2, 1, 0).contiguous()  # (3, K, B)
    dev = skinned.device
    centre = x[:, torch.as_tensor(topology.centre, device=dev)]  # (3, N, B)
    e1 = x[:, torch.as_tensor(topology.fan_a, device=dev)] - centre[:, :, None]  # (3, N, M, B)
    e2 = x[:, torch.as_tensor(topology.fan_b, device=dev)] - centre[:, :, None]
    c = _cross0(e1, e2)
    sin_len = torch.sqrt((c * c).sum(0))
    angle = torch.atan2(sin_len, (e1 * e2).sum(0))
    mask = torch.as_tensor(topology.fan_mask, dtype=x.dtype, device=dev)[..., None]
    normal = _unit0((c * (angle / sin_len.clamp_min(1e-20) * mask)).sum(2))  # (3, N, B)
    ref = torch.as_tensor(topology.ref, device=dev)
    r = (x[:, ref[:, 0]] + x[:, ref[:, 1]] - 2.0 * centre) / 3.0
    z = _unit0(_cross0(normal, r))
    y = _cross0(z, normal)
    pos = (centre + standoff * normal).permute(2, 1, 0)
    rot = torch.stack([normal, y, z], dim=1).permute(3, 2, 0, 1)  # (B, N, row, column)
    n = centre.shape[1]
    return pos.reshape(*batch, n, 3), rot.reshape(*batch, n, 3, 3)


def _cross0(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Cross product over axis 0."""
    return torch.stack(
        [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]
    )


def _unit0(u: torch.Tensor) -> torch.Tensor:
    """Normalise over axis 0."""
    return u / torch.sqrt((u * u).sum(0)).clamp_min(1e-20)
