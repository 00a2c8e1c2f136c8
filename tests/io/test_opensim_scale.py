"""OpenSim scaling through rbmcap's runner: a static trial of the generic Gait 2392 model scaled
by a known factor gives that factor back on every body and markers placed where the trial has
them; a static of a body through ``rbmcap export opensim --static`` fits the walk better than
the unscaled model; a static that lacks a measurement's marker is one clear error, nothing
written."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.shared import SHARED_DATA

from rbmcap.cli.main import main
from rbmcap.errors import DataError
from rbmcap.io.opensim.files import write_trc
from rbmcap.io.opensim.markers import load_marker_map
from rbmcap.io.opensim.scale import scale_model
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES

opensim = pytest.importorskip("opensim")

GENERIC = SHARED_DATA / "opensim" / "gait2392_thelen2003muscle.osim"
FACTOR = 1.12
"""The known scale of the subject the test makes from the generic model."""


@pytest.fixture(scope="module")
def generic():
    if not GENERIC.is_file():
        pytest.skip(f"{GENERIC} is absent")
    return GENERIC


def scaled_static(generic, path, factor=FACTOR, names=None, frames=4):
    """A static trial (.trc, ``frames`` frames) of the map's markers on the generic model scaled by
    ``factor`` on every body with OpenSim's own ``Model.scale`` (markers at the map's generic
    places, default pose): the truth the runner must recover."""
    from rbmcap.io.opensim.ik import add_missing_markers

    marker_map = load_marker_map()
    model = opensim.Model(str(generic))
    add_missing_markers(opensim, model, marker_map)
    scales = opensim.ScaleSet()
    bodies = model.getBodySet()
    for i in range(bodies.getSize()):
        scale = opensim.Scale()
        scale.setSegmentName(bodies.get(i).getName())
        scale.setScaleFactors(opensim.Vec3(factor, factor, factor))
        scale.setApply(True)
        scales.cloneAndAppend(scale)
    model.scale(model.initSystem(), scales, True, -1.0)
    state = model.initSystem()
    names = names or marker_map.names
    markers = model.getMarkerSet()
    at = np.array([markers.get(n).getLocationInGround(state).to_numpy() for n in names])
    return write_trc(path, names, np.repeat(at[None], frames, axis=0), 100.0)


def read_trc_positions(path):
    """Marker names and their first frame's positions (m, Y up) of a ``.trc`` OpenSim reads."""
    table = opensim.TimeSeriesTableVec3(str(path))
    names = list(table.getColumnLabels())
    row = table.getRowAtIndex(0)
    scale = 1e-3 if table.getTableMetaDataAsString("Units") == "mm" else 1.0
    return names, np.array([[row[i][k] for k in range(3)] for i in range(len(names))]) * scale


@pytest.mark.parametrize("frames", [4, 1])  # one frame: the tool needs a time span
def test_a_known_scale_comes_back_on_every_body_with_the_markers_placed(generic, tmp_path, frames):
    static = scaled_static(generic, tmp_path / "static.trc", frames=frames)
    result = scale_model(generic, static, tmp_path / "subject.osim")
    measured = {b for m in load_marker_map().measurements for b in m.bodies}
    assert measured <= set(result.factors)
    for body in measured:
        np.testing.assert_allclose(result.factors[body], FACTOR, atol=1e-3, err_msg=body)
    assert result.static_rms_m < 5e-4 and result.static_max_m < 1e-3
    # the scaled model's own markers, in its default pose, where the static has them
    model = opensim.Model(str(result.model))
    state = model.initSystem()
    names, truth = read_trc_positions(static)
    placed = np.array(
        [model.getMarkerSet().get(n).getLocationInGround(state).to_numpy() for n in names]
    )
    np.testing.assert_allclose(placed, truth, atol=1e-3)
    assert not list(tmp_path.glob(".subject.*"))  # the private folder is gone


def test_a_static_without_a_measurement_s_marker_is_one_error_and_writes_nothing(generic, tmp_path):
    names = [n for n in load_marker_map().names if n != "R.Heel"]
    static = scaled_static(generic, tmp_path / "static.trc", names=names)
    with pytest.raises(DataError, match=r"measurement 'foot_r' needs marker R\.Heel") as err:
        scale_model(generic, static, tmp_path / "subject.osim")
    assert "\n" not in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["static.trc"]
    static = scaled_static(generic, tmp_path / "static.trc")
    with pytest.raises(DataError, match="subject mass"):
        scale_model(generic, static, tmp_path / "subject.osim", mass=-70.0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["static.trc"]


def standing_walk(frames: int) -> SMPLMotion:
    """The stand-in standing in the Z-up world, knees bending and straightening."""
    poses = np.zeros((frames, 24, 3))
    poses[:, 0] = [np.pi / 2, 0.0, 0.0]
    bend = np.radians(30.0) * np.sin(np.linspace(0.0, np.pi, frames)) ** 2
    poses[:, SMPL_JOINT_NAMES.index("left_knee"), 0] = bend
    poses[:, SMPL_JOINT_NAMES.index("right_knee"), 0] = bend[::-1]
    trans = np.tile([0.0, 0.0, 0.9], (frames, 1))
    return SMPLMotion(poses=poses, trans=trans, betas=np.zeros(10), fps=30.0)


def test_the_command_scales_to_the_static_and_fits_the_walk_better_than_unscaled(
    generic, tmp_path, capsys
):
    walk = standing_walk(8).save(tmp_path / "walk.npz")
    still = standing_walk(8)
    still.poses[:, 1:] = 0.0  # the static: standing straight
    static = still.save(tmp_path / "static.npz")
    plain = ["export", "opensim", str(walk), "--model", str(generic), "--json"]
    assert main([*plain, "--out", str(tmp_path / "generic")]) == 0
    unscaled = json.loads(capsys.readouterr().out)
    assert main([*plain, "--out", str(tmp_path / "scaled"), "--static", str(static)]) == 0
    scaled = json.loads(capsys.readouterr().out)
    assert (tmp_path / "scaled" / "scaled.osim").is_file()
    assert (tmp_path / "scaled" / "static_markers.trc").is_file()
    assert scaled["static_marker_rms_mm"] < 10.0
    assert scaled["marker_rms_mm"] < 0.5 * unscaled["marker_rms_mm"]
    assert set(scaled["scale_factors"]) >= {"pelvis", "femur_r", "tibia_l", "torso"}


def test_a_static_without_a_model_is_one_line(tmp_path, capsys):
    walk = standing_walk(4).save(tmp_path / "walk.npz")
    args = ["export", "opensim", str(walk), "--out", str(tmp_path / "os"), "--static", str(walk)]
    assert main(args) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "scales a model" in err
    assert not (tmp_path / "os").exists()
