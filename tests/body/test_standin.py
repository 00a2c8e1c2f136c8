"""The open stand-in body: format, geometry, rig and meaning of its shape space."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch
import trimesh

from rbmcap.body.standin.build import build_standin
from rbmcap.body.standin.rig import SHAPE_NAMES
from rbmcap.body.standin.skeleton import REST_JOINTS
from rbmcap.cli.main import main
from rbmcap.errors import EXIT_FORMAT, EXIT_MODEL, EXIT_USAGE


@pytest.fixture(scope="module")
def arrays():
    return build_standin()


@pytest.mark.exclusive  # times the build
def test_build_is_fast_and_deterministic(arrays):
    start = time.perf_counter()
    again = build_standin()
    assert time.perf_counter() - start < 3.0  # ~0.6 s here; generous for slow CI machines
    for key in arrays:
        np.testing.assert_array_equal(arrays[key], again[key])


def test_surface_is_a_closed_mesh_of_smpl_like_size(arrays):
    mesh = trimesh.Trimesh(arrays["v_template"], arrays["f"], process=False)
    assert 5000 <= len(arrays["v_template"]) <= 8000
    assert mesh.is_watertight and mesh.is_winding_consistent and mesh.volume > 0
    assert 0.045 < mesh.volume < 0.09  # m³: an adult of ~45–90 kg at the density of water
    angles = np.degrees(mesh.face_angles.min(axis=1))
    assert np.percentile(angles, 1) > 15  # no marching-cubes slivers


def test_adult_proportions(arrays):
    v = arrays["v_template"]
    height = v[:, 1].max() - v[:, 1].min()
    arm_span = v[:, 0].max() - v[:, 0].min()
    assert 1.6 < height < 1.85
    assert 0.95 < arm_span / height < 1.08  # arm span ≈ height in adults
    assert abs(v[:, 0].mean()) < 5e-3  # left-right symmetric


def test_joint_regressor_is_exact(arrays):
    np.testing.assert_allclose(arrays["J_regressor"] @ arrays["v_template"], REST_JOINTS, atol=1e-9)
    np.testing.assert_allclose(arrays["J_regressor"].sum(axis=1), 1.0, atol=1e-9)


def test_skinning_weights_are_a_partition_of_unity_on_the_right_bones(arrays):
    w = arrays["weights"]
    np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-9)
    assert (w >= 0).all()
    v = arrays["v_template"]
    hand_tips = v[:, 0] > 0.8
    assert w[hand_tips][:, 22].mean() > 0.9  # left fingers follow left_hand
    head_top = v[:, 1] > 0.5
    assert w[head_top][:, 15].mean() > 0.9
    left_shin = (v[:, 0] > 0.03) & (np.abs(v[:, 1] + 0.9) < 0.05)
    assert w[left_shin][:, 4].mean() > 0.9
    assert w[left_shin][:, [2, 5, 8]].max() == 0  # never on the other leg


def _segment(v: np.ndarray, owner: np.ndarray, joints: list[int]) -> np.ndarray:
    """The vertices (K, 3) whose dominant skinning weight is one of ``joints``."""
    return v[np.isin(owner, joints)]


def _thickness(points: np.ndarray) -> float:
    """Mean distance of a limb's vertices from its centre line (the limb lies along x)."""
    yz = points[:, 1:]
    return float(np.linalg.norm(yz - yz.mean(0), axis=1).mean())


# One measurement on the rest mesh per shape direction, named after it (T-pose: arms along x,
# Y up, facing +Z). The stand-in's segments are found by their dominant skinning weight.
SHAPE_MEASURES = {
    "height": lambda v, f, o: np.ptp(v[:, 1]),
    "girth": lambda v, f, o: trimesh.Trimesh(v, f, process=False).volume,
    "leg_length": lambda v, f, o: _segment(v, o, [0])[:, 1].mean() - v[:, 1].min(),
    "arm_length": lambda v, f, o: np.ptp(_segment(v, o, [16, 18, 20, 22])[:, 0]),
    "shoulder_width": lambda v, f, o: (
        _segment(v, o, [16])[:, 0].mean() - _segment(v, o, [17])[:, 0].mean()
    ),
    "hip_width": lambda v, f, o: (
        _segment(v, o, [1])[:, 0].mean() - _segment(v, o, [2])[:, 0].mean()
    ),
    "torso_length": lambda v, f, o: (
        _segment(v, o, [12])[:, 1].mean() - _segment(v, o, [0])[:, 1].mean()
    ),
    "belly": lambda v, f, o: _segment(v, o, [3, 6])[:, 2].max(),
    "head_size": lambda v, f, o: np.ptp(_segment(v, o, [15])[:, 0]),
    "muscularity": lambda v, f, o: _thickness(_segment(v, o, [16])),
}


@pytest.fixture(scope="module")
def shape_effects(standin) -> dict[str, dict[str, float]]:
    """For each shape direction, the relative change of every measure from beta −1 to +1."""
    faces = standin.faces.numpy()
    owner = standin.lbs_weights.numpy().argmax(1)
    zero = torch.zeros(24, 3)
    with torch.no_grad():
        rest = standin(zero).vertices.numpy()
    effects = {}
    for i, name in enumerate(SHAPE_NAMES):
        beta = torch.zeros(standin.num_betas)
        beta[i] = 1.0
        with torch.no_grad():
            lo = standin(zero, -beta).vertices.numpy()
            hi = standin(zero, beta).vertices.numpy()
        effects[name] = {
            m: (fn(hi, faces, owner) - fn(lo, faces, owner)) / abs(fn(rest, faces, owner))
            for m, fn in SHAPE_MEASURES.items()
        }
    return effects


