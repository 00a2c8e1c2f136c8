"""Plate solving from marker clusters: plates.yaml, estimated local coordinates."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import roma
import torch
from helpers.shared import OPTITRACK_SAMPLE, PIG

from rbmcap.errors import ConfigError
from rbmcap.geometry.registration import rigid_registration
from rbmcap.io.capture import Capture
from rbmcap.io.plates import (
    PlateDefinition,
    estimate_local,
    frame_from_points,
    load_plate_definitions,
    save_plate_definitions,
    solve_plates,
)

# a 4-marker plate about 18 cm across (metres, plate frame)
LOCAL = np.array([[0.10, 0.04, 0.0], [-0.08, 0.06, 0.01], [-0.06, -0.07, 0.0], [0.04, -0.06, 0.02]])
NAMES = ["box:a", "box:b", "box:c", "box:d"]


def _motion(t: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(T, 3, 3) world-from-plate rotations and (T, 3) positions (m) of a smooth known motion."""
    g = torch.Generator().manual_seed(seed)
    s = torch.linspace(0, 1, t, dtype=torch.float64)[:, None]
    rv = torch.sin(6.0 * s + torch.rand(1, 3, generator=g, dtype=torch.float64) * 6) * 1.2
    rot = roma.rotvec_to_rotmat(rv).numpy()
    s = s.numpy()
    pos = np.concatenate([np.sin(3 * s), np.cos(2 * s), 1.0 + 0.2 * s], 1)
    return rot, pos


def _cluster_capture(t: int = 400, noise_m: float = 1.5e-4, seed: int = 0) -> tuple:
    """A capture of the 4-marker cluster (points only) following :func:`_motion`, with gaps."""
    rot, pos = _motion(t, seed)
    rng = np.random.default_rng(seed)
    pts = np.einsum("tij,kj->tki", rot, LOCAL) + pos[:, None] + rng.normal(0, noise_m, (t, 4, 3))
    vis = np.ones((t, 4), bool)
    vis[50:60, 0] = False  # one member hidden: still solvable
    vis[100:110, :2] = False  # two hidden: invalid
    vis[200:205] = False  # all hidden: invalid
    cap = Capture(
        fps=100.0,
        names=[],
        pos=np.zeros((t, 0, 3)),
        rot=np.zeros((t, 0, 3, 3)),
        valid=np.zeros((t, 0), bool),
        point_names=NAMES,
        points=pts,
        point_valid=vis,
        source="cluster.csv",
    )
    return cap, rot, pos, vis


def test_solved_pose_recovers_the_known_pose_and_reports_gaps_exactly():
    cap, rot, pos, vis = _cluster_capture()
    out = solve_plates(cap, {"box": PlateDefinition("box", tuple(NAMES), LOCAL)})
    expected_valid = vis.sum(1) >= 3
    np.testing.assert_array_equal(out.valid[:, 0], expected_valid)
    v = expected_valid
    pos_err_mm = np.linalg.norm(out.pos[v, 0] - pos[v], axis=-1) * 1000
    ang = roma.rotmat_geodesic_distance(
        torch.from_numpy(out.rot[v, 0].astype(np.float64)), torch.from_numpy(rot[v])
    )
    assert pos_err_mm.max() < 0.5
    assert np.degrees(ang.numpy()).max() < 0.5
    print(f"cluster fit: max {pos_err_mm.max():.3f} mm, {np.degrees(ang.numpy()).max():.3f} deg")
    res = out.residual_mm[:, 0]
    assert np.isnan(res[~v]).all() and np.isfinite(res[v]).all()
    assert 0.05 < np.median(res[v]) < 0.4  # 0.15 mm noise per axis


