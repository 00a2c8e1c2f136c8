"""Marker sets as data: loading, reduced sets, user sets, anchors and their resolution."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from rbmcap.errors import ConfigError, FormatError, ModelError
from rbmcap.markers.anchors import bone_point, dominant_smpl_joint
from rbmcap.markers.markerset import DEFAULT_MARKERS, available_marker_sets, load_marker_set
from rbmcap.skeleton import SMPL_JOINT_NAMES

RBM14 = [
    ("head", 335, "chest"),
    ("chest", 3073, None),
    ("left_upper_arm", 2821, "chest"),
    ("left_forearm", 1591, "left_upper_arm"),
    ("left_hand", 2000, "left_forearm"),
    ("left_thigh", 981, "chest"),
    ("left_shin", 1115, "left_thigh"),
    ("left_foot", 3341, "left_shin"),
    ("right_upper_arm", 4794, "chest"),
    ("right_forearm", 5059, "right_upper_arm"),
    ("right_hand", 5459, "right_forearm"),
    ("right_thigh", 4465, "chest"),
    ("right_shin", 4599, "right_thigh"),
    ("right_foot", 6742, "right_shin"),
]
REDUCED = {
    "rbm_a": [0, 1, 3, 4, 6, 7, 9, 10, 12, 13],
    "rbm_b": [0, 1, 2, 4, 5, 7, 8, 10, 11, 13],
    "rbm_c": [0, 1, 2, 3, 5, 6, 8, 9, 11, 12],
    "rbm_d": [0, 1, 4, 7, 10, 13],
    "rbm_e": [0, 1, 2, 5, 8, 11],
    "rbm_f": [0, 1, 3, 6, 9, 12],
}
MOSH_SAMPLE = {"ARIEL": 411, "C7": 3470, "LFHD": 0, "RTOE": 6633, "STRN": 3506, "T10": 3016}


@pytest.fixture(scope="module")
def body():
    from rbmcap.body import load_body_model

    return load_body_model("standin")


def test_shipped_sets_are_listed():
    names = set(available_marker_sets())
    assert {"rbm14", "moshpp53", "vr3", *REDUCED} <= names


def test_rbm14_matches_the_reference_table():
    ms = load_marker_set("rbm14")
    assert ms.kind == "rbm"
    assert list(ms.names) == [n for n, _, _ in RBM14]
    assert list(ms.vertex_ids) == [v for _, v, _ in RBM14]
    parents = [None if p < 0 else ms.names[p] for p in ms.parents]
    assert parents == [p for _, _, p in RBM14]
    assert all(a is not None for a in ms.anchors)


@pytest.mark.parametrize("name", sorted(REDUCED))
def test_reduced_sets_select_the_reference_indices_and_hang_orphans_from_the_chest(name):
    ms = load_marker_set(name)
    full = load_marker_set("rbm14")
    assert list(ms.names) == [full.names[i] for i in REDUCED[name]]
    assert list(ms.vertex_ids) == [full.vertex_ids[i] for i in REDUCED[name]]
    chest = ms.index("chest")
    for i, n in enumerate(ms.names):
        p = ms.parents[i]
        if n == "chest":
            assert p == -1
            continue
        original_parent = full.names[full.parents[full.index(n)]]
        expected = original_parent if original_parent in ms.names else "chest"
        assert ms.names[p] == expected
        assert p == ms.index(expected)
    assert sum(p < 0 for p in ms.parents) == 1 and ms.parents[chest] == -1


@pytest.mark.parametrize("name", ["rbm14", "rbm_a", "rbm_d", "vr3"])
def test_hydra_composes_a_set_as_the_loader_does(name):
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from rbmcap.config.packaged import HYDRA_CONFIG_MODULE

    with initialize_config_module(HYDRA_CONFIG_MODULE, version_base=None):
        cfg = compose("train", overrides=[f"markers={name}"])
    composed = load_marker_set(OmegaConf.to_container(cfg.markers, resolve=True))
    loaded = load_marker_set(name)
    assert composed.name == loaded.name == name
    assert composed.fingerprint == loaded.fingerprint and composed.parents == loaded.parents


def test_the_hydra_tree_and_the_library_default_to_the_same_marker_set():
    from hydra import compose, initialize_config_module

    from rbmcap.config.packaged import HYDRA_CONFIG_MODULE
    from rbmcap.dataset import SynthOptions

    with initialize_config_module(HYDRA_CONFIG_MODULE, version_base=None):
        cfg = compose("train")
    assert cfg.markers.name == DEFAULT_MARKERS == SynthOptions.defaults()["markers"]
    assert load_marker_set(DEFAULT_MARKERS).name == DEFAULT_MARKERS


def test_moshpp53_is_53_points_with_the_listed_vertices():
    ms = load_marker_set("moshpp53")
    assert ms.kind == "point" and len(ms) == 53
    assert len(set(ms.vertex_ids)) == 53
    for name, vertex in MOSH_SAMPLE.items():
        assert ms.vertex_ids[ms.index(name)] == vertex


def test_vr3_is_head_and_both_hands():
    ms = load_marker_set("vr3")
    assert list(ms.names) == ["head", "left_hand", "right_hand"]
    assert ms.parents == (-1, 0, 0)


def test_user_defined_set_from_a_yaml_path(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text(
        "name: mine\nkind: rbm\nmarkers:\n"
        "  - {name: pelvis, anchor: {joint: pelvis, along: 0.5, direction: [0, 0, -1]}}\n"
        "  - {name: wrist, vertex: 2000, parent: pelvis,"
        " anchor: {joint: 20, along: 0.5, direction: [0, 1, 0]}}\n"
    )
    ms = load_marker_set(path)
    assert ms.names == ("pelvis", "wrist") and ms.parents == (-1, 0)
    assert ms.vertex_ids == (None, 2000)
    assert ms.anchors[1].joint == SMPL_JOINT_NAMES.index("left_wrist")
    assert np.isclose(np.linalg.norm(ms.anchors[0].direction), 1.0)


def test_user_subset_of_a_shipped_set(tmp_path):
    path = tmp_path / "arms.yaml"
    path.write_text("defaults: [rbm14, _self_]\nselect: [chest, left_hand, right_hand]\n")
    ms = load_marker_set(path)
    assert ms.name == "arms" and ms.names == ("chest", "left_hand", "right_hand")
    assert ms.parents == (-1, 0, 0)


def test_unknown_marker_set_is_one_clear_error():
    with pytest.raises(ConfigError, match=r"unknown marker set 'rbm99'.*rbm14"):
        load_marker_set("rbm99")


@pytest.mark.parametrize(
    ("body_yaml", "message"),
    [
        ("markers:\n  - {name: a, vertex: 7000}\n", r"vertex 7000 is out of range"),
        ("markers:\n  - {name: a, vertex: 1}\n  - {name: a, vertex: 2, parent: a}\n", "twice"),
        ("markers:\n  - {name: a, vertex: 1, parent: zz}\n", "unknown parent 'zz'"),
        ("markers:\n  - {name: a}\n", "needs a 'vertex' or an 'anchor'"),
        (
            "markers:\n  - {name: a, anchor: {joint: elbow, direction: [0, 1, 0]}}\n",
            "unknown joint",
        ),
        ("markers:\n  - {name: a, anchor: {joint: head, direction: [0, 0, 0]}}\n", "non-zero"),
        ("kind: blob\nmarkers:\n  - {name: a, vertex: 1}\n", "kind 'blob'"),
        ("markers:\n  - {name: a, vertex: 1}\n  - {name: b, vertex: 2}\n", "exactly one root"),
    ],
)
def test_invalid_marker_files_name_the_file_and_the_problem(tmp_path, body_yaml, message):
    path = tmp_path / "bad.yaml"
    path.write_text(body_yaml)
    with pytest.raises(ConfigError, match=message) as info:
        load_marker_set(path)
    assert "bad.yaml" in str(info.value)


def test_a_marker_file_that_is_not_yaml_is_a_format_error_with_its_position(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nmarkers: [\n")
    with pytest.raises(FormatError, match=r"bad\.yaml:3:1: not valid YAML"):
        load_marker_set(path)
    path.write_text("- a\n- b\n")
    with pytest.raises(FormatError, match=r"bad\.yaml: expected a mapping .* got a list"):
        load_marker_set(path)


def _fake_body(num_vertices: int):
    """A body-like object with only a vertex count (enough for vertex-id resolution)."""
    return SimpleNamespace(num_vertices=num_vertices)


def _renumbered_to_smpl_count(body, seed: int = 0):
    """The stand-in's rest mesh with its vertices shuffled into SMPL's 6890 slots.

    Returns (body-like object, new_id) where ``new_id[v]`` is the slot of stand-in vertex v. The
    40 unused slots belong to no face and sit at the pelvis joint, inside the body. Nothing here
    looks at the marker sets: where the listed SMPL ids land on this mesh is arbitrary.
    """
    n, total = body.num_vertices, 6890
    new_id = np.random.default_rng(seed).permutation(total)[:n]
    verts = np.tile(body.rest_joints()[0].numpy(), (total, 1))
    weights = np.zeros((total, 24), np.float32)
    weights[:, 0] = 1.0
    verts[new_id] = body.v_template.numpy()
    weights[new_id] = body.lbs_weights.numpy()
    smpl_like = SimpleNamespace(
        num_vertices=total,
        v_template=torch.from_numpy(verts),
        faces=torch.from_numpy(new_id[body.faces.numpy()]),
        lbs_weights=torch.from_numpy(weights),
        rest_joints=body.rest_joints,
    )
    return smpl_like, new_id


@pytest.mark.parametrize("name", ["rbm14", "moshpp53", "vr3", "rbm_d"])
def test_listed_ids_are_used_as_is_on_smpl_topology_and_anchors_elsewhere(body, name):
    ms = load_marker_set(name)
    listed = np.asarray(ms.vertex_ids)
    smpl_like, new_id = _renumbered_to_smpl_count(body)
    on_standin = ms.resolve(body)  # 6850 vertices: not SMPL topology, placed by anchor
    by_anchor = ms.resolve(smpl_like, method="anchor")
    # anchors follow the surface, not the numbering: the same spots, renumbered
    np.testing.assert_array_equal(by_anchor, new_id[on_standin])
    # on a 6890-vertex mesh the listed ids win over the anchors ...
    assert ms.resolve(smpl_like).tolist() == listed.tolist()
    # ... and elsewhere the anchors win over the listed ids
    np.testing.assert_array_equal(on_standin, ms.resolve(body, method="anchor"))
    # (both checks can fail: the two answers differ for nearly every marker)
    assert (by_anchor != listed).mean() > 0.9 and (on_standin != listed).mean() > 0.9


def _bone_end(joints: np.ndarray, j: int) -> np.ndarray:
    """End of joint j's bone, written out independently of rbmcap.markers.anchors: the child
    joint (pelvis → spine1, spine3 → neck), or for a leaf the parent bone continued."""
    from rbmcap.skeleton import SMPL_PARENTS

    children = [c for c, p in enumerate(SMPL_PARENTS) if p == j]
    if children:
        return joints[{0: 3, 9: 12}.get(j, children[0])]
    return 2 * joints[j] - joints[SMPL_PARENTS[j]]


@pytest.mark.parametrize(
    ("name", "tolerance"), [("rbm14", 0.015), ("vr3", 0.015), ("moshpp53", 0.04)]
)
def test_standin_anchor_vertices_lie_on_the_stated_segment_and_ray(body, name, tolerance):
    """Each anchor's vertex on the stand-in is skinned mostly to the anchor's joint, outside the
    bone point ``along`` the bone in the anchor's direction, and within ``tolerance`` metres of
    that ray (the stand-in's skin is a few mm from where the ray leaves it)."""
    ms = load_marker_set(name)
    ids = ms.resolve(body)
    verts = body.v_template.numpy()
    owner = body.lbs_weights.numpy().argmax(1)  # the stand-in has SMPL's 24 joints
    joints = body.rest_joints().numpy()
    for i, anchor in enumerate(ms.anchors):
        start = joints[anchor.joint]
        origin = start + anchor.along * (_bone_end(joints, anchor.joint) - start)
        d = np.asarray(anchor.direction)
        rel = verts[ids[i]] - origin
        t = rel @ d
        assert owner[ids[i]] == anchor.joint, ms.names[i]
        assert 0.0 < t < 0.2, ms.names[i]
        assert np.linalg.norm(rel - t * d) < tolerance, ms.names[i]


def test_vertex_id_out_of_range_for_the_body_is_a_model_error(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("vertex_topology: 9000\nmarkers:\n  - {name: a, vertex: 8000}\n")
    with pytest.raises(ModelError, match=r"vertex 8000 is out of range for a body with 6890"):
        load_marker_set(path).resolve(_fake_body(6890), method="vertex")


def test_marker_without_anchor_cannot_be_placed_on_another_topology(tmp_path, body):
    path = tmp_path / "ids.yaml"
    path.write_text("markers:\n  - {name: a, vertex: 12}\n")
    with pytest.raises(ModelError, match=r"6850 vertices.*no anchor"):
        load_marker_set(path).resolve(body)


@pytest.mark.parametrize("name", ["rbm14", "moshpp53", "vr3"])
def test_on_the_standin_anchors_resolve_to_the_intended_body_part(body, name):
    ms = load_marker_set(name)
    ids = ms.resolve(body)
    assert len(set(ids.tolist())) == len(ms)
    verts = body.v_template.numpy()
    owner = dominant_smpl_joint(body.lbs_weights.numpy())
    joints = body.rest_joints().numpy()
    normals = _vertex_normals(verts, body.faces.numpy())
    for i, anchor in enumerate(ms.anchors):
        v = ids[i]
        # carried by the intended segment ...
        assert owner[v] == anchor.joint, ms.names[i]
        # ... on the intended side of it, close to where the ray leaves the body
        assert normals[v] @ np.asarray(anchor.direction) > 0.2, ms.names[i]
        offset = verts[v] - bone_point(joints, anchor)
        assert offset @ np.asarray(anchor.direction) > 0.0, ms.names[i]
        assert np.linalg.norm(offset) < 0.2, ms.names[i]


def test_standin_rbm14_left_right_placements_mirror(body):
    ms = load_marker_set("rbm14")
    verts = body.v_template.numpy()[ms.resolve(body)]
    for side in ("upper_arm", "forearm", "hand", "thigh", "shin", "foot"):
        left, right = verts[ms.index(f"left_{side}")], verts[ms.index(f"right_{side}")]
        assert left[0] > 0.05 and right[0] < -0.05
        np.testing.assert_allclose(left * [-1, 1, 1], right, atol=0.02)


def test_resolution_does_not_depend_on_tensor_device_or_dtype(body):
    ms = load_marker_set("rbm_d")
    double = SimpleNamespace(
        num_vertices=body.num_vertices,
        v_template=body.v_template.to(torch.float64),
        faces=body.faces,
        lbs_weights=body.lbs_weights.to(torch.float64),
        rest_joints=lambda: body.rest_joints().to(torch.float64),
    )
    assert ms.resolve(double).tolist() == ms.resolve(body).tolist()


def _vertex_normals(verts: np.ndarray, faces: np.ndarray) -> np.ndarray:
    n = np.cross(verts[faces[:, 1]] - verts[faces[:, 0]], verts[faces[:, 2]] - verts[faces[:, 0]])
    out = np.zeros_like(verts)
    for k in range(3):
        np.add.at(out, faces[:, k], n)
    return out / np.linalg.norm(out, axis=1, keepdims=True)
