"""The part of a model's configuration that comes from the body and the marker set: the plates'
rest frames on the body, the body's joint model and the marker set's description
(:func:`regressor_config` completes a :class:`~rbmcap.model.regressor.RegressorConfig` with
them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rbmcap.body.joints import JointModel
from rbmcap.markers.synth import Synthesizer
from rbmcap.model.regressor import RegressorConfig
from rbmcap.skeleton import SMPL_JOINT_NAMES


def plate_rest_frames(body, markers) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each plate's rest position (N, 3) and rotation (N, 3, 3) on the body (canonical frame,
    zero pose and betas), and the change of its position per unit of each beta (N, 3, B)."""
    synth = Synthesizer(body, markers, "none")
    # One frame per beta (plus the zero body): a unit of beta j in frame j + 1. Plate positions
    # are linear in betas at rest up to the plate normal's tilt (well under a millimetre).
    nb = body.num_betas
    betas = torch.cat([torch.zeros(1, nb), torch.eye(nb)]).numpy()
    obs = [synth(torch.zeros(1, 24, 3).numpy(), betas=b) for b in betas]
    pos = torch.from_numpy(np.stack([o.pos[0] for o in obs]))
    shapedirs = (pos[1:] - pos[0]).permute(1, 2, 0).contiguous()
    return pos[0].clone(), torch.from_numpy(obs[0].rot[0].copy()), shapedirs


def marker_description(markers) -> dict[str, Any]:
    """Plain data about a marker set that a checkpoint needs (name, plate names, parents,
    carrying joints)."""
    joints = [
        SMPL_JOINT_NAMES.index(a.joint) if isinstance(a.joint, str) else int(a.joint)
        for a in markers.anchors
    ]
    return {
        "name": markers.name,
        "names": list(markers.names),
        "parents": list(markers.parents),
        "joints": joints,
    }


def body_and_marker_facts(body, markers) -> dict[str, Any]:
    """The fields of a :class:`~rbmcap.model.regressor.RegressorConfig` that come from ``body``
    (a :class:`~rbmcap.body.BodyModel`) and ``markers`` (a marker set), not from settings."""
    joints = JointModel.from_body(body)
    rest_pos, rest_rot, shapedirs = plate_rest_frames(body, markers)
    return {
        "markers": marker_description(markers),
        "plate_rest_rot": rest_rot,
        "plate_rest_pos": rest_pos,
        "plate_shapedirs": shapedirs,
        "joint_template": joints.joint_template,
        "joint_shapedirs": joints.joint_shapedirs,
        "body_id": body.identity,
        "num_betas": body.num_betas,
    }


def regressor_config(body, markers, **settings: Any) -> RegressorConfig:
    """The configuration of a model on ``body`` with ``markers``; ``settings`` are the other
    fields (``features``, ``rotations``, ``network``, ``plate_fit``, ``fps``)."""
    return RegressorConfig.from_dict({**settings, **body_and_marker_facts(body, markers)})
