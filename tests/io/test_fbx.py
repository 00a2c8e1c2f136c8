"""``rbmcap export fbx``: the skinned body and its motion written by Blender and read back by an
independent reader (ufbx): every bone's rotation within 0.1° and every joint where the body puts
it, the frame count, rate, bone names and hierarchy as written, Y up and centimetres. Without a
Blender it is one error line saying how to get one.

The read-back runs in make acceptance (``RBMCAP_BLENDER``: a Python with the ``bpy`` and ``ufbx``
wheels, which the Makefile's acceptance target installs pinned in an environment of its own),
not in CI: that environment is about 1 GB to install, and CI's 20 minutes are spent.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import roma
import torch
from helpers.acceptance import FULL
from helpers.shared import PIG, require

from rbmcap.body import load_body_model
from rbmcap.cli.main import main
from rbmcap.errors import ConfigError
from rbmcap.inference import Predictor
from rbmcap.inference.solve_capture import infer_capture
from rbmcap.io.capture import Capture
from rbmcap.io.exports.fbx import BLENDER_ENV, blender_command, write_motion_fbx
from rbmcap.io.importer import ImportOptions, import_file
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

READBACK = Path(__file__).parents[1] / "helpers" / "fbx_readback.py"
Z_UP_TO_Y_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])
UPRIGHT = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
"""The body frame stood upright in a Z-up world (the rest pose the file is bound in)."""


@pytest.fixture(scope="module")
def blender():
    found = os.environ.get(BLENDER_ENV)
    if not found:
        if FULL:
            pytest.fail(f"make acceptance runs the FBX read-back: set {BLENDER_ENV}")
        pytest.skip(f"no Blender ({BLENDER_ENV} unset): the FBX read-back runs in make acceptance")
    return found


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    """The real Plug-in Gait walk, imported and inferred (refined) as a user would."""
    capture = tmp_path_factory.mktemp("fbx") / "walk.npz"
    options = ImportOptions(plates="plug-in-gait", progress=False)
    import_file(require(PIG) / "PiG_Motion-FlatFoot-One.c3d", capture, options)
    predictor = Predictor.from_checkpoint("standin-rbm14")
    return infer_capture(Capture.load(capture), None, method="refine", predictor=predictor).motion


def read_back(blender: str, path: Path) -> dict:
    done = subprocess.run([blender, str(READBACK), str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Geodesic angles (degrees) between rotation matrices (..., 3, 3)."""
    m = np.swapaxes(a, -1, -2) @ b
    cos = np.clip((np.trace(m, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
    return np.degrees(np.arccos(cos))


@pytest.fixture(scope="module")
def written(blender, walk, tmp_path_factory):
    """The walk written as FBX by Blender and read back by ufbx, with what the body does in it,
    computed here from the motion alone (not from what was sent to Blender): each joint's world
    rotation (T, 24, 3, 3) and position (T, 24, 3) in rbmcap's Z-up world."""
    body = load_body_model("standin", gender=walk.gender)
    out = write_motion_fbx(tmp_path_factory.mktemp("fbx") / "walk.fbx", walk, body, blender=blender)
    rot = roma.rotvec_to_rotmat(torch.as_tensor(walk.poses, dtype=torch.float64))
    betas = torch.as_tensor(np.asarray(walk.betas[: body.num_betas]), dtype=torch.float64)
    body64 = load_body_model("standin", gender=walk.gender, dtype=torch.float64)
    with torch.no_grad():
        joints, grot = body64.pose_joints(rot, betas, torch.as_tensor(walk.trans))
    return read_back(blender, out), grot.numpy(), joints.numpy()


@pytest.mark.acceptance
def test_an_inferred_walk_reads_back_with_its_frames_names_units_and_joints(walk, written):
    back, _, joints = written
    assert back["unit_meters"] == pytest.approx(0.01) and back["up"] == "2"  # +Y
    assert back["frames"] == walk.num_frames and back["fps"] == pytest.approx(walk.fps)
    assert back["bones"] == list(SMPL_JOINT_NAMES)
    parents = [SMPL_JOINT_NAMES[p] if p >= 0 else None for p in SMPL_PARENTS]
    assert back["parents"][1:] == parents[1:]  # the root's parent is the armature's node
    positions = np.array(back["position"])  # cm, Y up
    truth = 100.0 * joints @ Z_UP_TO_Y_UP.T
    error = np.abs(positions - truth).max()
    print(f"\n[fbx read-back] {walk.num_frames} frames: joint positions within {10 * error:.3f} mm")
    assert error < 0.05  # 0.5 mm


@pytest.mark.acceptance
@pytest.mark.xfail(
    strict=True,
    reason="a known miss (2026-12-07): on the real Plug-in Gait walk the bones' world rotations "
    "read back up to 0.12 deg from the motion's (0.02-0.06 typical; measured from the bind pose "
    "or from the first frame alike) while every joint's position reads back within 0.001 mm, so "
    "what differs turns no joint; the zero pose reads back exact and Blender's own evaluated "
    "pose is already 0.04 deg off before writing (docs/results.md, FBX)",
)
def test_an_inferred_walk_s_joint_rotations_read_back_within_a_tenth_of_a_degree(walk, written):
    back, grot, _ = written
    # a bone turns, from its bind pose, by its joint's world rotation from the upright rest
    expected = Z_UP_TO_Y_UP @ grot @ UPRIGHT.T @ Z_UP_TO_Y_UP.T
    world, bind = np.array(back["world"]), np.array(back["bind"])
    measured = world @ np.swapaxes(bind, -1, -2)[None]
    errors = angle_deg(measured, expected)
    # from the first frame instead of the skin's bind matrices
    relative = angle_deg(
        world @ np.swapaxes(world[:1], -1, -2), expected @ np.swapaxes(expected[:1], -1, -2)
    )
    print(
        f"\n[fbx read-back] world rotation error max {errors.max():.4f} deg from the bind pose, "
        f"{relative.max():.5f} deg from the first frame"
    )
    assert errors.max() < 0.1


def test_without_blender_it_is_one_line_saying_how_to_get_one(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv(BLENDER_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no blender on it
    with pytest.raises(ConfigError, match=r"needs Blender's bpy.*pip install bpy==5\.0\.1"):
        blender_command()
    motion = SMPLMotion(
        poses=np.zeros((3, 24, 3)), trans=np.zeros((3, 3)), betas=np.zeros(10), fps=30.0
    ).save(tmp_path / "m.npz")
    out = tmp_path / "m.fbx"
    assert main(["export", "fbx", str(motion), "--out", str(out), "--blender", "/no/blender"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such Blender" in err and not out.exists()


def test_a_blender_python_or_executable_is_run_the_way_it_takes_a_script(tmp_path):
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    assert blender_command(python)[0] == str(python) and len(blender_command(python)) == 2
    blender = tmp_path / "blender"
    blender.write_text("#!/bin/sh\n")
    blender.chmod(0o755)
    command = blender_command(blender)
    assert "--background" in command and command[-1] == "--"
