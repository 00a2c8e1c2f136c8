"""Mesh connectivity: vertex one-rings and vertex-face incidence, from a face array."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def vertex_adjacency(faces: np.ndarray, num_vertices: int) -> sp.csr_matrix:
    """Symmetric (V, V) boolean adjacency matrix of the mesh edges."""
    f = np.asarray(faces, dtype=np.int64)
    rows = np.concatenate([f[:, 0], f[:, 1], f[:, 2], f[:, 1], f[:, 2], f[:, 0]])
    cols = np.concatenate([f[:, 1], f[:, 2], f[:, 0], f[:, 0], f[:, 1], f[:, 2]])
    data = np.ones(rows.shape[0], dtype=bool)
    adj = sp.coo_matrix((data, (rows, cols)), shape=(num_vertices, num_vertices)).tocsr()
    adj.sum_duplicates()
    return adj


def one_rings(faces: np.ndarray, num_vertices: int) -> list[np.ndarray]:
    """Sorted neighbour ids of every vertex."""
    adj = vertex_adjacency(faces, num_vertices)
    return [adj.indices[adj.indptr[i] : adj.indptr[i + 1]].copy() for i in range(num_vertices)]


def vertex_faces(faces: np.ndarray, vertex_id: int) -> np.ndarray:
    """Indices of the faces that use ``vertex_id``."""
    return np.flatnonzero((np.asarray(faces) == vertex_id).any(axis=1))


def with_one_rings(vertex_ids, rings: list[np.ndarray]) -> np.ndarray:
    """The given vertices and all their one-ring neighbours, unique and sorted."""
    ids = np.asarray(vertex_ids, dtype=np.int64).reshape(-1)
    return np.unique(np.concatenate([ids, *[rings[i] for i in ids]]))
