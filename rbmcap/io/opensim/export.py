"""An SMPL motion for OpenSim: virtual markers (``markers.trc``), its coordinates
(``coordinates.mot``) and, given a model, OpenSim's inverse kinematics (``ik.mot``), on the model
as it is or, given the subject's static trial, on the model scaled to the subject
(``scaled.osim``, from the static's virtual markers ``static_markers.trc``,
:mod:`rbmcap.io.opensim.scale`).

Virtual markers are vertices of the posed mesh of the motion's body (at its betas), one per
marker of an :class:`~rbmcap.io.opensim.markers.OpenSimMarkerMap` (the mean of the virtual
markers it names), written under OpenSim's marker names in millimetres, Y up.

``coordinates.mot`` holds the SMPL motion itself, with no OpenSim model: ``pelvis_tx/ty/tz``
(the pelvis joint in OpenSim's Y-up world, m) and, per SMPL joint, ``<joint>_x/_y/_z``: its local
rotation as intrinsic XYZ Euler angles (degrees); the pelvis's is its world orientation in the
Y-up world (SMPL's body frame: x left, y up, z forward).

:func:`export_opensim` is all or nothing: the files are written atomically and, when a later
step fails (inverse kinematics), the ones this call wrote are removed again.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.body import load_body_model
from rbmcap.errors import DataError
from rbmcap.io.opensim.files import Z_UP_TO_Y_UP, write_mot, write_trc, zup_to_yup
from rbmcap.io.opensim.ik import run_inverse_kinematics  # imports OpenSim only when it runs
from rbmcap.io.opensim.markers import OpenSimMarkerMap, load_marker_map
from rbmcap.io.opensim.scale import scale_model
from rbmcap.markers.markerset import load_marker_set
from rbmcap.motion.smpl_motion import read_motion
from rbmcap.skeleton import SMPL_JOINT_NAMES

FILES = {
    "markers": "markers.trc",
    "coordinates": "coordinates.mot",
    "static_markers": "static_markers.trc",
    "scaled_model": "scaled.osim",
    "ik": "ik.mot",
}
"""The files :func:`export_opensim` writes into its folder (``ik`` only with a model, the static's
markers and the scaled model only with a model and a static)."""


def opensim_markers(motion, body, marker_map: OpenSimMarkerMap) -> np.ndarray:
    """(T, M, 3) float64 m, OpenSim's Y-up world: the map's markers on the posed mesh of
    ``motion`` on ``body`` at the motion's betas."""
    markers = load_marker_set(marker_map.marker_set)
    ids = markers.resolve(body)
    groups = [[markers.index(v) for v in m.virtual] for m in marker_map.markers]
    used = sorted({i for g in groups for i in g})
    body = body.with_joint_offsets(motion.joint_offsets)
    with torch.no_grad():
        verts, _ = body.skin_vertices_and_joints(
            torch.as_tensor(ids[used]),
            roma.rotvec_to_rotmat(torch.as_tensor(motion.poses, dtype=torch.float32)),
            torch.as_tensor(np.asarray(motion.betas[: body.num_betas]), dtype=torch.float32),
            torch.as_tensor(motion.trans, dtype=torch.float32),
        )
    verts = verts.double().numpy()
    column = {i: k for k, i in enumerate(used)}
    placed = np.stack([verts[:, [column[i] for i in g]].mean(axis=1) for g in groups], axis=1)
    return zup_to_yup(placed)


def smpl_coordinates(motion, body) -> tuple[list[str], np.ndarray]:
    """Column names and values (T, 3 + 72) of ``coordinates.mot`` (module docstring)."""
    rot = roma.rotvec_to_rotmat(torch.as_tensor(motion.poses, dtype=torch.float64))
    rot[:, 0] = torch.as_tensor(Z_UP_TO_Y_UP) @ rot[:, 0]
    euler = roma.rotmat_to_euler("XYZ", rot, degrees=True).numpy()  # (T, 24, 3)
    body = body.with_joint_offsets(motion.joint_offsets)
    with torch.no_grad():
        betas = torch.as_tensor(np.asarray(motion.betas[: body.num_betas]), dtype=torch.float32)
        rest = body.rest_joints(betas).double().numpy()
    pelvis = zup_to_yup(motion.trans + rest[0])
    names = ["pelvis_tx", "pelvis_ty", "pelvis_tz"]
    names += [f"{j}_{a}" for j in SMPL_JOINT_NAMES for a in "xyz"]
    return names, np.concatenate([pelvis, euler.reshape(len(euler), -1)], axis=1)


