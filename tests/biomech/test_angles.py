"""Clinical angles: poses built about SMPL's own joint axes (its canonical body frame: x to the
body's left, y up, z forward), not about the anatomical frames the angle code reads, come out as
posed, in absolute degrees, in both conventions and on both sides; Plug-in Gait's own segment
frames give Plug-in Gait's own angles to the 0.0001° the docs claim."""

from __future__ import annotations

from dataclasses import dataclass

import ezc3d
import numpy as np
import pytest
import roma
import torch
from helpers.shared import PIG, require

from rbmcap.biomech.angles import clinical_angles, joint_angles, progression_direction
from rbmcap.body import load_body_model
from rbmcap.errors import ConfigError
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

FACING_X = np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]])  # canonical Y up, Z forward -> Z up, +X
SHAPES = {"mean": np.zeros(10), "tall and broad": np.array([2.0, -1.5, 1.0, 0.5, 0, 0, 0, 0, 0, 0])}
CONVENTIONS = ("plug-in-gait", "isb")
NEUTRAL_DEG = 12.0
"""How far from its clinical value the stand-in reads, in absolute degrees: its pelvis and thorax
frames come from mesh vertices (9-11° of anterior pelvic tilt and -7° of thorax tilt standing
straight), its hip, knee and ankle centres are not in line (5-11° of flexion) and its elbows sit
3° behind its shoulders. An axis a quarter or half turn off, or a sign flipped on an angle posed
at 15° or more, falls well outside."""
CHANGE_DEG = 0.5
"""How closely the posed angle's change from standing follows the pose."""


def _turn(axis: str, degrees: float) -> np.ndarray:
    """(3, 3) right-handed rotation by ``degrees`` about the canonical ``axis`` (x, y or z)."""
    return roma.euler_to_rotmat(axis, [np.radians(degrees)]).numpy()


STANDING = {"left_shoulder": _turn("z", -90.0), "right_shoulder": _turn("z", 90.0)}
"""Standing, every angle's zero: the rest pose (a T-pose) with the arms lowered to the sides."""


def _motion(betas, turns: dict[str, np.ndarray], root: np.ndarray | None = None) -> SMPLMotion:
    """Two frames walking 1 m along +X: :data:`STANDING`, then standing with ``turns`` (3, 3):
    each joint's bone turned relative to its parent's about the canonical axes of the body (a
    joint's turn replaces its standing one), and the whole body turned by ``root``."""
    rotmats = np.tile(np.eye(3), (2, 24, 1, 1))
    for t, frame_turns in enumerate((STANDING, STANDING | turns)):
        above = np.tile(np.eye(3), (24, 1, 1))  # each bone's rotation in the canonical frame
        for j in range(1, 24):
            parent = above[SMPL_PARENTS[j]]
            turn = frame_turns.get(SMPL_JOINT_NAMES[j], np.eye(3))
            rotmats[t, j] = parent.T @ turn @ parent
            above[j] = turn @ parent
    rotmats[:, 0] = FACING_X
    rotmats[1, 0] = FACING_X @ (np.eye(3) if root is None else root)
    poses = roma.rotmat_to_rotvec(torch.as_tensor(rotmats)).numpy()
    trans = np.array([[0.0, 0, 0.9], [1.0, 0, 0.9]])
    return SMPLMotion(poses=poses, trans=trans, betas=betas, fps=1.0)


def _both(left: str, right: str, axis: str, left_deg: float, right_deg: float) -> dict:
    return {left: _turn(axis, left_deg), right: _turn(axis, right_deg)}


def _legs(joint: str, axis: str, left_deg: float, right_deg: float) -> dict:
    return _both(f"left_{joint}", f"right_{joint}", axis, left_deg, right_deg)


@dataclass(frozen=True)
class Pose:
    """A known pose and what it reads: ``reads`` ``[(set, component, left°, right°)]`` in both
    conventions, ``isb`` instead where the ISB's differ; ``additive``: whether the posed angle's
    change from standing is the pose (not for the arms' Y-X-Y angles, undefined hanging)."""

    turns: dict
    reads: list[tuple[str, int, float, float]]
    root: np.ndarray | None = None
    isb: list[tuple[str, int, float, float]] | None = None
    additive: bool = True


