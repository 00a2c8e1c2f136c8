"""Build the stand-in body and write it in the SMPL file format.

The build is deterministic and takes well under a second; ``load_body_model("standin")`` caches
the result under the user cache folder keyed by :data:`STANDIN_VERSION`.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np

from rbmcap.body.files import write_npz_atomic
from rbmcap.body.standin.parts import PARTS
from rbmcap.body.standin.rig import (
    joint_regressor,
    pose_blend_shapes,
    shape_blend_shapes,
    skinning_weights,
)
from rbmcap.body.standin.skeleton import REST_JOINTS
from rbmcap.body.standin.surface import mesh_surface
from rbmcap.skeleton import SMPL_PARENTS

STANDIN_VERSION = 1
GRID_SPACING = 0.0185
"""Marching-cubes cell size in metres; gives a vertex count close to SMPL's 6890."""

GENDER_BETAS = {
    "neutral": np.zeros(10),
    "male": np.array([0.6, 0.3, 0.3, 0.3, 0.8, -0.5, 0.2, 0.0, 0.0, 0.5]),
    "female": np.array([-0.7, -0.2, -0.1, -0.4, -0.8, 0.9, -0.2, 0.0, -0.2, -0.6]),
}
"""Male and female stand-ins are the neutral body moved along its shape directions."""


def vertex_normals(verts: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(V, 3) area-weighted unit vertex normals."""
    fn = np.cross(verts[faces[:, 1]] - verts[faces[:, 0]], verts[faces[:, 2]] - verts[faces[:, 0]])
    vn = np.zeros_like(verts)
    for k in range(3):
        np.add.at(vn, faces[:, k], fn)
    return vn / np.maximum(np.linalg.norm(vn, axis=1, keepdims=True), 1e-12)


def build_standin(gender: str = "neutral") -> dict[str, np.ndarray]:
    """Arrays of the stand-in body in SMPL's format (keys as in the official files)."""
    verts, faces = mesh_surface(PARTS, GRID_SPACING)
    normals = vertex_normals(verts, faces)
    weights = skinning_weights(PARTS, verts, faces)
    shapedirs = shape_blend_shapes(verts, normals, weights, REST_JOINTS)
    posedirs = pose_blend_shapes(normals, weights)
    v_template = verts + shapedirs @ GENDER_BETAS[gender]
    regressor = joint_regressor(verts, weights, REST_JOINTS)
    kintree = np.array([[2**32 - 1, *SMPL_PARENTS[1:]], list(range(24))], dtype=np.uint32)
    return {
        "v_template": v_template,
        "f": faces.astype(np.uint32),
        "weights": weights,
        "J_regressor": regressor,
        "J": regressor @ v_template,
        "kintree_table": kintree,
        "shapedirs": shapedirs,
        "posedirs": posedirs,
        "standin_version": np.array(STANDIN_VERSION),
    }


def write_standin(out_dir: str | os.PathLike, genders=("neutral", "male", "female")) -> list[Path]:
    """Write ``SMPL_<GENDER>.npz`` (and a chumpy-free ``SMPL_<GENDER>.pkl``) into ``out_dir``.

    The ``.pkl`` lets ``smplx.create(out_dir, model_type="smpl")`` load the stand-in the way it
    loads the official files; it is written under numpy 2 and so needs numpy 2 to read. The
    ``.npz`` is the portable copy.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for gender in genders:
        arrays = build_standin(gender)
        npz = write_npz_atomic(out_dir / f"SMPL_{gender.upper()}.npz", arrays)
        pkl = out_dir / f"SMPL_{gender.upper()}.pkl"
        tmp = pkl.with_name(f".{pkl.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(arrays, fh, protocol=4)
        os.replace(tmp, pkl)
        written += [npz, pkl]
    return written
