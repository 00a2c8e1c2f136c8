"""C3D import through ezc3d: POINT data (labels, mm or m, residual < 0 = gap), the ROTATION
group as plates, header first frame and rate, and one FormatError for unreadable files."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch
from helpers.writers_c3d import CLUSTER, cluster_names, cluster_points, write_c3d

from rbmcap.errors import DataError, FormatError
from rbmcap.io.c3d import read_c3d

TOL_MM, TOL_DEG = 0.01, 0.001


@pytest.fixture(scope="module")
def plates(standin):
    """40 frames of realistic rbm14 plates of a procedural walk (first 4 plates), with gaps."""
    from rbmcap.markers.synth import Synthesizer
    from rbmcap.motion.procedural import generate

    m = generate("walk", seed=0, body=standin)
    obs = Synthesizer(standin, "rbm14", "realistic")(
        m.poses[:40], m.trans[:40], m.betas, fps=m.fps, key="c"
    )
    valid = obs.valid[:, :4].copy()
    valid[5:9, 1] = False
    return (
        ["head", "chest", "left_upper_arm", "left_forearm"],
        obs.pos[:, :4],
        obs.rot[:, :4],
        valid,
    )


def _points(names, pos, rot, valid):
    pts = cluster_points(pos, rot)
    pv = np.repeat(valid, len(CLUSTER), axis=1)
    pv[12:15, 2] = False  # one marker of plate 0 occluded while its plate is seen
    return cluster_names(names), pts, pv


@pytest.mark.parametrize("units", ["mm", "m"])
def test_point_clusters_import_to_the_written_positions_and_gaps(tmp_path, plates, units):
    pnames, pts, pv = _points(*plates)
    path = write_c3d(tmp_path / "t.c3d", pnames, pts, pv, fps=100.0, units=units, first_frame=12)
    cap = read_c3d(path)
    assert cap.format == "c3d" and cap.fps == 100.0 and cap.num_plates == 0
    assert cap.point_names == pnames
    assert cap.frame_numbers.tolist() == list(range(12, 52))
    np.testing.assert_array_equal(cap.point_valid, pv)
    err_mm = np.abs(cap.points[pv] - pts[pv]).max() * 1000
    assert err_mm < TOL_MM, err_mm
    assert (cap.points[~pv] == 0).all()


def test_rotation_group_imports_as_plates(tmp_path, plates):
    names, pos, rot, valid = plates
    pnames, pts, pv = _points(*plates)
    path = write_c3d(
        tmp_path / "r.c3d", pnames, pts, pv, plate_names=names, pos=pos, rot=rot, valid=valid
    )
    cap = read_c3d(path)
    assert cap.names == names
    np.testing.assert_array_equal(cap.valid, valid)
    err_mm = np.linalg.norm(cap.pos[valid] - pos[valid], axis=-1).max() * 1000
    a, b = (torch.from_numpy(np.asarray(x, np.float64)) for x in (cap.rot[valid], rot[valid]))
    err_deg = np.degrees(roma.rotmat_geodesic_distance(a, b).numpy()).max()
    assert err_mm < TOL_MM and err_deg < TOL_DEG, (err_mm, err_deg)
    assert np.isnan(cap.residual_mm).all()


def test_markers_sit_at_their_plate_offsets_in_the_plate_frame(tmp_path, plates):
    """The ROTATION poses and the POINT clusters agree: R^T (p − t) is the written offset."""
    names, pos, rot, valid = plates
    pnames, pts, pv = _points(*plates)
    path = write_c3d(
        tmp_path / "r.c3d", pnames, pts, pv, plate_names=names, pos=pos, rot=rot, valid=valid
    )
    cap = read_c3d(path)
    local = np.einsum(
        "tji,tmj->tmi",
        cap.rot[:, 0].astype(np.float64),
        cap.points[:, :4].astype(np.float64) - cap.pos[:, :1],
    )
    ok = pv[:, :4] & cap.valid[:, :1]
    diff = np.abs(local - CLUSTER[None])[ok].max() * 1000
    assert diff < 0.01, diff


def test_unreadable_or_missing_c3d_is_one_format_error(tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        read_c3d(tmp_path / "none.c3d")
    junk = tmp_path / "junk.c3d"
    junk.write_bytes(b"\x02P" + b"\x00" * 40)
    with pytest.raises(FormatError, match=r"junk\.c3d: not a readable C3D"):
        read_c3d(junk)


def test_truncated_c3d_is_a_format_error(tmp_path, plates):
    pnames, pts, pv = _points(*plates)
    path = write_c3d(tmp_path / "t.c3d", pnames, pts, pv)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(FormatError, match=r"t\.c3d"):
        read_c3d(path)


def test_unknown_point_units_is_a_format_error(tmp_path, plates):
    import ezc3d

    pnames, pts, pv = _points(*plates)
    path = write_c3d(tmp_path / "u.c3d", pnames, pts, pv)
    c = ezc3d.c3d(str(path))
    c["parameters"]["POINT"]["UNITS"]["value"] = ["furlong"]
    c.write(str(path))
    with pytest.raises(FormatError, match=r"u\.c3d: unknown POINT:UNITS 'furlong'"):
        read_c3d(path)


def test_read_capture_detects_a_c3d_file(tmp_path, plates):
    pytest.importorskip("rbmcap.io.vicon")  # detection asks the Vicon reader too
    from rbmcap.io.formats import detect_format, read_capture

    pnames, pts, pv = _points(*plates)
    path = write_c3d(tmp_path / "d.c3d", pnames, pts, pv)
    assert detect_format(path) == "c3d"
    assert read_capture(path).point_names == pnames


@pytest.mark.parametrize("damage", ["reflection", "scaled", "zero", "nan"])
def test_a_rotation_that_is_not_rigid_is_an_error_and_a_missing_one_a_gap(tmp_path, plates, damage):
    """NaN or all-zero matrices are frames where a segment was not tracked (invalid there); a
    reflection or a 1 % scaled matrix is not a rotation: a DataError naming plate and frame."""
    names, pos, rot, valid = (
        np.array(x, copy=True) if not isinstance(x, list) else x for x in plates
    )
    valid[:] = True
    rot[7, 1] = {
        "reflection": np.diag([1.0, 1.0, -1.0]),
        "scaled": 1.01 * np.eye(3),
        "zero": np.zeros((3, 3)),
        "nan": np.full((3, 3), np.nan),
    }[damage]
    pnames, pts, pv = _points(names, pos, rot, valid)
    path = write_c3d(
        tmp_path / "d.c3d", pnames, pts, pv, plate_names=names, pos=pos, rot=rot, valid=valid
    )
    if damage in ("reflection", "scaled"):
        with pytest.raises(DataError, match=rf"d\.c3d: plate {names[1]!r}, frame 7"):
            read_c3d(path)
    else:
        cap = read_c3d(path)
        assert not cap.valid[7, 1] and cap.valid.sum() == cap.valid.size - 1