POSES = {
    # knee: flexion is the foot going back, about the body's left axis
    "knees flexed 60": Pose(_legs("knee", "x", 60, 60), [("KneeAngles", 0, 60, 60)]),
    # varus: the shank's foot end toward the midline (-x for the left leg)
    "knees in 15 of varus": Pose(_legs("knee", "z", -15, 15), [("KneeAngles", 1, 15, 15)]),
    "hips flexed 30": Pose(_legs("hip", "x", -30, -30), [("HipAngles", 0, 30, 30)]),
    "hips abducted 20": Pose(_legs("hip", "z", 20, -20), [("HipAngles", 1, -20, -20)]),
    # internal rotation: the knee's front turned toward the midline, about the vertical
    "hips turned in 20": Pose(_legs("hip", "y", -20, 20), [("HipAngles", 2, 20, 20)]),
    "ankles dorsiflexed 15": Pose(_legs("ankle", "x", -15, -15), [("AnkleAngles", 0, 15, 15)]),
    # inversion: the sole turned toward the midline, about the foot's long (forward) axis;
    # Plug-in Gait's second ankle angle is positive for eversion
    "ankles inverted 20": Pose(
        _legs("ankle", "z", -20, 20),
        [("AnkleAngles", 1, -20, -20)],
        isb=[("AnkleAngles", 1, 20, 20)],
    ),
    "feet turned in 20": Pose(
        _legs("ankle", "y", -20, 20),
        [("AnkleAngles", 2, 20, 20), ("FootProgressAngles", 2, 20, 20)],
    ),
    "pelvis tilted forward 15": Pose({}, [("PelvisAngles", 0, 15, 15)], root=_turn("x", 15)),
    "pelvis left side up 10": Pose({}, [("PelvisAngles", 1, 10, -10)], root=_turn("z", 10)),
    "pelvis left side forward 10": Pose({}, [("PelvisAngles", 2, 10, -10)], root=_turn("y", -10)),
    "trunk leaning forward 20": Pose({"spine1": _turn("x", 20)}, [("ThoraxAngles", 0, 20, 20)]),
    "trunk leaning right 15": Pose({"spine1": _turn("z", 15)}, [("ThoraxAngles", 1, 15, -15)]),
    "trunk turned right 15": Pose({"spine1": _turn("y", -15)}, [("ThoraxAngles", 2, 15, -15)]),
    # the forearm swung forward, about the body's right axis (the arm hanging)
    "elbows flexed 90": Pose(
        _both("left_elbow", "right_elbow", "x", -90, -90), [("ElbowAngles", 0, 90, 90)]
    ),
    "arms out to the sides (T-pose)": Pose(
        _both("left_shoulder", "right_shoulder", "z", 0, 0),
        [("ShoulderAngles", 0, 0, 0), ("ShoulderAngles", 1, 90, 90)],
        additive=False,
    ),
    "arms raised forward 90": Pose(
        {
            "left_shoulder": _turn("x", -90) @ STANDING["left_shoulder"],
            "right_shoulder": _turn("x", -90) @ STANDING["right_shoulder"],
        },
        [("ShoulderAngles", 0, 90, 90)],
        # Y-X-Y: forward flexion is elevation in the plane at 90°, with -90° of axial rotation
        isb=[("ShoulderAngles", k, d, d) for k, d in ((0, 90), (1, 90), (2, -90))],
        additive=False,
    ),
    # out to the sides, turned about the arm's long axis so that the front of the arm faces down
    "arms out, turned in 30": Pose(
        _both("left_shoulder", "right_shoulder", "x", 30, 30),
        [("ShoulderAngles", 2, 30, 30)],
        additive=False,
    ),
}
LEGS_AND_PELVIS = [n for n in POSES if n.split()[0] in ("knees", "hips", "ankles", "pelvis")]
CASES = [(pose, "mean") for pose in POSES] + [(pose, "tall and broad") for pose in LEGS_AND_PELVIS]


@pytest.fixture(scope="module")
def body():
    return load_body_model("standin", gender="neutral")


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("shape", SHAPES)
def test_standing_reads_about_zero_in_every_angle(body, shape, convention):
    table = clinical_angles(_motion(SHAPES[shape], {}), body, convention)
    assert len(table.angles) == 16
    for name, angles in table.angles.items():
        standing = angles[0].copy()
        if name.endswith("FootProgressAngles") and convention == "plug-in-gait":
            standing[0] += 90.0  # Plug-in Gait's pitch of a level foot: its Z runs along it
        if name.endswith("ShoulderAngles") and convention == "isb":
            # the arm hanging, Y-X-Y's plane of elevation and axial rotation are one rotation
            standing = np.array([0.0, standing[1], (standing[0] + standing[2] + 180) % 360 - 180])
        np.testing.assert_allclose(standing, 0.0, atol=NEUTRAL_DEG, err_msg=name)


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize(("pose", "shape"), CASES)
def test_a_known_pose_reads_its_angle_in_absolute_degrees_on_both_sides(
    body, pose, shape, convention
):
    known = POSES[pose]
    table = clinical_angles(_motion(SHAPES[shape], known.turns, known.root), body, convention)
    reads = known.isb if convention == "isb" and known.isb is not None else known.reads
    for name, k, left, right in reads:
        for side, expected in (("L", left), ("R", right)):
            standing, posed = table.angles[side + name][:, k]
            where = f"{side}{name}[{k}]: standing {standing:.1f}°, posed {posed:.1f}°"
            assert posed == pytest.approx(expected, abs=NEUTRAL_DEG), where
            if known.additive:
                assert posed - standing == pytest.approx(expected, abs=CHANGE_DEG), where


