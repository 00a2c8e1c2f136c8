"""Vicon CSV import: Segments, Tracker and Trajectories sections, every rotation convention in
degrees and radians, the tolerances of real files (padding, CRLF, ';', trimmed headers, BOM,
non-ASCII names, gaps), and one FormatError with file:line:col per malformed file."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch
from helpers.bodies import walk_plates
from helpers.writers_vicon import rotation_cells, write_segments, write_trajectories
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rbmcap.errors import ConfigError, FormatError
from rbmcap.io.formats import detect_format, read_capture
from rbmcap.io.vicon import ROTATIONS, detect_vicon_kind, read_vicon

TOL_MM, TOL_DEG = 0.01, 0.001


@pytest.fixture(scope="module")
def plates(standin):
    """40 frames of realistic rbm14 plates of a procedural walk, with extra gaps."""
    return walk_plates(standin, 40, lambda k: f"Sujet é:Plaque{k}")


def angle_deg(a, b) -> np.ndarray:
    ta, tb = (
        torch.from_numpy(np.asarray(a, np.float64)),
        torch.from_numpy(np.asarray(b, np.float64)),
    )
    return np.degrees(roma.rotmat_geodesic_distance(ta, tb).numpy())


def assert_same_plates(cap, names, pos, rot, valid):
    assert cap.names == names
    np.testing.assert_array_equal(cap.valid, valid)
    ok = valid
    assert np.abs(cap.pos[ok] - pos[ok]).max() * 1000 < TOL_MM
    assert angle_deg(cap.rot[ok], rot[ok]).max() < TOL_DEG
    assert np.isnan(cap.residual_mm).all()


@pytest.mark.parametrize("rotation", ROTATIONS)
@pytest.mark.parametrize("unit", ["deg", "rad"])
def test_segments_round_trip_in_every_rotation_convention(tmp_path, plates, rotation, unit):
    f = write_segments(tmp_path / "s.csv", *plates, rotation=rotation, unit=unit)
    cap = read_vicon(f, rotation=rotation)
    assert cap.format == "vicon-segments" and cap.fps == 100.0 and cap.source == str(f)
    np.testing.assert_array_equal(cap.frame_numbers, np.arange(1, 41))
    assert_same_plates(cap, *plates)


@pytest.mark.parametrize("rotation", ["helical", "euler_xyz", "euler_zyx"])
@pytest.mark.parametrize("unit", ["deg", "rad"])
def test_tracker_global_angle_objects_round_trip(tmp_path, plates, rotation, unit):
    f = write_segments(tmp_path / "t.csv", *plates, rotation=rotation, unit=unit, tracker=True)
    assert detect_format(f) == "vicon-tracker"
    cap = read_capture(f, rotation=rotation)
    assert cap.format == "vicon-tracker"
    assert_same_plates(cap, *plates)


def test_euler_xyz_is_intrinsic_rx_ry_rz():
    angles = torch.tensor([[0.3, -0.5, 1.1]], dtype=torch.float64)
    rx, ry, rz = (
        roma.rotvec_to_rotmat(torch.eye(3, dtype=torch.float64)[i] * angles[0, i]) for i in range(3)
    )
    cells = rotation_cells((rx @ ry @ rz)[None].numpy(), "euler_xyz", "rad")
    np.testing.assert_allclose(cells, angles.numpy(), atol=1e-12)


@pytest.mark.parametrize(
    "variant",
    [
        {"pad": 7},
        {"crlf": True},
        {"sep": ";"},
        {"trimmed": True},
        {"bom": True},
        {"bom": True, "trimmed": True},
        {"sep": ";", "crlf": True, "bom": True, "pad": 3},
    ],
    ids=["padded", "crlf", "semicolon", "trimmed", "bom", "bom-trimmed", "all"],
)
def test_real_file_variants_import_to_the_same_poses(tmp_path, plates, variant):
    f = write_segments(tmp_path / "v.csv", *plates, **variant)
    assert detect_format(f) == "vicon-segments"
    if variant.get("trimmed"):
        with pytest.warns(UserWarning, match="100 Hz"):
            cap = read_vicon(f)
        assert cap.fps == 100.0 and not cap.extra["fps_from_file"]
        assert read_vicon(f, fps=120.0).fps == 120.0
    else:
        cap = read_vicon(f)
        assert cap.extra["fps_from_file"]
    assert_same_plates(cap, *plates)


def test_a_file_trimmed_to_the_axis_row_names_objects_by_position(tmp_path, plates):
    f = write_segments(tmp_path / "v.csv", *plates, trimmed=True)
    lines = f.read_text().splitlines()
    f.write_bytes(("\ufeff" + "\n".join(lines[1:]) + "\n").encode("utf-8"))  # BOM too
    cap = read_vicon(f, fps=100.0)
    assert_same_plates(cap, [f"object{k + 1}" for k in range(len(plates[0]))], *plates[1:])


def test_latin1_file_is_read(tmp_path, plates):
    f = write_segments(tmp_path / "v.csv", *plates)
    f.write_bytes(f.read_text(encoding="utf-8").encode("latin-1"))
    assert read_vicon(f).names == plates[0]


def points_of(pos, valid):
    pts = pos[:, :4] + 0.01
    pv = valid[:, :4].copy()
    pv[5:9, 1] = False
    return [f"S:M{k}" for k in range(4)], pts, pv


def test_trajectories_give_points_and_no_plates(tmp_path, plates):
    names, pts, pv = points_of(plates[1], plates[3])
    f = write_trajectories(tmp_path / "p.csv", names, pts, pv, fps=250.0)
    assert detect_format(f) == "vicon-trajectories"
    cap = read_capture(f)
    assert cap.names == [] and cap.pos.shape == (40, 0, 3) and cap.fps == 250.0
    assert cap.point_names == names
    np.testing.assert_array_equal(cap.point_valid, pv)
    assert np.abs(cap.points[pv] - pts[pv]).max() * 1000 < TOL_MM


def test_segments_and_trajectories_in_one_file(tmp_path, plates):
    pnames, pts, pv = points_of(plates[1], plates[3])
    f = write_segments(tmp_path / "b.csv", *plates, points=(pnames, pts, pv), crlf=True)
    cap = read_vicon(f)
    assert_same_plates(cap, *plates)
    assert cap.point_names == pnames
    np.testing.assert_array_equal(cap.point_valid, pv)
    assert np.abs(cap.points[pv] - pts[pv]).max() * 1000 < TOL_MM
    only_points = read_vicon(f, kind="vicon-trajectories")
    assert only_points.names == [] and only_points.point_names == pnames


def test_sub_frames_other_than_zero_are_dropped(tmp_path, plates):
    f = write_segments(tmp_path / "v.csv", *plates)
    lines = f.read_text().splitlines()
    extra = lines[5].split(",")
    extra[1] = "1"
    lines.insert(6, ",".join(extra))
    f.write_text("\n".join(lines) + "\n")
    assert read_vicon(f).num_frames == 40


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sep=st.sampled_from([",", ";"]),
    pad=st.integers(0, 12),
    crlf=st.booleans(),
    bom=st.booleans(),
    trimmed=st.booleans(),
    unit=st.sampled_from(["deg", "rad"]),
    rotation=st.sampled_from(ROTATIONS),
)
def test_any_layout_variant_round_trips(
    tmp_path, plates, sep, pad, crlf, bom, trimmed, unit, rotation
):
    f = write_segments(
        tmp_path / "h.csv",
        *plates,
        sep=sep,
        pad=pad,
        crlf=crlf,
        bom=bom,
        trimmed=trimmed,
        rotation=rotation,
        unit=unit,
    )
    assert detect_vicon_kind(f.read_bytes().decode("utf-8-sig")) == "vicon-segments"
    assert_same_plates(read_vicon(f, rotation=rotation, fps=100.0), *plates)


def test_detect_returns_none_for_other_text():
    assert detect_vicon_kind("a,b,c\n1,2,3\n") is None
    assert detect_vicon_kind("") is None
    assert detect_vicon_kind("Frame,Sub Frame,Fx,Fy,Fz\n,,N,N,N\n1,0,1,2,3\n") is None


# ---------------------------------------------------------------------------------- bad input


def edit_line(f, line, old, new):
    lines = f.read_text().splitlines()
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    f.write_text("\n".join(lines) + "\n")


def one_error(f, match, **kw):
    with pytest.raises(FormatError) as err:
        read_vicon(f, **kw)
    assert str(err.value).startswith(str(f))
    assert match in str(err.value), str(err.value)
    return str(err.value)


@pytest.fixture
def good(tmp_path, plates):
    return write_segments(tmp_path / "bad.csv", *plates)


def test_non_numeric_cell_names_line_and_column(good):
    lines = good.read_text().splitlines()
    cells = lines[9].split(",")
    cells[4] = "abc"
    lines[9] = ",".join(cells)
    good.write_text("\n".join(lines) + "\n")
    one_error(good, f"{good}:10:5: expected a number, got 'abc'")


def test_row_of_inconsistent_length(good):
    lines = good.read_text().splitlines()
    lines[7] += ",1.0,2.0"
    good.write_text("\n".join(lines) + "\n")
    one_error(good, f"{good}:8:")
    assert "cells" in one_error(good, "axis row")


def test_unknown_units_string(good):
    edit_line(good, 5, "mm", "furlong")
    one_error(good, f"{good}:5:6: unknown unit 'furlong'")


def test_object_empty_throughout_is_named(tmp_path, plates):
    names, pos, rot, valid = plates
    valid = valid.copy()
    valid[:, 2] = False
    f = write_segments(tmp_path / "e.csv", names, pos, rot, valid)
    one_error(f, f"{names[2]!r} is empty throughout")
    assert f"{f}:4:15:" in one_error(f, "empty")


def test_empty_frame_number(good):
    lines = good.read_text().splitlines()
    lines[6] = "," + lines[6].split(",", 1)[1]
    good.write_text("\n".join(lines) + "\n")
    one_error(good, f"{good}:7:1: empty frame number")


def test_not_a_vicon_file(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("hello,world\n1,2\n")
    one_error(f, "not a Vicon CSV")
    one_error(tmp_path / "missing.csv", "no such file")


def test_garbage_between_sections(good):
    good.write_text(good.read_text() + "\nwhat is this\n")
    one_error(good, "expected a Vicon section")


def test_invalid_options_are_config_errors(good):
    with pytest.raises(ConfigError, match="unknown rotation"):
        read_vicon(good, rotation="quaternion")
    with pytest.raises(ConfigError, match="angle unit"):
        read_vicon(good, angle_unit="grad")
    with pytest.raises(ConfigError, match="kind"):
        read_vicon(good, kind="vicon-devices")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=400))
def test_arbitrary_bytes_give_only_format_errors(tmp_path, data):
    f = tmp_path / "r.csv"
    f.write_bytes(b"Segments\n100\n,,A:B\nFrame,Sub Frame,RX,RY,RZ,TX,TY,TZ\n" + data)
    try:
        read_vicon(f)
    except FormatError:
        pass


def test_nexus_file_with_devices_and_model_output_angles_keeps_segments_and_trajectories(
    tmp_path, plates
):
    pnames, pts, pv = points_of(plates[1], plates[3])
    f = write_segments(tmp_path / "n.csv", *plates, points=(pnames, pts, pv))
    devices = ["Devices", "1000", ",,Plate 1 - Force,,", "Frame,Sub Frame,Fx,Fy,Fz", ",,N,N,N"]
    devices += [f"{i // 10 + 1},{i % 10},0.5,1.5,700.25" for i in range(400)]
    outputs = [
        "Model Outputs",
        "100",
        ",,S:LKneeAngles,,",
        "Frame,Sub Frame,X,Y,Z",
        ",,deg,deg,deg",
    ]
    outputs += [f"{i + 1},0,10.0,2.0,3.0" for i in range(40)]
    f.write_text("\n".join(devices) + "\n\n" + "\n".join(outputs) + "\n\n" + f.read_text())
    assert detect_format(f) == "vicon-segments"
    cap = read_vicon(f)
    assert_same_plates(cap, *plates)
    assert cap.point_names == pnames


def test_unit_aliases_and_mixed_units(good, plates):
    text = good.read_text().splitlines()
    text[4] = text[4].replace("deg", "degrees").replace("mm", "millimeters")
    good.write_text("\n".join(text) + "\n")
    assert_same_plates(read_vicon(good), *plates)
    edit_line(good, 5, "millimeters", "m")
    one_error(good, f"{good}:5:6: mixed length units")


def test_one_empty_cell_makes_the_object_invalid_in_that_frame(good, plates):
    lines = good.read_text().splitlines()
    cells = lines[8].split(",")  # frame 4
    cells[2 + 6 * 1 + 4] = ""  # TY of plate 1
    lines[8] = ",".join(cells)
    good.write_text("\n".join(lines) + "\n")
    valid = plates[3].copy()
    valid[3, 1] = False
    assert_same_plates(read_vicon(good), plates[0], plates[1], plates[2], valid)