@pytest.mark.parametrize("layout", ["vicon-trajectories", "c3d"])
def test_cluster_written_to_a_file_solves_to_the_known_pose_with_its_gaps(tmp_path, layout):
    """The same cluster through real file layouts: a Vicon Trajectories CSV (mm, 6 decimals) and
    a C3D (float32 mm); the plates YAML names the members and gives their local coordinates."""
    from helpers.writers_c3d import write_c3d
    from helpers.writers_vicon import write_trajectories

    from rbmcap.io.importer import ImportOptions, import_capture

    cap, rot, pos, vis = _cluster_capture()
    if layout == "c3d":
        f = write_c3d(tmp_path / "cluster.c3d", NAMES, cap.points, vis, fps=100.0)
    else:
        f = write_trajectories(tmp_path / "cluster.csv", NAMES, cap.points, vis, fps=100.0)
    plates = tmp_path / "plates.yaml"
    save_plate_definitions(plates, {"box": PlateDefinition("box", tuple(NAMES), LOCAL)})
    out = import_capture(f, ImportOptions(plates=plates))
    assert out.format == layout and out.names == ["box"] and out.fps == 100.0
    expected_valid = vis.sum(1) >= 3
    np.testing.assert_array_equal(out.valid[:, 0], expected_valid)  # gaps reported exactly
    v = expected_valid
    pos_err_mm = np.linalg.norm(out.pos[v, 0] - pos[v], axis=-1) * 1000
    r_out = torch.from_numpy(out.rot[v, 0].astype(np.float64))
    ang = np.degrees(roma.rotmat_geodesic_distance(r_out, torch.from_numpy(rot[v])).numpy())
    print(f"{layout}: max {pos_err_mm.max():.3f} mm, {ang.max():.3f} deg")
    assert pos_err_mm.max() < 0.5 and ang.max() < 0.5
    assert np.isnan(out.residual_mm[~v, 0]).all()


def test_estimated_local_coordinates_reproduce_the_cluster_shape():
    cap, *_ = _cluster_capture(noise_m=2e-4)
    est = estimate_local(cap, PlateDefinition("box", tuple(NAMES)))
    # same shape: all pairwise distances agree (frame-independent)
    d_est = np.linalg.norm(est.local[:, None] - est.local[None], axis=-1)
    d_true = np.linalg.norm(LOCAL[:, None] - LOCAL[None], axis=-1)
    assert np.abs(d_est - d_true).max() < 1e-4
    # plate frame: centroid origin, principal axes, right-handed
    np.testing.assert_allclose(est.local.mean(0), 0, atol=1e-12)
    cov = est.local.T @ est.local
    np.testing.assert_allclose(cov - np.diag(np.diag(cov)), 0, atol=1e-12)
    assert cov[0, 0] >= cov[1, 1] >= cov[2, 2]
    r, t = rigid_registration(torch.from_numpy(est.local), torch.from_numpy(LOCAL - LOCAL.mean(0)))
    centred = torch.from_numpy(LOCAL - LOCAL.mean(0))
    fit = torch.einsum("ij,kj->ki", r, torch.from_numpy(est.local)) + t
    assert (fit - centred).norm(dim=-1).max() < 1e-4  # a rotation of the shape, not its mirror
    assert "estimated" in est.note


def test_plates_yaml_round_trips_and_states_the_estimate(tmp_path: Path):
    cap, *_ = _cluster_capture()
    est = estimate_local(cap, PlateDefinition("box", tuple(NAMES)))
    path = save_plate_definitions(tmp_path / "plates.yaml", {"box": est})
    text = path.read_text()
    assert "# box: local coordinates estimated" in text
    back = load_plate_definitions(path)["box"]
    assert back.markers == tuple(NAMES)
    np.testing.assert_allclose(back.local, est.local, atol=1e-6)


@pytest.mark.parametrize(
    "body, needle",
    [
        ("box: {markers: [a, b]}\n", "at least 3"),
        ("box: {markers: [a, b, c], local: {a: [0, 0], b: [0, 0, 0], c: [1, 0, 0]}}\n", "local"),
        (
            "box: {markers: [a, b, c], local: {a: [x, 0, 0], b: [0, 0, 0], c: [1, 0, 0]}}\n",
            "3 finite",
        ),
        ("box: [a, b, c]\n", "markers"),
    ],
)
def test_bad_plate_definitions_are_one_config_error(tmp_path: Path, body: str, needle: str):
    path = tmp_path / "plates.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=needle) as info:
        load_plate_definitions(path)
    assert str(path) in str(info.value) and "'box'" in str(info.value)


def test_a_marker_not_in_the_capture_is_named():
    cap, *_ = _cluster_capture(t=20)
    with pytest.raises(ConfigError, match="box:z"):
        solve_plates(cap, {"box": PlateDefinition("box", ("box:a", "box:b", "box:z"), LOCAL[:3])})


