"""C3D import through ezc3d: POINT data (labels, mm or m, residual < 0 = gap), the ROTATION
group as plates, header first frame and rate, the frames a file holds where its header or
parameters disagree (one warning), and one error for unreadable files or files without points."""

from __future__ import annotations

import struct
import warnings

import numpy as np
import pytest
import roma
import torch
from helpers.fuzzing import c3d_parameters
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


def _random_c3d(path, padded: bool = True):
    """A C3D of 16 random points over 40 frames at 30 Hz, float data from block 4 on (16 bytes
    a point a frame: 10 240 bytes), then, as ezc3d writes it, a block of zero padding (which
    ezc3d reads as 2 more frames where the file declares more); ``padded=False`` cuts it off."""
    rng = np.random.default_rng(0)
    pts = rng.uniform(-1, 1, (40, 16, 3))
    valid = np.ones((40, 16), bool)
    path = write_c3d(path, [f"m{k}" for k in range(16)], pts, valid, fps=30.0)
    if not padded:
        path.write_bytes(path.read_bytes()[: 3 * 512 + 40 * 16 * 16])
    return path, pts


def _patched(path, header=None, **params):
    """Rewrite ``path`` with header words (1-based word: uint16) and int16 POINT parameters
    (``FRAMES=…``, ``DATA_START=…``) patched; the file's bytes otherwise as written."""
    raw = bytearray(path.read_bytes())
    for word, value in (header or {}).items():
        struct.pack_into("<H", raw, 2 * (word - 1), value)
    found = c3d_parameters(bytes(raw))
    for name, value in params.items():
        kind, _, at = found[("POINT", name)]
        assert kind == 2, (name, kind)
        struct.pack_into("<h", raw, at, value)
    path.write_bytes(bytes(raw))
    return path


def _read_warned(path):
    """(capture, [warning messages]) of read_c3d(path)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cap = read_c3d(path)
    return cap, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def _ezc3d_frames(path) -> int:
    import ezc3d

    return ezc3d.c3d(str(path))["data"]["points"].shape[2]


@pytest.mark.parametrize(
    ("padded", "frames", "says"),
    [
        (False, 1149, "its header says 1149, POINT:FRAMES says 1149"),
        (False, None, "its header says 1149"),
        (True, 1149, "its header says 1149, POINT:FRAMES says 1149"),
    ],
    ids=["header-and-frames", "header-only", "padded-last-block"],
)
def test_a_c3d_declaring_more_frames_than_it_holds_reads_those_it_holds_and_warns(
    tmp_path, padded, frames, says
):
    """An Optotrak export declares 1149 frames (header and POINT:FRAMES) and holds 29: the
    frames held are read, as ezc3d reads them, and one warning line says what disagreed. A last
    block's zero padding (ezc3d reads it as 2 frames at the origin) is not a frame."""
    path, pts = _random_c3d(tmp_path / "o.c3d", padded)
    _patched(path, {4: 1, 5: 1149}, **({"FRAMES": frames} if frames else {}))
    cap, said = _read_warned(path)
    assert _ezc3d_frames(path) == (42 if padded and frames else 40)
    assert cap.num_frames == 40 and cap.fps == 30.0
    assert cap.frame_numbers.tolist() == list(range(40))
    np.testing.assert_allclose(cap.points, pts, atol=1e-6)
    assert said == [f"{path}: C3D frame count: {says}, the file holds 40 frames; reading those 40"]


@pytest.mark.parametrize("cut", [0, 100], ids=["on-a-frame", "mid-frame"])
def test_a_c3d_that_ends_early_reads_its_whole_frames_and_warns(tmp_path, cut):
    path, pts = _random_c3d(tmp_path / "t.c3d")
    end = 3 * 512 + 15 * 16 * 16 + cut  # data from block 4, 16 markers x 16 bytes a frame
    path.write_bytes(path.read_bytes()[:end])
    cap, said = _read_warned(path)
    assert _ezc3d_frames(path) == cap.num_frames == 15
    np.testing.assert_allclose(cap.points, pts[:15], atol=1e-6)
    assert said == [
        f"{path}: C3D frame count: its header says 40, POINT:FRAMES says 40, the file holds "
        f"15 frames; reading those 15"
    ]


def test_a_c3d_cut_before_its_data_is_refused_naming_what_is_missing(tmp_path):
    path, _ = _random_c3d(tmp_path / "t.c3d")
    raw = path.read_bytes()
    path.write_bytes(raw[: 3 * 512])  # header and parameters, no frame
    with pytest.raises(
        DataError, match=r"t\.c3d: no point data \(the file ends before its first frame, block 4\)"
    ):
        read_c3d(path)
    path.write_bytes(raw[:700])  # inside the parameter section
    with pytest.raises(FormatError, match=r"t\.c3d: not a readable C3D file"):
        read_c3d(path)


def test_point_data_start_disagreeing_with_the_header_reads_from_the_header_block(tmp_path):
    """One of ezc3d's sample files has POINT:DATA_START 0 and its header's data block right:
    ezc3d reads the frames from the header's block, and so does rbmcap, with a warning."""
    path, pts = _random_c3d(tmp_path / "d.c3d")
    _patched(path, DATA_START=0)
    cap, said = _read_warned(path)
    assert _ezc3d_frames(path) == cap.num_frames == 40
    np.testing.assert_allclose(cap.points, pts, atol=1e-6)
    assert said == [
        f"{path}: C3D POINT:DATA_START is 0, the header puts the first frame at block 4; "
        f"reading from block 4"
    ]


@pytest.mark.parametrize("block", [0, 1])
def test_a_header_data_block_inside_the_header_is_a_format_error(tmp_path, block):
    path, _ = _random_c3d(tmp_path / "h.c3d")
    _patched(path, {9: block})
    with pytest.raises(FormatError, match=rf"h\.c3d: .*first frame at block {block}, inside"):
        read_c3d(path)


@pytest.mark.parametrize("rate", [100.0, 0.0])
def test_a_c3d_of_force_plates_and_no_points_is_one_data_error(tmp_path, rate):
    """A Kistler export: analog channels of force plates, no POINT data, rate 0."""
    import ezc3d

    c = ezc3d.c3d()
    c["parameters"]["POINT"]["RATE"]["value"] = [100.0]
    c["parameters"]["ANALOG"]["RATE"]["value"] = [600.0]
    c["parameters"]["ANALOG"]["LABELS"]["value"] = [f"Fz{k}" for k in range(16)]
    c["data"]["analogs"] = np.random.default_rng(0).normal(size=(1, 16, 600))
    c["data"]["points"] = np.zeros((4, 0, 100))
    c.add_parameter("FORCE_PLATFORM", "USED", [2])
    path = tmp_path / "k.c3d"
    c.write(str(path))
    if rate == 0.0:
        raw = bytearray(path.read_bytes())
        struct.pack_into("<f", raw, c3d_parameters(bytes(raw))[("POINT", "RATE")][2], rate)
        struct.pack_into("<f", raw, 20, rate)  # header words 11-12: the frame rate
        path.write_bytes(bytes(raw))
    assert ezc3d.c3d(str(path))["data"]["points"].shape == (4, 0, 100)
    with pytest.raises(DataError) as err:
        read_c3d(path)
    assert str(err.value) == (
        f"{path}: no point data (POINT:USED is 0; the file holds 16 analog channels and "
        f"2 force plates only)"
    )


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
