"""Writing an inferred motion: AMASS-style ``.npz``, BVH, animated ``.glb`` and ``.ply`` meshes.

:func:`export_motion` writes any subset in one call and is all or nothing: every file is
written atomically, output names are checked before anything is written, and when a later
export fails the files this call already wrote are removed again.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rbmcap.atomic import atomic_path
from rbmcap.errors import ConfigError
from rbmcap.io.exports.bvh import write_motion_bvh
from rbmcap.io.exports.fbx import write_motion_fbx
from rbmcap.io.exports.gltf import write_motion_glb
from rbmcap.io.exports.meshes import write_ply_frames

SUFFIXES = {"npz": ".npz", "bvh": ".bvh", "glb": ".glb", "fbx": ".fbx"}


def _check_names(paths: dict[str, Path | None]) -> None:
    for kind, path in paths.items():
        if path is not None and path.suffix.lower() != SUFFIXES[kind]:
            raise ConfigError(f"{path}: a {kind} export must end in {SUFFIXES[kind]}")


def write_motion_npz(path: str | Path, motion) -> Path:
    """The motion's AMASS-style ``.npz`` (the bytes of :meth:`SMPLMotion.save`), written through
    :func:`~rbmcap.atomic.atomic_path` (a killed writer's temporary is removed by the next)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **motion.to_npz_dict())
    return Path(path)


def export_motion(
    motion,
    body,
    *,
    npz=None,
    bvh=None,
    glb=None,
    fbx=None,
    ply_dir=None,
    ply_every: int | None = None,
) -> dict[str, object]:
    """Write ``motion`` (an :class:`~rbmcap.motion.smpl_motion.SMPLMotion`) to the given paths.

    Args:
        motion: the motion (world Z up, metres).
        body: the body model for BVH offsets, the glTF mesh and PLY meshes (at the motion's
            betas).
        npz: AMASS-style ``.npz`` (:meth:`SMPLMotion.save`, what ``rbmcap motion info`` reads).
        bvh: BVH on the SMPL skeleton, Y up, centimetres (:mod:`rbmcap.io.exports.bvh`).
        glb: animated skinned binary glTF, Y up, metres (:mod:`rbmcap.io.exports.gltf`).
        fbx: the skinned body and motion as FBX, Y up, centimetres, written by Blender
            (:mod:`rbmcap.io.exports.fbx`: ``$RBMCAP_BLENDER`` or ``blender`` on PATH).
        ply_dir, ply_every: one ``.ply`` per ``ply_every``-th frame into ``ply_dir`` (Z up,
            metres; :mod:`rbmcap.io.exports.meshes`).

    Returns:
        ``{"npz": path, "bvh": path, "glb": path, "fbx": path, "ply": [paths]}`` for what was
        written.
    """
    named = (("npz", npz), ("bvh", bvh), ("glb", glb), ("fbx", fbx))
    paths = {k: Path(v) if v is not None else None for k, v in named}
    _check_names(paths)
    if (ply_dir is None) != (ply_every is None):
        raise ConfigError("PLY meshes need both a folder and a frame step (ply_every)")
    writers = {
        "npz": lambda p: write_motion_npz(p, motion),
        "bvh": lambda p: write_motion_bvh(p, motion, body),
        "glb": lambda p: write_motion_glb(p, motion, body),
        "fbx": lambda p: write_motion_fbx(p, motion, body),
    }
    written: dict[str, object] = {}
    try:
        for kind, path in paths.items():
            if path is not None:
                written[kind] = writers[kind](path)
        if ply_dir is not None:
            written["ply"] = write_ply_frames(motion, body, ply_dir, ply_every)
    except BaseException:
        for kind, path in written.items():
            for p in path if kind == "ply" else [path]:
                Path(p).unlink(missing_ok=True)
        raise
    return written