def test_ten_minutes_of_fourteen_plates_solve_in_seconds():
    t, k = 60_000, 14
    rng = np.random.default_rng(0)
    pts = rng.normal(0, 0.05, (t, 4 * k, 3))
    names = [f"p{j}:m{i}" for j in range(k) for i in range(4)]
    cap = Capture(
        fps=100.0,
        names=[],
        pos=np.zeros((t, 0, 3)),
        rot=np.zeros((t, 0, 3, 3)),
        valid=np.zeros((t, 0), bool),
        point_names=names,
        points=pts,
    )
    defs = {
        f"p{j}": PlateDefinition(f"p{j}", tuple(names[4 * j : 4 * j + 4]), LOCAL) for j in range(k)
    }
    start = time.process_time()  # CPU time: robust to other jobs on the machine
    out = solve_plates(cap, defs)
    assert out.pos.shape == (t, k, 3)
    assert time.process_time() - start < 20.0  # CPU seconds (all threads)


@pytest.mark.skipif(not OPTITRACK_SAMPLE.exists(), reason="the OptiTrack sample is absent")
def test_optitrack_rigid_body_agrees_with_the_pose_solved_from_its_markers(tmp_path: Path):
    from rbmcap.io.formats import read_capture
    from rbmcap.io.plates import plates_from_points

    cap = read_capture(OPTITRACK_SAMPLE)
    plates = tmp_path / "plates.yaml"
    plates.write_text("rb: {markers: ['Rigid Body 1_1', 'Rigid Body 1_2', 'Rigid Body 1_3']}\n")
    solved = plates_from_points(cap, plates)
    assert "estimated" in plates.read_text()  # written back
    v = cap.valid[:, 0] & solved.valid[:, 0]
    assert v.mean() > 0.9
    r_file = torch.from_numpy(cap.rot[v, 0].astype(np.float64))
    p_file = torch.from_numpy(cap.pos[v, 0].astype(np.float64))
    r_sol = torch.from_numpy(solved.rot[v, 0].astype(np.float64))
    p_sol = torch.from_numpy(solved.pos[v, 0].astype(np.float64))
    # constant definition offset: R_sol = R_file · R_off, p_sol = p_file + R_file · t_off
    r_off_frames = r_file.transpose(-1, -2) @ r_sol
    r_off = roma.special_procrustes(r_off_frames.mean(0))
    t_off = torch.einsum("tji,tj->ti", r_file, p_sol - p_file).mean(0)
    ang = np.degrees(roma.rotmat_geodesic_distance(r_file @ r_off, r_sol).numpy())
    dist_mm = ((p_file + r_file @ t_off - p_sol).norm(dim=-1) * 1000).numpy()
    print(f"OptiTrack: max {dist_mm.max():.4f} mm, {ang.max():.4f} deg")
    assert dist_mm.max() < 0.5
    assert ang.max() < 0.2


# ----------------------------------------------------------------- frame plates (model outputs)
FRAME_NAMES = ["SEGO", "SEGA", "SEGL"]


def _frame_capture(t: int = 50, seed: int = 1) -> tuple:
    """Points of a frame plate following :func:`_motion`: the origin, a point 0.4 m along x and
    a point 0.25 m along y plus 0.1 m along x (so that Gram–Schmidt has work to do)."""
    rot, pos = _motion(t, seed)
    local = np.array([[0.0, 0.0, 0.0], [0.4, 0.0, 0.0], [0.1, 0.25, 0.0]])
    pts = np.einsum("tij,kj->tki", rot, local) + pos[:, None]
    cap = Capture(
        fps=100.0,
        names=[],
        pos=np.zeros((t, 0, 3)),
        rot=np.zeros((t, 0, 3, 3)),
        valid=np.zeros((t, 0), bool),
        point_names=FRAME_NAMES,
        points=pts,
        point_valid=np.ones((t, 3), bool),
        source="model.c3d",
    )
    return cap, rot, pos


def test_frame_from_points_recovers_a_known_rotation_exactly():
    rot, pos = _motion(200, seed=3)
    x = pos + 0.3 * rot[..., 0]
    y = pos + 0.2 * rot[..., 1] - 0.15 * rot[..., 0]  # not orthogonal to x
    r, ok = frame_from_points(pos, x, y)
    assert ok.all()
    np.testing.assert_allclose(r, rot, atol=1e-12)


def test_frame_plate_takes_its_pose_from_the_points():
    cap, rot, pos = _frame_capture()
    out = solve_plates(cap, {"seg": PlateDefinition.from_frame("seg", *FRAME_NAMES)})
    assert out.names == ["seg"] and out.valid[:, 0].all()
    np.testing.assert_allclose(out.rot[:, 0], rot, atol=2e-6)  # float32 points
    np.testing.assert_allclose(out.pos[:, 0], pos, atol=1e-6)
    np.testing.assert_allclose(np.linalg.det(out.rot[:, 0].astype(np.float64)), 1.0, atol=1e-6)
    assert np.isnan(out.residual_mm).all()  # the pose came from the file


