"""A subject's landmarks from a static trial: carried by the bones, they build the frames."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch

from rbmcap.biomech.angles import clinical_angles
from rbmcap.biomech.frames import LANDMARKS, anatomical_frames
from rbmcap.biomech.landmarks import landmarks_from_static, load_landmark_map
from rbmcap.body import load_body_model
from rbmcap.errors import DataError
from rbmcap.markers.markerset import load_marker_set
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES

FACING_X = np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]])
BETAS = np.array([1.0, -0.5, 0.3, 0, 0, 0, 0, 0, 0, 0])
NO_LATERAL = (
    {  # every landmark but the lateral knee and ankle markers, under its own name
        n: n for n in ("LASI", "RASI", "LPSI", "RPSI", "C7", "T10", "CLAV", "STRN")
    }
    | {n: n for n in ("LHEE", "RHEE", "LTOE", "RTOE")}
    | {j: j for j in SMPL_JOINT_NAMES if j.split("_")[-1] in ("hip", "knee", "ankle")}
)


@pytest.fixture(scope="module")
def body():
    return load_body_model("standin", gender="neutral")


def _static(body, joint_rotations=None):
    """One standing frame facing +X (``joint_rotations``: local 3×3 per joint name) and the
    world positions of the frames' markers and joints on that posed body."""
    rot = np.tile(np.eye(3), (1, 24, 1, 1))
    rot[0, 0] = FACING_X
    for name, r in (joint_rotations or {}).items():
        rot[0, SMPL_JOINT_NAMES.index(name)] = r
    poses = roma.rotmat_to_rotvec(torch.as_tensor(rot)).numpy()
    motion = SMPLMotion(poses=poses, trans=np.array([[0.3, -0.2, 0.95]]), betas=BETAS, fps=1.0)
    out = body(
        torch.as_tensor(poses, dtype=torch.float32),
        betas=torch.as_tensor(BETAS[None], dtype=torch.float32),
        trans=torch.as_tensor(motion.trans, dtype=torch.float32),
    )
    markers = load_marker_set(LANDMARKS)
    verts = out.vertices[0, markers.resolve(body)].double().numpy()
    names = [*markers.names, *SMPL_JOINT_NAMES]
    points = np.concatenate([verts, out.joints[0].double().numpy()])[None]
    return motion, names, points


def test_the_bodys_own_points_in_any_static_pose_give_the_bodys_own_frames(body):
    # feet flat on the floor (their frames are level when standing), the rest anyhow
    bent = {
        "left_elbow": roma.euler_to_rotmat("y", [0.8]).numpy()[0],
        "right_shoulder": roma.euler_to_rotmat("z", [0.5]).numpy()[0],
        "spine2": roma.euler_to_rotmat("x", [0.2]).numpy()[0],
    }
    motion, names, points = _static(body, bent)
    landmarks = landmarks_from_static(body, motion, names, points, landmark_map=NO_LATERAL)
    own = anatomical_frames(body, BETAS)
    theirs = anatomical_frames(body, BETAS, landmarks)
    # the mesh's markers bend with the skin (linear blend skinning), the joints do not
    np.testing.assert_allclose(theirs.rest, own.rest, atol=0.02)
    for rigid in ("left_femur", "left_tibia", "left_humerus", "left_radius", "right_foot"):
        k = own.names.index(rigid)  # from joint centres (and the level floor) only
        np.testing.assert_allclose(theirs.rest[k], own.rest[k], atol=1e-5)


def test_a_subjects_higher_psis_tilts_the_pelvis_forward(body):
    motion, names, points = _static(body)
    higher = points.copy()
    for name in ("LPSI", "RPSI"):
        higher[0, names.index(name), 2] += 0.02  # 2 cm up: the pelvis tilts forward
    walk = motion
    plain = landmarks_from_static(body, motion, names, points, landmark_map=NO_LATERAL)
    tilted = landmarks_from_static(body, motion, names, higher, landmark_map=NO_LATERAL)
    a = clinical_angles(walk, body, progression=np.array([1.0, 0, 0]), landmarks=plain)
    b = clinical_angles(walk, body, progression=np.array([1.0, 0, 0]), landmarks=tilted)

    def forward(pts):  # mid-PSIS -> mid-ASIS in the sagittal plane (X forward, Z up)
        asis = pts[0, names.index("LASI")] + pts[0, names.index("RASI")]
        psis = pts[0, names.index("LPSI")] + pts[0, names.index("RPSI")]
        v = (asis - psis) / 2
        return np.arctan2(v[2], v[0])

    expected = np.degrees(forward(points) - forward(higher))
    tilt_change = b.angles["LPelvisAngles"][0, 0] - a.angles["LPelvisAngles"][0, 0]
    assert tilt_change == pytest.approx(expected, abs=0.3)
    hip_change = b.angles["LHipAngles"][0, 0] - a.angles["LHipAngles"][0, 0]
    assert hip_change == pytest.approx(tilt_change, abs=0.3)  # the thigh did not move


def test_a_static_without_the_maps_points_is_one_clear_error(body):
    motion, _, points = _static(body)
    with pytest.raises(DataError, match="none of the landmark points"):
        landmarks_from_static(body, motion, ["X1", "X2"], points[:, :2])


def test_the_packaged_map_names_plug_in_gaits_joint_centres():
    mapping = load_landmark_map("plug-in-gait")
    assert mapping["left_hip"] == "LFEP" and mapping["right_knee"] == "RFEO"
    assert mapping["LASI"] == "LASI"
