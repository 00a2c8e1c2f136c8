"""FBX export through Blender: the skinned body (armature, mesh, skin weights, the motion, the
subject's shape) in the conventions DCC tools expect (Y up, centimetres, an upright T pose as the
bind pose).

Blender does the writing, as a separate process: its ``bpy`` (the PyPI wheel, which pins
``numpy<2``, or a Blender install) cannot share rbmcap's environment. rbmcap prepares the body and
the motion as arrays (:func:`fbx_payload`), Blender's Python runs
:mod:`rbmcap.io.exports.blender_fbx` on them, and the file reaches its name by ``os.replace`` (a
failed run leaves nothing). The Blender is, in this order: ``blender=`` (a ``blender`` executable
or a Python that imports ``bpy``), ``$RBMCAP_BLENDER``, ``blender`` on ``PATH``.

Conventions of the payload (Blender's Z-up world, metres, which its exporter turns into FBX's Y up
and centimetres): the rest pose is the body's zero pose stood upright (the body frame, x left,
y up, z forward, turned by ``UPRIGHT``: y to z); a joint's local rotation in the armature's axes
is ``UPRIGHT R_j UPRIGHTᵀ`` and the root's ``R_0 UPRIGHTᵀ`` (so the posed body is where rbmcap
puts it); the root bone's head moves by ``J_0 + t − UPRIGHT J_0``. The pose correctives of SMPL
are not in the file (FBX skinning is linear blend skinning alone).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.body import load_body_model
from rbmcap.errors import ConfigError, DataError
from rbmcap.motion.smpl_motion import read_motion
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

BLENDER_ENV = "RBMCAP_BLENDER"
"""Environment variable naming the Blender (an executable, or a Python with ``bpy``)."""

SCRIPT = Path(str(resources.files("rbmcap.io.exports") / "blender_fbx.py"))
"""Blender's side of the export, run by Blender's Python."""

UPRIGHT = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
"""The body frame (y up) to Blender's Z-up world: +90° about x."""

INSTALL_HINT = (
    "python3.11 -m venv ~/blender-env && ~/blender-env/bin/pip install bpy==5.0.1, then "
    "--blender ~/blender-env/bin/python (or RBMCAP_BLENDER=...), or install Blender"
)


def blender_command(blender: str | os.PathLike | None = None) -> list[str]:
    """The command that runs :data:`SCRIPT` with ``bpy``, arguments to follow.

    Raises:
        ConfigError: no Blender given, set or on ``PATH`` (the message says how to get one).
    """
    found = blender or os.environ.get(BLENDER_ENV) or shutil.which("blender")
    if not found:
        raise ConfigError(f"FBX export needs Blender's bpy, found none: {INSTALL_HINT}")
    found = os.path.expanduser(str(found))
    path = Path(found)
    if not (path.is_file() or shutil.which(found)):
        raise ConfigError(f"{found}: no such Blender (FBX export needs Blender's bpy)")
    if path.name.lower().startswith("blender"):
        return [found, "--background", "--factory-startup", "--python-exit-code", "1",
                "--python", str(SCRIPT), "--"]  # fmt: skip
    return [found, str(SCRIPT)]


def fbx_payload(motion, body) -> dict[str, np.ndarray]:
    """What Blender builds the file from (module docstring): the upright rest mesh, faces and
    skin weights on the 24 SMPL joints, the rest joints, each bone's tail offset, the local
    rotations (T, 24, 3, 3) and root offsets (T, 3) in Blender's axes, the rate, names and
    parents."""
    if motion.num_frames == 0:
        raise DataError(f"motion {motion.name!r}: no frames")
    body = body.with_joint_offsets(motion.joint_offsets)
    betas = torch.as_tensor(np.asarray(motion.betas[: body.num_betas]), dtype=torch.float32)
    with torch.no_grad():
        rest = body(torch.zeros(24, 3), betas)
    vertices = rest.vertices.double().numpy()
    joints = rest.joints.double().numpy()
    rot = roma.rotvec_to_rotmat(torch.as_tensor(motion.poses, dtype=torch.float64)).numpy()
    local = UPRIGHT @ rot @ UPRIGHT.T
    local[:, 0] = rot[:, 0] @ UPRIGHT.T
    offsets = joints[0] + np.asarray(motion.trans, dtype=np.float64) - UPRIGHT @ joints[0]
    return {
        "vertices": vertices @ UPRIGHT.T,
        "faces": body.faces.cpu().numpy().astype(np.int64),
        "weights": smpl_weights(body),
        "rest_joints": joints @ UPRIGHT.T,
        "tails": bone_tails(joints @ UPRIGHT.T),
        "rotations": local,
        "offsets": offsets,
        "fps": np.float64(motion.fps),
        "names": np.array(SMPL_JOINT_NAMES),
        "parents": np.array(SMPL_PARENTS),
    }