def test_frame_plate_is_invalid_where_a_point_is_missing_or_the_axes_degenerate():
    cap, rot, _ = _frame_capture(t=12)
    pts, vis = cap.points.astype(np.float64), cap.point_valid.copy()
    vis[0, 0] = vis[1, 1] = vis[2, 2] = False  # each point missing once
    pts[3, 1] = pts[3, 0]  # x on the origin: zero-length axis
    pts[4, 2] = pts[4, 0]  # y on the origin
    pts[5, 2] = pts[5, 0] + 2.0 * (pts[5, 1] - pts[5, 0])  # y along x
    pts[6, 2] = pts[6, 0] + (pts[6, 1] - pts[6, 0]) + 1e-5 * rot[6, :, 1]  # nearly along x
    cap = replace(cap, points=pts, point_valid=vis)
    out = solve_plates(cap, {"seg": PlateDefinition.from_frame("seg", *FRAME_NAMES)})
    expected = np.ones(12, bool)
    expected[:7] = False
    np.testing.assert_array_equal(out.valid[:, 0], expected)
    np.testing.assert_array_equal(out.rot[~expected, 0], np.tile(np.eye(3), (7, 1, 1)))
    np.testing.assert_array_equal(out.pos[~expected, 0], 0.0)
    np.testing.assert_allclose(out.rot[7:, 0], rot[7:], atol=2e-6)


def test_frame_plates_round_trip_through_the_plates_yaml(tmp_path: Path):
    defs = {
        "seg": PlateDefinition.from_frame("seg", *FRAME_NAMES),
        "box": PlateDefinition("box", tuple(NAMES), LOCAL),
    }
    path = save_plate_definitions(tmp_path / "plates.yaml", defs)
    assert "seg:\n  frame: {origin: SEGO, x: SEGA, y: SEGL}\n" in path.read_text()
    back = load_plate_definitions(path)
    assert list(back) == ["seg", "box"]
    assert back["seg"] == defs["seg"] and back["seg"].markers == tuple(FRAME_NAMES)
    np.testing.assert_allclose(back["box"].local, LOCAL, atol=1e-6)
    assert back["box"].frame is None


@pytest.mark.parametrize(
    "body, needle",
    [
        ("box: {markers: [a, b, c], frame: {origin: a, x: b, y: c}}\n", "not both"),
        ("box: {frame: {origin: a, x: b, y: c}, local: {a: [0, 0, 0]}}\n", "not both"),
        ("box: {frame: {origin: a, x: b}}\n", "origin: NAME, x: NAME, y: NAME"),
        ("box: {frame: [a, b, c]}\n", "origin: NAME, x: NAME, y: NAME"),
        ("box: {frame: {origin: a, x: b, z: c}}\n", "origin: NAME, x: NAME, y: NAME"),
        ("box: {frame: {origin: a, x: [b], y: c}}\n", "frame.x: .* is not a point name"),
        ("box: {frame: {origin: a, x: b, y: null}}\n", "frame.y: .* is not a point name"),
        ("box: {frame: {origin: a, x: a, y: c}}\n", "three different points"),
        ("box: {frame: {origin: a, x: b, y: c}, colour: red}\n", "unknown keys"),
    ],
)
def test_a_bad_frame_entry_is_one_config_error_naming_file_and_plate(tmp_path, body, needle):
    path = tmp_path / "plates.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=needle) as info:
        load_plate_definitions(path)
    message = str(info.value)
    assert str(path) in message and "'box'" in message and "\n" not in message


def test_the_shipped_plug_in_gait_definition_gives_every_rbm15_plate_a_segment_frame():
    """rbm15's plates (rbm14's and the pelvis) each on its Plug-in Gait segment frame."""
    from rbmcap.markers.markerset import load_marker_set

    defs = load_plate_definitions("plug-in-gait")
    assert list(defs) == list(load_marker_set("rbm15").names)
    assert set(load_marker_set("rbm14").names) < set(defs)
    limbs = {
        "upper_arm": "HU",
        "forearm": "RA",
        "hand": "HN",
        "thigh": "FE",
        "shin": "TI",
        "foot": "FO",
    }
    segment = {"head": "HED", "chest": "TRX", "pelvis": "PEL"} | {
        f"{side}_{limb}": side[0].upper() + seg
        for side in ("left", "right")
        for limb, seg in limbs.items()
    }
    assert {n: d.frame for n, d in defs.items()} == {
        n: (f"{s}O", f"{s}A", f"{s}L") for n, s in segment.items()
    }
    assert all(d.local is None for d in defs.values())