def test_an_unknown_convention_is_one_clear_error(body):
    with pytest.raises(ConfigError, match="expected one of plug-in-gait, isb"):
        clinical_angles(_motion(SHAPES["mean"], {}), body, "vicon")


def test_progression_follows_the_walk_and_snaps_to_the_lab_axes_for_plug_in_gait():
    pelvis = np.array([[0.0, 0, 1], [2.0, 0.6, 1]])
    facing = np.tile(np.eye(3), (2, 1, 1))
    np.testing.assert_allclose(progression_direction(pelvis, facing, True), [1, 0, 0])
    free = progression_direction(pelvis, facing, False)
    np.testing.assert_allclose(free, [2, 0.6, 0] / np.linalg.norm([2, 0.6, 0]))
    standing = progression_direction(pelvis * [0, 0, 1], facing, False)  # no travel: facing
    np.testing.assert_allclose(standing, [1, 0, 0])


def test_plug_in_gaits_segment_frames_give_plug_in_gaits_own_angles_to_a_ten_thousandth():
    c3d = ezc3d.c3d(str(require(PIG) / "PiG_Motion-FlatFoot-One.c3d"))
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
        assert (np.abs(theirs).sum(axis=1) > 0).all(), name  # every frame has the angle
        diff = (ours - theirs + 180) % 360 - 180
        assert np.abs(diff).max() < 1e-4, name


def _about(axis: np.ndarray, degrees: float) -> np.ndarray:
    """(3, 3) rotation by ``degrees`` about the unit ``axis`` (canonical frame)."""
    return roma.rotvec_to_rotmat(torch.as_tensor(np.radians(degrees) * axis)).numpy()


def test_a_knee_turning_about_its_measured_axis_reads_flexion_alone(body):
    """A knee hinged about an axis 17° off the body's own (as a subject's can be): read with that
    axis (a calibration's, :func:`functional_landmarks`) it is 60° of flexion and nothing else;
    with the body's own axis the same turn leaks into ab/adduction and rotation."""
    from rbmcap.biomech.frames import functional_landmarks

    joints = body(torch.zeros(1, 24, 3)).joints[0].double().numpy()
    thigh = joints[SMPL_JOINT_NAMES.index("left_hip")] - joints[SMPL_JOINT_NAMES.index("left_knee")]
    thigh /= np.linalg.norm(thigh)
    axis = np.array([1.0, 0.0, 0.3])  # left, turned forward; across the thigh as a knee's is
    axis -= thigh * (axis @ thigh)
    axis /= np.linalg.norm(axis)
    # knee flexion puts the foot behind: a positive turn about the left-pointing axis
    motion = _motion(SHAPES["mean"], {"left_knee": _about(axis, 60.0)})
    own = clinical_angles(motion, body, "plug-in-gait").angles["LKneeAngles"]
    landmarks = functional_landmarks({"left_knee": axis, "left_knee_child": axis})
    measured = clinical_angles(motion, body, "plug-in-gait", landmarks=landmarks)
    change = np.diff(measured.angles["LKneeAngles"], axis=0)[0]
    np.testing.assert_allclose(change, [60.0, 0.0, 0.0], atol=0.5)
    leak = np.abs(np.diff(own, axis=0)[0][1:])
    assert leak.max() > 5.0  # the body's axis reads crosstalk the measured one does not
    # the measured axis turned the other way round reads the same (axes are signless)
    flipped = functional_landmarks({"left_knee": -axis, "left_knee_child": -axis})
    again = clinical_angles(motion, body, "plug-in-gait", landmarks=flipped).angles["LKneeAngles"]
    np.testing.assert_allclose(again, measured.angles["LKneeAngles"], atol=1e-9)
