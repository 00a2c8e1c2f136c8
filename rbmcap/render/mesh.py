"""Shaded body meshes on a 2-D panel: a painter's algorithm (faces culled, sorted, filled).

Faces turned away from the camera are dropped, the rest sorted far to near and filled with a
Lambert shade under a light above the camera's left shoulder: enough to read a body's shape and
pose on a headless machine, at about a tenth of a second per body of SMPL's size.
"""

from __future__ import annotations

import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.path import Path

from rbmcap.body.mesh_pictures import facing_faces
from rbmcap.render.camera import Camera

SKIN = np.array([0.86, 0.76, 0.68])
"""Base colour of the bodies: light, so the skeleton drawn over them stays readable."""
_LIGHT = np.array([-0.35, 0.55, 0.76])  # screen right, up, toward the eye


class MeshArtist:
    """A posed mesh with faces ``faces`` (F, 3) on ``ax``, updated frame by frame."""

    def __init__(self, ax, faces: np.ndarray, edges: float = 0.3) -> None:
        self.faces = np.asarray(faces)
        # One closed triangle path per face, made once over a shared buffer: each frame writes
        # the sorted triangles into the buffer (making 10^4 paths a frame costs more than
        # drawing them).
        self.buffer = np.zeros((len(self.faces), 4, 2))
        codes = np.array([Path.MOVETO, Path.LINETO, Path.LINETO, Path.CLOSEPOLY], Path.code_type)
        self.paths = [Path(xy, codes) for xy in self.buffer]
        self.polys = ax.add_collection(
            PathCollection([], linewidths=edges, antialiaseds=False, zorder=2)
        )

    def update(self, camera: Camera, vertices: np.ndarray, frame: int) -> None:
        """Show ``vertices`` (V, 3) m, world frame, as ``camera`` sees them in ``frame``."""
        tri = camera.project(vertices, frame)[self.faces]  # (F, 3, 3) screen x, y, depth
        order, lambert = facing_faces(tri, _LIGHT)
        shade = 0.35 + 0.65 * lambert
        colours = np.clip(shade[:, None] * SKIN, 0.0, 1.0)
        self.buffer[: len(order), :3] = tri[order, :, :2]
        self.buffer[: len(order), 3] = self.buffer[: len(order), 0]
        self.polys.set_paths(self.paths[: len(order)])
        self.polys.set_facecolor(colours)
        self.polys.set_edgecolor(colours)