def test_every_shape_direction_has_a_measure():
    assert len(SHAPE_NAMES) == 10 and set(SHAPE_MEASURES) == set(SHAPE_NAMES)


@pytest.mark.parametrize("name", SHAPE_NAMES)
def test_shape_direction_changes_what_its_name_says_most(shape_effects, name):
    change = shape_effects[name]
    assert change[name] > 0.08, change  # ±1 beta: at least ±4 % of the measure
    if name == "height":  # a uniform scale: every length grows by the same fraction
        lengths = [change[m] for m in SHAPE_MEASURES if m not in ("girth", "belly")]
        np.testing.assert_allclose(lengths, change["height"], rtol=1e-3)
    else:  # and it is what this direction changes most (relative to the rest value)
        assert max(change, key=change.get) == name, change


@pytest.fixture
def body_copy(standin):
    """A private copy of the session stand-in, free to modify."""
    import copy

    return copy.deepcopy(standin)


def test_pose_correctives_swell_a_bent_elbow(standin, body_copy):
    pose = torch.zeros(24, 3)
    pose[18] = torch.tensor([0.0, -1.5, 0.0])
    with torch.no_grad():
        with_correctives = standin(pose).vertices
        body_copy.smplx_model.posedirs.zero_()
        without = body_copy(pose).vertices
    moved = (with_correctives - without).norm(dim=-1)
    assert 0.004 < moved.max() < 0.02
    near_elbow = (standin.v_template - standin.rest_joints()[18]).norm(dim=-1) < 0.11
    assert moved[~near_elbow].max() < 1e-3
    assert standin.smplx_model.posedirs.abs().max() > 0  # the session body is untouched


def test_genders_differ_in_shape_only(tmp_path):
    male, female = build_standin("male"), build_standin("female")
    np.testing.assert_array_equal(male["f"], female["f"])
    assert np.ptp(male["v_template"][:, 1]) > np.ptp(female["v_template"][:, 1])


def test_cli_build_info_and_render(tmp_path, capsys):
    assert main(["body", "build-standin", "--out", str(tmp_path / "m"), "--gender", "neutral"]) == 0
    assert (tmp_path / "m" / "SMPL_NEUTRAL.npz").is_file()
    capsys.readouterr()
    assert main(["body", "info", str(tmp_path / "m"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "smpl" and info["num_joints"] == 24 and info["num_betas"] == 10
    assert 5000 <= info["num_vertices"] <= 8000 and info["gender"] == "neutral"
    assert main(["body", "info", "standin", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "standin"
    png = tmp_path / "body.png"
    assert main(["body", "render", "--model", "standin", "--out", str(png)]) == 0
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    skin = (img[..., 0] > img[..., 2] + 30) & (img[..., 0] > 80)  # skin tone, not background
    assert 0.03 < skin.mean() < 0.5


@pytest.mark.parametrize(
    ("argv", "needle", "code"),
    [
        (["body", "info", "/no/such/model.npz"], "no such body model", EXIT_MODEL),
        (["body", "convert", "/no/such.pkl", "--out", "x.npz"], "no such model file", EXIT_MODEL),
        (["body", "render", "--out", "body.gif"], "must be a .png", EXIT_USAGE),
    ],
)
def test_cli_bad_input_is_one_line_and_nonzero(argv, needle, code, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err


def test_cli_wrong_format(tmp_path, capsys):
    bad = tmp_path / "model.npz"
    bad.write_text("not a model")
    assert main(["body", "info", str(bad)]) == EXIT_FORMAT
    assert "not a readable .npz" in capsys.readouterr().err


def test_bench_skinning_compares_sparse_and_full_skinning(standin, capsys):
    from rbmcap.markers.markerset import load_marker_set

    assert main(["bench", "skinning", "--json", "--quick"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["machine"]["cpu_count"] >= 1
    assert result["num_vertices"] == standin.num_vertices
    # the sparse side skins exactly the rbm14 marker vertices and their one-rings ...
    ids = standin.with_one_rings(load_marker_set("rbm14").resolve(standin))
    assert result["sparse_vertices"] == len(ids) < 200
    # ... to float precision of the full forward, and much faster
    assert 0 <= result["max_abs_difference_m"] < 1e-5
    assert result["full_ms_per_frame"] > 2 * result["sparse_ms_per_frame"] > 0


def test_rendering_leaves_the_callers_matplotlib_backend_alone(standin, tmp_path):
    """A notebook's inline backend must survive a render (pyplot would switch it to Agg)."""
    import matplotlib

    from rbmcap.body.mesh_pictures import render_meshes

    before = matplotlib.get_backend()
    matplotlib.use("svg")
    try:
        import torch

        with torch.no_grad():
            v = standin.forward(torch.zeros(24, 3)).vertices.numpy()
        render_meshes([(v, np.asarray(standin.faces))], tmp_path / "one.png")
        assert (tmp_path / "one.png").stat().st_size > 1000
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
