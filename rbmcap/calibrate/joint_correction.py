"""A subject's joint correction: where the measured joint centres put the body's joints.

A body model's joint regressor places each joint from the shaped mesh; a subject's joint can sit
elsewhere (a knee centre 20 mm from SMPL's is common on real takes). The functional calibration
measures each bracketed joint's centre in its two plates' frames (:mod:`.functional`), and the
calibration knows where each physical plate sits on the body's rest pose (the virtual plate, at
the calibrated shape, carried by its offset). So each measured centre has a place in the rest
pose; its **correction** is how far that place is from the regressor's joint:

    c_A = p_A + R_A c_A^plate,   c_B = p_B + R_B c_B^plate     (the physical plates at rest)
    d_j = ½ (c_A + c_B) − J_j(betas)

in the body's rest frame. :meth:`rbmcap.body.BodyModel.with_joint_offsets` applies it: the body
then turns each limb about the measured centre (in the spirit of MoSh's per-subject
adjustments). A joint measured on fewer than :data:`~.functional.MIN_FRAMES` frames, or whose
centre took every direction from the body model (:attr:`FunctionalJoint.from_prior` = 6), keeps
the regressor's place: its correction is zero.
"""

from __future__ import annotations

import numpy as np
import torch

from rbmcap.calibrate.functional import MIN_FRAMES, rest_plates
from rbmcap.markers.markerset import load_marker_set
from rbmcap.skeleton import SMPL_JOINT_NAMES

ALL_FROM_PRIOR = 6
"""A centre whose six directions all came from the body model: nothing to correct."""


def joint_correction(joints, body, markers, betas, offsets) -> np.ndarray:
    """The correction of each SMPL joint (module docstring): (24, 3) m, rest frame.

    Args:
        joints: the measured joints (a calibration's ``joints.values()``).
        body: the body model (without offsets: the regressor's joints).
        markers: the marker set (or its name) whose plates the joints name.
        betas: (B,) the calibrated shape.
        offsets: the calibration's :class:`~rbmcap.calibrate.calibration.PlateOffsets` for the
            marker set's plates, in its order.
    """
    marker_set = load_marker_set(markers) if isinstance(markers, str) else markers
    names = list(marker_set.names)
    regressor = body.with_joint_offsets(np.zeros((24, 3)))  # the model's own joints
    pos, rot = rest_plates(regressor, marker_set, betas)
    phys_pos = pos + np.einsum("nab,nb->na", rot, offsets.position)
    phys_rot = rot @ offsets.rotation
    with torch.no_grad():
        shape = torch.as_tensor(np.asarray(betas)[: body.num_betas], dtype=body.v_template.dtype)
        rest = regressor.rest_joints(shape).double().numpy()
    out = np.zeros((24, 3))
    for j in joints:
        if j.frames < MIN_FRAMES or j.from_prior >= ALL_FROM_PRIOR:
            continue
        if j.parent not in names or j.child not in names:
            continue
        a, b = names.index(j.parent), names.index(j.child)
        ca, cb = j.estimates(phys_pos[a], phys_rot[a], phys_pos[b], phys_rot[b])
        k = SMPL_JOINT_NAMES.index(j.joint)
        out[k] = 0.5 * (ca + cb) - rest[k]
    return out