def export_opensim(
    motion,
    body,
    out_dir: str | os.PathLike,
    *,
    model: str | os.PathLike | None = None,
    marker_map: str | OpenSimMarkerMap = "gait2392",
    static=None,
    mass: float | None = None,
) -> dict[str, object]:
    """Write ``markers.trc`` and ``coordinates.mot`` of ``motion`` into ``out_dir`` and, with an
    OpenSim ``model``, run inverse kinematics on the markers into ``ik.mot``
    (:func:`rbmcap.io.opensim.ik.run_inverse_kinematics`, needs the ``opensim`` extra). With the
    subject's ``static`` trial too (a motion on the same body), the model is first scaled to the
    subject from the static's virtual markers (:func:`rbmcap.io.opensim.scale.scale_model`,
    ``mass`` kg or the model's own) and IK runs on the scaled model.

    Returns:
        ``{"markers": path, "coordinates": path}`` plus, with a model, ``"ik"`` (path),
        ``"ik_frames"``, ``"marker_rms_mm"`` and ``"marker_max_mm"``; with a static,
        ``"static_markers"``, ``"scaled_model"`` (paths), ``"scale_factors"`` (body → x, y, z),
        ``"mass_kg"`` and ``"static_marker_rms_mm"`` (the static on the scaled model).
    """
    if motion.num_frames == 0:
        raise DataError(f"motion {motion.name!r}: no frames")
    if static is not None and model is None:
        raise DataError("a static trial scales a model: give the model to scale (--model)")
    if static is not None and static.num_frames == 0:
        raise DataError(f"static motion {static.name!r}: no frames")
    marker_map = load_marker_map(marker_map)
    out = Path(out_dir)
    positions = opensim_markers(motion, body, marker_map)
    names, values = smpl_coordinates(motion, body)
    written: dict[str, object] = {}
    try:
        written["markers"] = write_trc(
            out / FILES["markers"], marker_map.names, positions, float(motion.fps)
        )
        written["coordinates"] = write_mot(out / FILES["coordinates"], names, values, motion.fps)
        if static is not None:
            written["static_markers"] = write_trc(
                out / FILES["static_markers"],
                marker_map.names,
                opensim_markers(static, body, marker_map),
                float(static.fps),
            )
            written.update(_scaled(model, written["static_markers"], out, marker_map, mass))
            model = written["scaled_model"]
        if model is not None:
            written.update(_inverse_kinematics(model, written["markers"], out, marker_map))
    except BaseException:
        for key in FILES:
            if key in written:
                Path(written[key]).unlink(missing_ok=True)  # type: ignore[arg-type]
        raise
    return written


def _scaled(model, static: Path, out: Path, marker_map, mass) -> dict[str, object]:
    result = scale_model(
        model, static, out / FILES["scaled_model"], marker_map=marker_map, mass=mass
    )
    return {
        "scaled_model": result.model,
        "scale_factors": {b: [round(v, 4) for v in f] for b, f in result.factors.items()},
        "mass_kg": round(result.mass, 2),
        "static_marker_rms_mm": round(1000 * result.static_rms_m, 1),
    }


def _inverse_kinematics(model, markers: Path, out: Path, marker_map) -> dict[str, object]:
    result = run_inverse_kinematics(model, markers, out / FILES["ik"], marker_map=marker_map)
    return {
        "ik": result.mot,
        "ik_frames": result.frames,
        "marker_rms_mm": round(1000 * result.marker_rms_m, 1),
        "marker_max_mm": round(1000 * result.marker_max_m, 1),
    }


def export_opensim_file(
    motion_path,
    out,
    model=None,
    marker_map: str = "gait2392",
    body: str | None = None,
    static_path=None,
    mass: float | None = None,
) -> dict[str, object]:
    """:func:`export_opensim` of the motion file ``motion_path`` (and the static trial's motion
    file ``static_path``, if given) on ``body`` (a path; default: the stand-in of the motion's
    gender)."""
    motion = read_motion(motion_path)
    static = read_motion(static_path) if static_path is not None else None
    model_ = load_body_model(body or "standin", gender=motion.gender)
    return export_opensim(
        motion, model_, out, model=model, marker_map=marker_map, static=static, mass=mass
    )
