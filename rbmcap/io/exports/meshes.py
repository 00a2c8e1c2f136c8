"""Posed meshes of an SMPL motion: vertices skinned in chunks, and ``.ply`` files per frame.

Vertices are in rbmcap's world frame (Z up, metres), as the motion's ``trans``; Blender imports
a ``.ply`` as written, so the body stands upright in its Z-up scene.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import torch
import trimesh

from rbmcap.atomic import atomic_path
from rbmcap.errors import ConfigError

CHUNK_FRAMES = 256
"""Frames skinned at once: ~20 MB of float32 vertices on SMPL's 6890, whatever the length."""


def iter_vertices(motion, body, frames=None, chunk: int = CHUNK_FRAMES) -> Iterator:
    """Posed vertices of ``frames`` (default all), ``chunk`` frames at a time.

    Yields:
        (frame indices (K,), vertices (K, V, 3) float32 metres, world Z up) per chunk.
    """
    frames = np.arange(motion.num_frames) if frames is None else np.asarray(frames, dtype=int)
    body = body.with_joint_offsets(motion.joint_offsets)
    betas = torch.as_tensor(motion.betas, dtype=torch.float32)
    for s in range(0, len(frames), chunk):
        idx = frames[s : s + chunk]
        with torch.no_grad():
            out = body(
                torch.as_tensor(motion.poses[idx], dtype=torch.float32),
                betas,
                torch.as_tensor(motion.trans[idx], dtype=torch.float32),
            )
        yield idx, out.vertices.cpu().numpy().astype(np.float32)


def motion_vertices(motion, body, chunk: int = CHUNK_FRAMES) -> np.ndarray:
    """(T, V, 3) float32 posed vertices (metres, world Z up), skinned ``chunk`` frames at a time
    so the working memory stays bounded (the result itself is T × V × 12 bytes)."""
    out = np.empty((motion.num_frames, body.num_vertices, 3), dtype=np.float32)
    for idx, verts in iter_vertices(motion, body, chunk=chunk):
        out[idx] = verts
    return out


def ply_frames(num_frames: int, every: int) -> np.ndarray:
    """The frames written by ``--ply-every every``: 0, every, 2·every, …"""
    if int(every) < 1:
        raise ConfigError(f"ply every={every}: expected a whole number of frames >= 1")
    return np.arange(0, num_frames, int(every))


def ply_path(folder: str | Path, stem: str, frame: int) -> Path:
    """Where frame ``frame``'s mesh goes: ``folder/stem_000123.ply``."""
    return Path(folder) / f"{stem}_{int(frame):06d}.ply"


def write_ply_frames(
    motion, body, folder: str | Path, every: int = 1, stem: str | None = None
) -> list[Path]:
    """Write one binary ``.ply`` per sampled frame (frames 0, every, 2·every, …) into ``folder``.

    All or nothing: every file is written to a temporary name first and renamed only once all
    are written. Returns the paths written, in frame order.
    """
    frames = ply_frames(motion.num_frames, every)
    stem = stem or motion.name or "frame"
    faces = body.faces.cpu().numpy()
    paths = []
    with ExitStack() as stack:
        for idx, verts in iter_vertices(motion, body, frames):
            for f, v in zip(idx, verts, strict=True):
                path = ply_path(folder, stem, f)
                tmp = stack.enter_context(atomic_path(path))
                trimesh.Trimesh(v, faces, process=False).export(tmp, file_type="ply")
                paths.append(path)
    return paths
