"""OptiTrack Motive CSV import: Y up → Z up, quaternions and Euler angles, metres and millimetres,
gaps, labelled points, the tolerances of real files, one FormatError per malformed file, and the
real Motive 1.21 sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import roma
import torch
from helpers.bodies import walk_plates
from helpers.shared import OPTITRACK_SAMPLE as SAMPLE
from helpers.writers_c3d import cluster_points
from helpers.writers_optitrack import write_optitrack

from rbmcap.errors import DataError, FormatError
from rbmcap.io.optitrack import EULER_TYPES, Y_UP_TO_Z_UP, looks_like_optitrack, read_optitrack

TOL_MM, TOL_DEG = 0.01, 0.001


@pytest.fixture(scope="module")
def plates(standin):
    """60 frames of realistic rbm14 plates of a procedural walk, with extra gaps."""
    return walk_plates(standin, 60, lambda k: f"Plaque {k} é")


def angle_deg(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ta, tb = (
        torch.from_numpy(np.asarray(a, np.float64)),
        torch.from_numpy(np.asarray(b, np.float64)),
    )
    return np.degrees(roma.rotmat_geodesic_distance(ta, tb).numpy())


def points_of(names, pos, rot, valid):
    """Rigid Body Marker and Marker points of the first two plates (cluster offsets)."""
    pts = cluster_points(pos[:, :2], rot[:, :2])[:, :6]
    pnames = [f"{names[0]}_{k}" for k in range(1, 4)] + [f"{names[0]}:Marker{k}" for k in (1, 2, 3)]
    types = ["Rigid Body Marker"] * 3 + ["Marker"] * 3
    pv = np.ones(pts.shape[:2], bool)
    pv[20:25, 4] = False
    return pnames, types, pts, pv


def test_y_up_to_z_up_maps_up_to_plus_z_and_stays_right_handed():
    a = Y_UP_TO_Z_UP
    np.testing.assert_allclose(a @ [0, 1, 0], [0, 0, 1])
    np.testing.assert_allclose(a @ [1, 0, 0], [1, 0, 0])
    np.testing.assert_allclose(a @ a.T, np.eye(3))
    assert np.linalg.det(a) == pytest.approx(1.0)
    # (x, y, z)_Yup -> (x, -z, y)_Zup
    np.testing.assert_allclose(a @ [1.0, 2.0, 3.0], [1.0, -3.0, 2.0])


def _check_round_trip(cap, names, pos, rot, valid):
    assert cap.names == names and cap.format == "optitrack"
    np.testing.assert_array_equal(cap.valid, valid)
    err_mm = np.linalg.norm(cap.pos[valid] - pos[valid], axis=-1).max() * 1000
    err_deg = angle_deg(cap.rot[valid], rot[valid]).max()
    assert err_mm < TOL_MM and err_deg < TOL_DEG, (err_mm, err_deg)
    return err_mm, err_deg


@pytest.mark.parametrize("units", ["Meters", "Millimeters"])
def test_quaternion_export_imports_to_the_written_poses_and_points(tmp_path, plates, units):
    names, pos, rot, valid = plates
    pnames, types, pts, pv = points_of(*plates)
    path = write_optitrack(
        tmp_path / "take.csv",
        names,
        pos,
        rot,
        valid,
        units=units,
        fps=120.0,
        points=pts,
        point_names=pnames,
        point_types=types,
        point_valid=pv,
        frame_numbers=np.arange(60) + 7,
    )
    cap = read_optitrack(path)
    _check_round_trip(cap, names, pos, rot, valid)
    assert cap.fps == 120.0 and cap.frame_numbers.tolist() == list(range(7, 67))
    assert cap.point_names == pnames
    np.testing.assert_array_equal(cap.point_valid, pv)
    assert np.abs(cap.points[pv] - pts[pv]).max() * 1000 < TOL_MM
    assert np.isnan(cap.residual_mm).all()
    np.testing.assert_allclose(cap.extra["marker_error_m"][valid], 0.0001, rtol=1e-6)


@pytest.mark.parametrize("order", EULER_TYPES)
def test_euler_export_imports_to_the_written_poses(tmp_path, plates, order):
    names, pos, rot, valid = plates
    path = write_optitrack(tmp_path / "take.csv", names, pos, rot, valid, rotation=order)
    _check_round_trip(read_optitrack(path), names, pos, rot, valid)


def test_euler_xyz_is_intrinsic_in_the_named_order_in_degrees(tmp_path):
    """Cells X=30, Y=-50, Z=70 with Rotation Type XYZ mean R_y = Rx(30°) Ry(−50°) Rz(70°)."""
    one = np.ones((1, 1), bool)
    path = write_optitrack(
        tmp_path / "e.csv", ["b"], np.zeros((1, 1, 3)), np.eye(3)[None, None], one, rotation="XYZ"
    )
    lines = path.read_text().splitlines()
    lines[-1] = "0,0.0,30,-50,70,0.1,0.2,0.3,0.0"
    path.write_text("\n".join(lines) + "\n")
    cap = read_optitrack(path)
    d = np.radians([30.0, -50.0, 70.0])
    rx = roma.rotvec_to_rotmat(torch.tensor([d[0], 0.0, 0.0], dtype=torch.float64)).numpy()
    ry = roma.rotvec_to_rotmat(torch.tensor([0.0, d[1], 0.0], dtype=torch.float64)).numpy()
    rz = roma.rotvec_to_rotmat(torch.tensor([0.0, 0.0, d[2]], dtype=torch.float64)).numpy()
    np.testing.assert_allclose(cap.rot[0, 0], Y_UP_TO_Z_UP @ rx @ ry @ rz, atol=1e-6)
    np.testing.assert_allclose(cap.pos[0, 0], [0.1, -0.3, 0.2], atol=1e-7)


@pytest.mark.parametrize(
    "variant",
    [dict(bom=True, newline="\n"), dict(newline="\r\n", pad=3), dict(label_cells=True)],
    ids=["bom-lf", "crlf-padded", "label-cells"],
)
def test_tolerates_bom_crlf_padding_and_label_cells(tmp_path, plates, variant):
    names, pos, rot, valid = plates
    path = write_optitrack(tmp_path / "take.csv", names, pos, rot, valid, **variant)
    _check_round_trip(read_optitrack(path), names, pos, rot, valid)
    assert looks_like_optitrack(path.read_text(encoding="utf-8"))


def test_first_row_tells_motive_from_other_csv():
    assert looks_like_optitrack("\ufeffFormat Version,1.23,Take Name,x\r\n")
    assert not looks_like_optitrack("Segments\n100\n,,S:a,,,,,\n")


def _small(tmp_path) -> Path:
    t = 4
    rot = np.tile(np.eye(3), (t, 2, 1, 1))
    pos = np.ones((t, 2, 3))
    return write_optitrack(
        tmp_path / "bad.csv", ["a", "b"], pos, rot, np.ones((t, 2), bool), newline="\n"
    )


def _edit(path: Path, line: int, fn) -> Path:
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[line - 1] = fn(lines[line - 1])
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


BAD = {
    "extra-cell": (9, lambda s: s + ",5", r":9:\d+: row has"),
    "short-row": (10, lambda s: ",".join(s.split(",")[:-2]), r":10:\d+: row has"),
    "non-numeric": (9, lambda s: s.replace(",1.000000000", ",abc", 1), r":9:\d+: not a number"),
    "rotation-type": (1, lambda s: s.replace("Quaternion", "Helical"), r":1:\d+: unknown Rotation"),
    "length-units": (1, lambda s: s.replace("Meters", "Furlongs"), r":1:\d+: unknown Length Units"),
    "missing-header": (4, lambda s: "", r"missing header rows"),
    "no-axis-row": (7, lambda s: s.replace("Frame", "Cadre"), r"missing the header's axis"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_malformed_file_is_one_format_error_naming_file_line_column(tmp_path, case):
    line, fn, pattern = BAD[case]
    path = _small(tmp_path)
    if case == "missing-header":  # drop the Name and ID rows: Type, kind, axis remain
        lines = path.read_text().split("\n")
        path.write_text("\n".join(lines[:3] + lines[5:]))
    else:
        _edit(path, line, fn)
    with pytest.raises(
        FormatError,
        match=str(path).replace(".", r"\.") + ".*" + pattern
        if pattern.startswith(":")
        else pattern,
    ) as info:
        read_optitrack(path)
    assert str(path) in str(info.value)


def test_rigid_body_empty_throughout_is_an_error_naming_its_column(tmp_path):
    t = 3
    valid = np.ones((t, 2), bool)
    valid[:, 1] = False
    path = write_optitrack(
        tmp_path / "e.csv", ["a", "b"], np.ones((t, 2, 3)), np.tile(np.eye(3), (t, 2, 1, 1)), valid
    )
    with pytest.raises(FormatError, match=r"e\.csv:4:11: Rigid Body 'b' is empty throughout"):
        read_optitrack(path)


def test_missing_or_binary_file_is_a_format_error(tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        read_optitrack(tmp_path / "nope.csv")
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00\x81garbage")
    with pytest.raises(FormatError, match=r"bin\.csv"):
        read_optitrack(tmp_path / "bin.csv")


@pytest.mark.skipif(not SAMPLE.is_file(), reason="shared OptiTrack sample absent")
def test_real_motive_take_imports_and_its_definition_markers_ride_the_body():
    cap = read_optitrack(SAMPLE)
    assert cap.names == ["Rigid Body 1"] and cap.num_frames == 250 and cap.fps == 120.0
    assert cap.frame_numbers.tolist() == list(range(250)) and cap.valid.all()
    definition = ["Rigid Body 1_1", "Rigid Body 1_2", "Rigid Body 1_3"]
    measured = ["Rigid Body 1:Marker1", "Rigid Body 1:Marker2", "Rigid Body 1:Marker3"]
    assert set(definition + measured) <= set(cap.point_names)
    idx = [cap.point_names.index(n) for n in definition]
    assert cap.point_valid[:, idx].all()
    r, t = cap.rot[:, 0].astype(np.float64), cap.pos[:, 0].astype(np.float64)
    local = np.einsum("tji,tmj->tmi", r, cap.points[:, idx].astype(np.float64) - t[:, None])
    spread_mm = np.abs(local - local.mean(0)).max() * 1000
    assert spread_mm < 0.5, spread_mm
    # the body's origin is its definition markers' centroid, and Z up puts them in a level plane
    np.testing.assert_allclose(local.mean((0, 1)), 0.0, atol=1e-4)
    # Motive's definition markers share one height (Y up): after the turn to Z up, one z
    z = cap.points[:, idx, 2].astype(np.float64)
    assert np.ptp(z) * 1000 < 0.2, np.ptp(z)
    # columns Motive leaves empty throughout stay as points that are never valid
    assert not cap.point_valid[:, cap.point_names.index("Unlabeled:105")].any()


def test_one_empty_cell_makes_that_frame_of_that_object_invalid(tmp_path):
    path = _small(tmp_path)
    # line 9 = frame 1 (line 8 is frame 0): empty the W of plate 'a' and the Y position of plate 'b'
    _edit(
        path, 9, lambda s: ",".join("" if j in (5, 14) else c for j, c in enumerate(s.split(",")))
    )
    cap = read_optitrack(path)
    assert cap.valid.tolist() == [[True, True], [False, False], [True, True], [True, True]]
    assert (cap.pos[1] == 0).all() and (cap.rot[1] == np.eye(3)).all()


def test_a_point_name_seen_twice_is_made_unique(tmp_path):
    t = 3
    pts = np.zeros((t, 2, 3))
    path = write_optitrack(
        tmp_path / "d.csv",
        ["a"],
        np.zeros((t, 1, 3)),
        np.tile(np.eye(3), (t, 1, 1, 1)),
        np.ones((t, 1), bool),
        points=pts,
        point_names=["m", "m"],
        point_types=["Marker", "Marker"],
    )
    assert read_optitrack(path).point_names == ["m", "m #2"]


@pytest.mark.skipif(not SAMPLE.is_file(), reason="shared OptiTrack sample absent")
def test_read_capture_detects_a_motive_export():
    pytest.importorskip("rbmcap.io.vicon")  # detection asks the Vicon reader too
    from rbmcap.io.formats import detect_format, read_capture

    assert detect_format(SAMPLE) == "optitrack"
    assert read_capture(SAMPLE).format == "optitrack"


@pytest.mark.parametrize(("norm", "refused"), [(1.01, True), (1.00001, False)])
def test_a_quaternion_off_unit_norm_beyond_the_tolerance_is_not_a_rotation(tmp_path, norm, refused):
    """Motive writes unit quaternions; one of norm 1.01 (a 2 % scaled rotation) is refused with
    its line and column, one within ROTATION_TOLERANCE is normalised (no silent rescaling of a
    damaged export)."""
    t = 4
    path = write_optitrack(
        tmp_path / "q.csv",
        ["Body"],
        np.zeros((t, 1, 3)),
        np.tile(np.eye(3), (t, 1, 1, 1)),
        np.ones((t, 1), bool),
        newline="\n",
    )
    lines = path.read_text().split("\n")
    row = next(i for i, line in enumerate(lines) if line.startswith("2,"))  # the third frame
    cells = lines[row].split(",")  # Frame, Time, X, Y, Z, W, …
    cells[2:6] = [f"{float(c) * norm:.9f}" for c in cells[2:6]]
    lines[row] = ",".join(cells)
    path.write_text("\n".join(lines))
    if refused:
        with pytest.raises(DataError, match=rf"q\.csv:{row + 1}:3: .*'Body'.*norm 1\.01"):
            read_optitrack(path)
    else:
        rot = read_optitrack(path).rot[2, 0]
        np.testing.assert_allclose(rot @ rot.T, np.eye(3), atol=1e-6)
