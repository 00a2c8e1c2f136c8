"""Clinical angles: known poses come out as posed, in both conventions and on both sides, and
Plug-in Gait's own segment frames give Plug-in Gait's own angles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import roma
import torch

from rbmcap.biomech.angles import clinical_angles, joint_angles, progression_direction
from rbmcap.biomech.frames import anatomical_frames
from rbmcap.body import load_body_model
from rbmcap.errors import ConfigError
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES

PIG = Path(__file__).resolve().parents[3] / "shared" / "data" / "pig"
FACING_X = np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]])  # canonical Y up, Z forward -> Z up, +X
SHAPES = {"mean": np.zeros(10), "tall and broad": np.array([2.0, -1.5, 1.0, 0.5, 0, 0, 0, 0, 0, 0])}


@pytest.fixture(scope="module")
def body():
    return load_body_model("standin", gender="neutral")


def _motion(betas, joint_rotations: dict[str, np.ndarray] | None = None, root=None):
    """Two frames walking 1 m along +X: the rest pose, then the rest pose with ``joint_rotations``
    (local, 3×3) applied and the root turned by ``root`` in the body's own frame."""
    poses = np.zeros((2, 24, 3))
    rotmats = np.tile(np.eye(3), (2, 24, 1, 1))
    rotmats[:, 0] = FACING_X
    rotmats[1, 0] = FACING_X @ (np.eye(3) if root is None else root)
    for name, r in (joint_rotations or {}).items():
        rotmats[1, SMPL_JOINT_NAMES.index(name)] = r
    poses[:] = roma.rotmat_to_rotvec(torch.as_tensor(rotmats)).numpy()
    trans = np.array([[0.0, 0, 0.9], [1.0, 0, 0.9]])
    return SMPLMotion(poses=poses, trans=trans, betas=betas, fps=1.0)


def _about(axis: str, degrees: float) -> np.ndarray:
    return roma.euler_to_rotmat(axis, [np.radians(degrees)]).numpy()


def _about_anatomical(body, betas, segment: str, axis: str, degrees: float) -> np.ndarray:
    """A rotation by ``degrees`` about one axis of ``segment``'s anatomical frame at rest, in
    the body's rest (canonical) coordinates."""
    frames = anatomical_frames(body, betas)
    a = frames.rest[frames.names.index(segment)]
    return a @ _about(axis, degrees) @ a.T


def _about_floating_axis(body, betas, side: str, degrees: float) -> np.ndarray:
    """A rotation of the hip by ``degrees`` about its floating axis at rest (the pelvis's X
    turned by the hip's rest flexion about the pelvis's Y), in rest coordinates."""
    frames = anatomical_frames(body, betas)
    pelvis = frames.rest[frames.names.index("pelvis")]
    femur = frames.rest[frames.names.index(f"{side}_femur")]
    flexion = roma.rotmat_to_euler("YXZ", torch.as_tensor(pelvis.T @ femur))[0].item()
    turn = _about("y", np.degrees(flexion))
    return pelvis @ turn @ _about("x", degrees) @ turn.T @ pelvis.T


def _change(table, name: str) -> np.ndarray:
    """Posed minus rest angles of one set."""
    a = table.angles[name]
    return a[1] - a[0]


@pytest.mark.parametrize("convention", ["plug-in-gait", "isb"])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_knee_bent_60_degrees_reads_60_of_flexion_and_nothing_else(body, shape, convention):
    betas = SHAPES[shape]
    bend = {  # about each femur's flexion axis (Y, to the left): the shank swings back
        f"{side}_knee": _about_anatomical(body, betas, f"{side}_femur", "y", 60.0)
        for side in ("left", "right")
    }
    table = clinical_angles(_motion(betas, bend), body, convention)
    for side in "LR":
        np.testing.assert_allclose(_change(table, f"{side}KneeAngles"), [60, 0, 0], atol=0.5)
        np.testing.assert_allclose(_change(table, f"{side}HipAngles"), [0, 0, 0], atol=1e-6)


@pytest.mark.parametrize("convention", ["plug-in-gait", "isb"])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_hip_abducted_20_degrees_reads_minus_20_of_adduction_on_either_side(
    body, shape, convention
):
    betas = SHAPES[shape]
    out = {  # about each hip's floating axis: each leg swung outward
        "left_hip": _about_floating_axis(body, betas, "left", 20.0),
        "right_hip": _about_floating_axis(body, betas, "right", -20.0),
    }
    motion = _motion(betas, out)
    table = clinical_angles(motion, body, convention)
    for side in "LR":
        np.testing.assert_allclose(_change(table, f"{side}HipAngles"), [0, -20, 0], atol=0.5)
        np.testing.assert_allclose(_change(table, f"{side}KneeAngles"), [0, 0, 0], atol=1e-6)


@pytest.mark.parametrize("convention", ["plug-in-gait", "isb"])
@pytest.mark.parametrize("shape", SHAPES)
def test_a_pelvis_tilted_10_degrees_forward_reads_10_of_anterior_tilt(body, shape, convention):
    betas = SHAPES[shape]
    tilt = _about("x", 10.0)  # about the lab's lateral axis: the top of the pelvis forward
    table = clinical_angles(_motion(betas, root=tilt), body, convention)
    for side in "LR":
        np.testing.assert_allclose(_change(table, f"{side}PelvisAngles"), [10, 0, 0], atol=0.5)
        np.testing.assert_allclose(_change(table, f"{side}HipAngles"), [0, 0, 0], atol=1e-6)