def smpl_weights(body) -> np.ndarray:
    """(V, 24) skinning weights on the SMPL joints: a model joint that is not one of them (an
    SMPL-H finger) gives its weight to its nearest SMPL ancestor."""
    weights = body.lbs_weights.detach().double().cpu().numpy()
    smpl = list(body._joint_map)
    owner = []
    for m in range(weights.shape[1]):
        k = m
        while k not in smpl:
            k = body.model_parents[k]
        owner.append(smpl.index(k))
    out = np.zeros((weights.shape[0], 24))
    np.add.at(out.T, owner, weights.T)
    return out


def bone_tails(joints: np.ndarray) -> np.ndarray:
    """(24, 3) each bone's tail offset from its head: towards the mean of its children, or, for
    a leaf, on along its parent's bone, half as long (at least 2 cm)."""
    children = {j: [c for c, p in enumerate(SMPL_PARENTS) if p == j] for j in range(24)}
    tails = np.zeros((24, 3))
    for j in range(24):
        if children[j]:
            tails[j] = joints[children[j]].mean(axis=0) - joints[j]
    for j in range(24):
        if not children[j]:
            along = joints[j] - joints[SMPL_PARENTS[j]]
            length = max(0.5 * np.linalg.norm(along), 0.02)
            tails[j] = along / max(np.linalg.norm(along), 1e-9) * length
    short = np.linalg.norm(tails, axis=1) < 0.02  # a bone's head and tail must differ
    tails[short] = [0.0, 0.0, 0.05]
    return tails


def write_motion_fbx(
    path: str | os.PathLike, motion, body, *, blender: str | None = None, timeout: float = 1800
) -> Path:
    """Write ``motion`` on ``body`` as an FBX file at ``path`` through Blender (module
    docstring).

    Raises:
        ConfigError: no Blender. DataError: Blender failed (its last line of output).
    """
    path = Path(path)
    command = blender_command(blender)
    payload = fbx_payload(motion, body)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{path.stem}.", dir=path.parent) as tmp:
        data, out = Path(tmp) / "payload.npz", Path(tmp) / "out.fbx"
        np.savez(data, **payload)
        try:
            run = subprocess.run(
                [*command, str(data), str(out)], capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            raise DataError(f"Blender did not write {path} within {timeout:g} s") from None
        if run.returncode != 0 or not out.is_file():
            lines = [ln for ln in (run.stderr + run.stdout).splitlines() if ln.strip()]
            why = lines[-1].strip() if lines else f"exit status {run.returncode}"
            raise DataError(f"Blender could not write {path}: {why[:300]}")
        os.replace(out, path)
    return path


def write_motion_fbx_file(
    motion_path, out, *, blender: str | None = None, body: str | None = None
) -> dict[str, object]:
    """:func:`write_motion_fbx` of the motion file ``motion_path`` on ``body`` (a path; default:
    the stand-in of the motion's gender): ``{"fbx": path, "frames": T, "fps": rate}``."""
    motion = read_motion(motion_path)
    model = load_body_model(body or "standin", gender=motion.gender)
    path = write_motion_fbx(out, motion, model, blender=blender)
    return {"fbx": path, "frames": motion.num_frames, "fps": float(motion.fps)}
