"""Mesh connectivity: the edge adjacency and vertex one-rings, from a face array (trimesh)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import trimesh


def vertex_adjacency(faces: np.ndarray, num_vertices: int) -> sp.csr_matrix:
    """Symmetric (V, V) boolean adjacency matrix of the mesh edges."""
    edges = trimesh.geometry.faces_to_edges(np.asarray(faces, dtype=np.int64))
    directed = trimesh.graph.edges_to_coo(edges, count=num_vertices)
    adj = (directed + directed.T).tocsr()
    adj.sum_duplicates()
    return adj


def one_rings(faces: np.ndarray, num_vertices: int) -> list[np.ndarray]:
    """Sorted neighbour ids of every vertex."""
    adj = vertex_adjacency(faces, num_vertices)
    return [adj.indices[adj.indptr[i] : adj.indptr[i + 1]].copy() for i in range(num_vertices)]


def with_one_rings(vertex_ids, rings: list[np.ndarray]) -> np.ndarray:
    """The given vertices and all their one-ring neighbours, unique and sorted."""
    ids = np.asarray(vertex_ids, dtype=np.int64).reshape(-1)
    return np.unique(np.concatenate([ids, *[rings[i] for i in ids]]))