@pytest.mark.parametrize("convention", ["plug-in-gait", "isb"])
def test_a_leg_turned_inward_reads_internal_rotation_on_either_side(body, convention):
    betas = SHAPES["mean"]
    turn = {  # about each femur's long axis (Z): the left leg's front turns right and vice versa
        "left_hip": _about_anatomical(body, betas, "left_femur", "z", -15.0),
        "right_hip": _about_anatomical(body, betas, "right_femur", "z", 15.0),
    }
    table = clinical_angles(_motion(betas, turn), body, convention)
    for side in "LR":
        np.testing.assert_allclose(_change(table, f"{side}HipAngles"), [0, 0, 15], atol=0.5)


def test_the_pelvis_turned_toward_one_side_brings_that_side_forward(body):
    table = clinical_angles(_motion(SHAPES["mean"], root=_about("y", -10.0)), body)
    # turned to its right: the left side comes forward
    assert _change(table, "LPelvisAngles")[2] == pytest.approx(10.0, abs=0.5)
    assert _change(table, "RPelvisAngles")[2] == pytest.approx(-10.0, abs=0.5)


def test_an_unknown_convention_is_one_clear_error(body):
    with pytest.raises(ConfigError, match="expected one of plug-in-gait, isb"):
        clinical_angles(_motion(SHAPES["mean"]), body, "vicon")


def test_progression_follows_the_walk_and_snaps_to_the_lab_axes_for_plug_in_gait():
    pelvis = np.array([[0.0, 0, 1], [2.0, 0.6, 1]])
    facing = np.tile(np.eye(3), (2, 1, 1))
    np.testing.assert_allclose(progression_direction(pelvis, facing, True), [1, 0, 0])
    free = progression_direction(pelvis, facing, False)
    np.testing.assert_allclose(free, [2, 0.6, 0] / np.linalg.norm([2, 0.6, 0]))
    standing = progression_direction(pelvis * [0, 0, 1], facing, False)  # no travel: facing
    np.testing.assert_allclose(standing, [1, 0, 0])


@pytest.mark.skipif(not PIG.is_dir(), reason="shared/data/pig is absent")
def test_plug_in_gaits_segment_frames_give_plug_in_gaits_own_angles():
    ezc3d = pytest.importorskip("ezc3d")
    c3d = ezc3d.c3d(str(PIG / "PiG_Motion-FlatFoot-One.c3d"))
    labels = c3d["parameters"]["POINT"]["LABELS"]["value"]
    points = c3d["data"]["points"][:3].transpose(2, 1, 0)

    def point(name):
        return points[:, labels.index(name)]

    def frame(prefix):
        o = point(prefix + "O")
        cols = [point(prefix + k) - o for k in "ALP"]
        return np.stack([c / np.linalg.norm(c, axis=-1, keepdims=True) for c in cols], axis=-1)

    names = {"pelvis": "PEL", "thorax": "TRX"}
    for side in ("left", "right"):
        s = side[0].upper()
        for seg, code in (("femur", "FE"), ("tibia", "TI"), ("foot", "FO"), ("humerus", "HU")):
            names[f"{side}_{seg}"] = s + code
        names[f"{side}_radius"] = s + "RA"
    segments = {k: frame(v) for k, v in names.items()}
    direction = progression_direction(point("PELO") / 1000, segments["pelvis"], True)
    table = joint_angles(segments, "plug-in-gait", direction)
    assert len(table.angles) == 16
    for name, ours in table.angles.items():
        theirs = point(name)[:, : ours.shape[1]]
        seen = np.abs(point(name)).sum(axis=1) > 0
        diff = (ours[seen] - theirs[seen] + 180) % 360 - 180
        assert np.abs(diff).max() < 0.01, name


@pytest.mark.parametrize("convention", ["plug-in-gait", "isb"])
def test_a_foot_raised_15_degrees_reads_15_of_dorsiflexion_on_either_side(body, convention):
    betas = SHAPES["mean"]
    raise_toes = {  # about each tibia's flexion axis (Y, to the left): the toes come up
        f"{side}_ankle": _about_anatomical(body, betas, f"{side}_tibia", "y", -15.0)
        for side in ("left", "right")
    }
    table = clinical_angles(_motion(betas, raise_toes), body, convention)
    for side in "LR":
        np.testing.assert_allclose(_change(table, f"{side}AnkleAngles"), [15, 0, 0], atol=0.5)


@pytest.mark.parametrize("convention", ["plug-in-gait", "isb"])
def test_an_elbow_bent_90_degrees_reads_90_of_flexion_on_either_side(body, convention):
    betas = SHAPES["mean"]
    bend = {  # about each humerus's flexion axis (its Y): the forearm comes forward
        f"{side}_elbow": _about_anatomical(body, betas, f"{side}_humerus", "y", 90.0)
        for side in ("left", "right")
    }
    table = clinical_angles(_motion(betas, bend), body, convention)
    for side in "LR":
        assert _change(table, f"{side}ElbowAngles")[0] == pytest.approx(90.0, abs=0.5)
