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

from rbmcap.baseline.objective import predict_markers
from rbmcap.calibrate.functional import MIN_FRAMES
from rbmcap.markers.markerset import load_marker_set
from rbmcap.markers.synth import Synthesizer
from rbmcap.skeleton import SMPL_JOINT_NAMES

ALL_FROM_PRIOR = 6
"""A centre whose six directions all came from the body model: nothing to correct."""


def rest_plates(body, markers, betas) -> tuple[np.ndarray, np.ndarray]:
    """The virtual plates on ``body`` shaped by ``betas`` in the rest pose (the body's own
    canonical frame): positions (N, 3) m and rotations (N, 3, 3), float64 (``markers``: a marker
    set or its name)."""
    synth = Synthesizer(body, markers)
    dtype = body.v_template.dtype
    nb = body.num_betas
    with torch.no_grad():
        eye = torch.eye(3, dtype=dtype).expand(1, 24, 3, 3)
        shape = torch.as_tensor(np.asarray(betas)[:nb], dtype=dtype)[None]
        pos, rot = predict_markers(body, synth.topology, eye, shape, torch.zeros(1, 3, dtype=dtype))
    return pos[0].double().numpy(), rot[0].double().numpy()


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
    pos, rot = rest_plates(body.with_joint_offsets(np.zeros((24, 3))), marker_set, betas)
    phys_pos = pos + np.einsum("nab,nb->na", rot, offsets.position)
    phys_rot = rot @ offsets.rotation
    with torch.no_grad():
        nb = body.num_betas
        shape = torch.as_tensor(np.asarray(betas)[:nb], dtype=body.v_template.dtype)
        rest = body.with_joint_offsets(np.zeros((24, 3))).rest_joints(shape).double().numpy()
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
