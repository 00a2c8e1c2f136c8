"""A subject's anatomical landmarks from a static trial, carried by the body's bones.

The anatomical calibration of clusters (Cappozzo et al. 1995, "CAST"): in a static trial with
skin markers (ASIS, PSIS, lateral knee and ankle, heel, toe …) and, where the lab's model gives
them, joint centres, each landmark is expressed in the frame of every SMPL bone that carries an
anatomical segment, from the body posed as the static (the static inferred from its plates, on
the calibrated body). Carried by those bones, the landmarks then build the segments' frames in
every frame of a take (:func:`rbmcap.biomech.frames.anatomical_frames`), so the frames are the
subject's own and no longer the body model's, while the plates still drive them. The world's up
at the static is carried the same way (``up``), so a flat foot is level on the lab's floor.

For each bone ``b`` and landmark ``p`` seen in the static frames ``t``:
``rest = J₀[b] + mean_t Gₜ[b]ᵀ (pₜ − Jₜ[b])``, with ``Gₜ``/``Jₜ`` the bones' world rotations and
positions in the static and ``J₀`` the rest joints of the same body.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from rbmcap.biomech.frames import SEGMENTS, Landmarks
from rbmcap.config.packaged import named_yaml
from rbmcap.config.safe_yaml import load_yaml_mapping
from rbmcap.errors import ConfigError, DataError
from rbmcap.skeleton import SMPL_JOINT_NAMES


def load_landmark_map(name_or_path: str | Path = "plug-in-gait") -> dict[str, str]:
    """``{landmark: capture point name}`` from a packaged map (``rbmcap/conf/landmarks``) or a
    YAML path."""
    path = named_yaml(name_or_path, "landmarks", "landmark map")
    points = load_yaml_mapping(path).get("points")
    if not isinstance(points, dict) or not points:
        raise ConfigError(f"{path}: expected 'points': a mapping of landmark -> point name")
    return {str(k): str(v) for k, v in points.items()}


def landmarks_from_static(
    body,
    static_motion,
    point_names: list[str],
    points: np.ndarray,
    point_valid: np.ndarray | None = None,
    landmark_map: str | Path | dict[str, str] = "plug-in-gait",
    segments: dict[str, str] | None = None,
) -> Landmarks:
    """The landmarks of a static trial: its labelled ``points`` (T, M, 3) m (``point_names``
    (M,), ``point_valid`` (T, M)) carried into the bones of ``body`` posed as ``static_motion``
    (the same T frames), for each segment of ``segments`` (``{segment: SMPL joint}``, default
    :data:`rbmcap.biomech.frames.SEGMENTS`).

    Raises:
        DataError: the static and its motion differ in frames, or the static has none of the
            map's points.
    """
    mapping = landmark_map if isinstance(landmark_map, dict) else load_landmark_map(landmark_map)
    points = np.asarray(points, dtype=np.float64)
    valid = np.ones(points.shape[:2], bool) if point_valid is None else np.asarray(point_valid)
    if len(points) != static_motion.num_frames:
        raise DataError(
            f"the static has {len(points)} frames and its motion {static_motion.num_frames}"
        )
    found = {n: point_names.index(p) for n, p in mapping.items() if p in point_names}
    found = {n: k for n, k in found.items() if valid[:, k].any()}
    if not found:
        raise DataError(
            f"the static has none of the landmark points ({', '.join(sorted(mapping.values()))})"
        )
    rotations, joints, rest = _posed_bones(body, static_motion)
    out = {}
    for segment, joint in (segments or SEGMENTS).items():
        b = SMPL_JOINT_NAMES.index(joint)
        local = {
            name: (np.swapaxes(rotations[:, b], -1, -2) @ (points[:, k] - joints[:, b])[..., None])[
                valid[:, k], :, 0
            ].mean(axis=0)
            for name, k in found.items()
        }
        up = rotations[:, b, 2, :].mean(axis=0)  # world Z in the bone's coordinates
        out[segment] = {n: rest[b] + v for n, v in local.items()} | {"up": up / np.linalg.norm(up)}
    return Landmarks(out, static_motion.name)


def _posed_bones(body, motion) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """World-from-bone rotations (T, 24, 3, 3), joint positions (T, 24, 3) and rest joints
    (24, 3) of ``motion`` on ``body``, float64."""
    body = body.with_joint_offsets(motion.joint_offsets)
    betas = torch.as_tensor(np.asarray(motion.betas), dtype=torch.float32)
    joints, rotations = body.pose_joints(
        torch.as_tensor(np.asarray(motion.poses), dtype=torch.float32),
        betas=betas,
        trans=torch.as_tensor(np.asarray(motion.trans), dtype=torch.float32),
    )
    rest = body.rest_joints(betas)
    return (
        rotations.double().numpy(),
        joints.double().numpy(),
        rest.double().numpy().reshape(24, 3),
    )
