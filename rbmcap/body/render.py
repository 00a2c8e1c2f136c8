"""Shaded mesh pictures with matplotlib (no OpenGL needed): a painter's-algorithm renderer.

Faces are projected orthographically, sorted back to front and filled with a Lambert shade of
their normal, which is enough to judge a body's shape and pose on a headless machine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

VIEWS = {
    # name: (view direction toward the camera, screen-up), in the mesh's frame
    "front": (np.array([0.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0])),
    "side": (np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])),
    "three_quarter": (np.array([0.6, 0.25, 0.76]), np.array([0.0, 1.0, 0.0])),
    "front_zup": (np.array([0.0, -1.0, 0.0]), np.array([0.0, 0.0, 1.0])),
    "three_quarter_zup": (np.array([0.6, -0.76, 0.25]), np.array([0.0, 0.0, 1.0])),
}


def _camera(view: str):
    toward, up = VIEWS[view]
    toward = toward / np.linalg.norm(toward)
    right = np.cross(up, toward)
    right /= np.linalg.norm(right)
    up = np.cross(toward, right)
    return right, up, toward


def draw_mesh(ax, vertices: np.ndarray, faces: np.ndarray, view: str = "front", color=None):
    """Draw one mesh on a 2D matplotlib axis. ``vertices`` (V,3) metres, ``faces`` (F,3)."""
    from matplotlib.collections import PolyCollection

    right, up, toward = _camera(view)
    v = np.asarray(vertices, dtype=np.float64)
    tri = v[np.asarray(faces)]
    normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-12)
    facing = normals @ toward > 0
    light = np.array([0.35, 0.5, 0.8]) @ np.stack([right, up, toward])
    light /= np.linalg.norm(light)
    shade = 0.25 + 0.75 * np.clip(normals @ light, 0.0, 1.0)
    depth = tri.mean(axis=1) @ toward
    keep = np.flatnonzero(facing)
    order = keep[np.argsort(depth[keep])]
    screen = np.stack([tri @ right, tri @ up], axis=-1)[order]
    base = np.array(color if color is not None else (0.80, 0.62, 0.50))
    colors = np.clip(shade[order, None] * base[None], 0, 1)
    ax.add_collection(PolyCollection(screen, facecolors=colors, edgecolors=colors, linewidths=0.3))
    pts = v @ np.stack([right, up], axis=1)
    return pts.min(axis=0), pts.max(axis=0)


def render_meshes(
    meshes: Sequence[tuple[np.ndarray, np.ndarray]],
    out: str | os.PathLike,
    titles: Sequence[str] | None = None,
    views: Sequence[str] | None = None,
    size: float = 4.0,
) -> Path:
    """Render meshes side by side into a PNG; returns its path. Drawn on a figure of its own
    (no pyplot), so the caller's matplotlib backend and figures are left as they are."""
    from matplotlib.figure import Figure

    n = len(meshes)
    views = list(views or ["front"] * n)
    fig = Figure(figsize=(size * n, size * 1.25))
    axes = fig.subplots(1, n, squeeze=False)
    bounds = [draw_mesh(ax, v, f, views[i]) for i, ((v, f), ax) in enumerate(zip(meshes, axes[0]))]
    # one scale for every panel, so differences in size between the meshes stay visible
    half = max((hi - lo).max() for lo, hi in bounds) / 2 * 1.05
    for i, ax in enumerate(axes[0]):
        lo, hi = bounds[i]
        centre = (lo + hi) / 2
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)
        ax.set_aspect("equal")
        ax.axis("off")
        if titles:
            ax.set_title(titles[i])
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    return out