def test_an_unknown_plates_name_is_one_config_error_listing_the_shipped_names():
    with pytest.raises(ConfigError, match=r"unknown plate definition 'plug-in-gate'.*plug-in-gait"):
        load_plate_definitions("plug-in-gate")


def test_a_shipped_definition_is_never_written_back(tmp_path, monkeypatch):
    """A shipped cluster plate without local coordinates is refused, not estimated into the
    package (here a stand-in package configuration folder)."""
    import rbmcap.config.packaged
    import rbmcap.io.plates

    (tmp_path / "plates").mkdir()
    shipped = tmp_path / "plates" / "cluster.yaml"
    shipped.write_text("box: {markers: [box:a, box:b, box:c, box:d]}\n")
    monkeypatch.setattr(rbmcap.config.packaged, "conf_dir", lambda: tmp_path)
    monkeypatch.setattr(rbmcap.io.plates, "conf_dir", lambda: tmp_path)
    cap, *_ = _cluster_capture(t=50)
    with pytest.raises(ConfigError, match="no local coordinates; copy the file"):
        rbmcap.io.plates.plates_from_points(cap, "cluster")
    assert shipped.read_text() == "box: {markers: [box:a, box:b, box:c, box:d]}\n"


@pytest.mark.skipif(
    not PIG.is_dir(), reason="the Plug-in Gait samples (../shared/data/pig) are absent"
)
def test_plug_in_gait_static_imports_as_rbm14_plates_on_the_segment_frames():
    """The one-frame static of a real Plug-in Gait session: every plate valid, a proper rotation
    whose z axis points to the segment's P point, at its O point (m, Z up); joint centres kept."""
    from rbmcap.io.importer import ImportOptions, import_capture

    cap = import_capture(
        PIG / "PiG_Calibration-FlatFoot-One.c3d",
        ImportOptions(plates="plug-in-gait", markers="rbm14"),
    )
    from rbmcap.markers.markerset import load_marker_set

    defs = load_plate_definitions("plug-in-gait")
    assert cap.names == list(load_marker_set("rbm14").names)
    assert cap.num_frames == 1 and cap.valid.all()
    assert np.isnan(cap.residual_mm).all() and "LFEO" in cap.point_names
    rot = cap.rot[0].astype(np.float64)
    np.testing.assert_allclose(np.linalg.det(rot), 1.0, atol=1e-6)
    point = {n: cap.points[0, i].astype(np.float64) for i, n in enumerate(cap.point_names)}
    for j, name in enumerate(cap.names):
        origin = defs[name].frame[0]
        np.testing.assert_allclose(cap.pos[0, j], point[origin], atol=1e-7)
        to_p = point[origin[:3] + "P"] - point[origin]
        assert rot[j, :, 2] @ to_p / np.linalg.norm(to_p) > 0.9999  # (A, L, P) is right-handed
    pos = {n: cap.pos[0, j] for j, n in enumerate(cap.names)}
    assert 1.55 < pos["head"][2] < 1.8
    assert pos["left_foot"][2] < 0.12 and pos["right_foot"][2] < 0.12
    left = point["LASI"] - point["RASI"]  # toward the subject's left
    side = {n: (p - pos["chest"]) @ left / np.linalg.norm(left) for n, p in pos.items()}
    assert all(side[n] > 0.05 for n in side if n.startswith("left_")), side
    assert all(side[n] < -0.05 for n in side if n.startswith("right_")), side


def test_a_plates_file_composes_a_shipped_definition_and_redefines_plates_whole(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "defaults: [plug-in-gait, _self_]\nhead: {markers: [a, b, c]}\n"
        "prop: {frame: {origin: PO, x: PX, y: PY}}\n"
    )
    mine, shipped = load_plate_definitions(path), load_plate_definitions("plug-in-gait")
    assert list(mine) == [*shipped, "prop"]
    assert mine["head"].markers == ("a", "b", "c") and mine["head"].frame is None
    assert mine["chest"] == shipped["chest"] and mine["prop"].frame == ("PO", "PX", "PY")
