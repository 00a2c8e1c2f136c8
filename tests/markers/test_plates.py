"""Plate frames: exact definition, rigidity, equivariance and the sparse path."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.errors import ModelError
from rbmcap.markers.plates import (
    PLATE_STANDOFF,
    angle_weighted_normals,
    faces_around,
    frames_from_normal,
    plate_frames,
    plate_topology,
)
from rbmcap.markers.synth import Synthesizer

torch.set_default_dtype(torch.float32)


@pytest.fixture(scope="module")
def body():
    from rbmcap.body import load_body_model

    return load_body_model("standin")


@pytest.fixture(scope="module")
def synth(body):
    return Synthesizer(body, "rbm14")


def _random_motion(seed: int, frames: int = 8, scale: float = 0.5):
    g = torch.Generator().manual_seed(seed)
    poses = torch.randn(frames, 24, 3, generator=g) * scale
    trans = torch.randn(frames, 3, generator=g)
    betas = torch.randn(10, generator=g)
    return poses, trans, betas


def _reference_frames(verts: np.ndarray, faces: np.ndarray, rest: np.ndarray, ids: np.ndarray):
    """The plate frame's definition written out naively in float64, one vertex at a time (the
    test oracle)."""
    pos, rot = [], []
    for v in ids:
        fan = [f for f in faces if v in f]
        n = np.zeros(3)
        areas = []
        for f in fan:
            k = list(f).index(v)
            a, b = f[(k + 1) % 3], f[(k + 2) % 3]
            e1, e2 = verts[a] - verts[v], verts[b] - verts[v]
            cos = e1 @ e2 / np.linalg.norm(e1) / np.linalg.norm(e2)
            normal = np.cross(e1, e2) / np.linalg.norm(np.cross(e1, e2))
            n += np.arccos(np.clip(cos, -1, 1)) * normal
            r1, r2 = rest[a] - rest[v], rest[b] - rest[v]
            areas.append(0.5 * np.linalg.norm(np.cross(r1, r2)))
        x = n / np.linalg.norm(n)
        ref = fan[int(np.argmin(areas))]
        r = verts[ref].mean(0) - verts[v]
        z = np.cross(x, r)
        z /= np.linalg.norm(z)
        rot.append(np.stack([x, np.cross(z, x), z], 1))
        pos.append(verts[v] + PLATE_STANDOFF * x)
    return np.array(pos), np.array(rot)


def test_angle_weighted_normal_of_a_symmetric_pyramid_points_up():
    apex = torch.tensor([[0.0, 0.0, 1.0]])
    ring = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [-1.0, 0, 0], [0, -1.0, 0]])
    a, b = ring[None], ring.roll(-1, 0)[None]
    n = angle_weighted_normals(apex, a, b)
    torch.testing.assert_close(n, torch.tensor([[0.0, 0.0, 1.0]]))


def test_angle_weights_not_area_weights_decide_the_normal():
    # one big and one tiny face with equal angles at the centre: equal weight despite areas
    centre = torch.zeros(1, 3)
    a = torch.tensor([[[1.0, 0, 0], [0, 0.01, 0]]])
    b = torch.tensor([[[0, 1.0, 0], [0, 0, 0.01]]])
    n = angle_weighted_normals(centre, a, b)
    # n1 = (0,0,1) and n2 = (1,0,0), both with a 90° angle at the centre
    expected = torch.tensor([[1.0, 0.0, 1.0]]) / np.sqrt(2.0)
    torch.testing.assert_close(n, expected, atol=1e-6, rtol=0)


def test_faces_around_keeps_the_winding():
    faces = np.array([[0, 1, 2], [2, 3, 0], [4, 5, 6]])
    fan = faces_around(faces, 0)
    assert fan.tolist() == [[0, 1, 2], [0, 2, 3]]


def test_vertex_on_no_face_has_no_plate_frame():
    with pytest.raises(ModelError, match="vertex 9"):
        plate_topology(np.array([[0, 1, 2], [0, 2, 3]]), np.zeros((10, 3)), np.array([9]))


def test_sparse_frames_equal_the_design_definition_on_the_full_mesh(body, synth):
    poses, trans, betas = _random_motion(0, frames=3)
    obs = synth(poses.numpy(), trans.numpy(), betas.numpy())
    verts = body(poses, betas, trans).vertices.double().numpy()
    faces = body.faces.numpy()
    rest = body.v_template.double().numpy()
    for t in range(3):
        pos, rot = _reference_frames(verts[t], faces, rest, synth.vertex_ids)
        np.testing.assert_allclose(obs.pos[t], pos, atol=2e-5)
        np.testing.assert_allclose(obs.rot[t], rot, atol=2e-4)


def test_frames_are_orthonormal_with_determinant_one(synth):
    poses, trans, betas = _random_motion(1, frames=64, scale=1.0)
    rot = synth(poses.numpy(), trans.numpy(), betas.numpy()).rot.astype(np.float64)
    eye = np.broadcast_to(np.eye(3), rot.shape)
    np.testing.assert_allclose(rot.swapaxes(-1, -2) @ rot, eye, atol=2e-6)
    np.testing.assert_allclose(np.linalg.det(rot), 1.0, atol=2e-6)


def test_plate_sits_9_5_mm_off_the_skin_along_its_normal(body, synth):
    poses, trans, betas = _random_motion(2, frames=16)
    obs = synth(poses.numpy(), trans.numpy(), betas.numpy())
    skin = body(poses, betas, trans).vertices[:, synth.vertex_ids].numpy()
    normal = obs.rot[..., :, 0]
    np.testing.assert_allclose(obs.pos - skin, PLATE_STANDOFF * normal, atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(obs.pos - skin, axis=-1), 0.0095, atol=2e-6)


def test_plate_follows_a_pure_rotation_of_its_segment_exactly(body, synth):
    """A plate whose skin patch is rigidly bound to one joint (weight 1, no pose correctives)
    moves exactly with that joint's segment when only that joint rotates."""
    weights = body.lbs_weights.numpy()
    posedirs = body.smplx_model.posedirs.numpy().T.reshape(body.num_vertices, 3, -1)
    topo = synth.topology
    rigid = []
    for i in range(len(synth.vertex_ids)):
        patch = topo.skin_ids[np.unique(np.r_[topo.centre[i], topo.fan_a[i], topo.fan_b[i]])]
        w = weights[patch]
        if np.all(w.max(1) == 1.0) and len(set(w.argmax(1))) == 1 and not posedirs[patch].any():
            rigid.append((i, int(w[0].argmax())))
    assert rigid, "the stand-in should bind some plate patch rigidly to one segment"
    poses, trans, betas = _random_motion(3, frames=4, scale=0.3)
    obs = synth(poses.numpy(), trans.numpy(), betas.numpy())
    for i, joint in rigid:
        extra = roma.rotvec_to_rotmat(torch.tensor([0.4, -0.7, 0.3]))
        local = roma.rotvec_to_rotmat(poses)
        turned = local.clone()
        turned[:, joint] = local[:, joint] @ extra
        moved = synth(roma.rotmat_to_rotvec(turned).numpy(), trans.numpy(), betas.numpy())
        joints, grot = body.pose_joints(local, betas, trans)
        centre = joints[:, joint].numpy()[:, None]
        delta = (grot[:, joint] @ extra @ grot[:, joint].transpose(-1, -2)).numpy()
        expected_pos = centre[:, 0] + np.einsum("tab,tb->ta", delta, obs.pos[:, i] - centre[:, 0])
        np.testing.assert_allclose(moved.pos[:, i], expected_pos, atol=1e-5)
        np.testing.assert_allclose(moved.rot[:, i], delta @ obs.rot[:, i], atol=1e-5)


@settings(max_examples=8, deadline=None)
@given(
    axis_angle=st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),
    shift=st.lists(st.floats(-5.0, 5.0), min_size=3, max_size=3),
)
def test_synthesis_is_equivariant_to_a_global_rigid_motion(synth, body, axis_angle, shift):
    poses, trans, betas = _random_motion(4, frames=4)
    base = synth(poses.numpy(), trans.numpy(), betas.numpy())
    g = roma.rotvec_to_rotmat(torch.tensor(axis_angle, dtype=torch.float32))
    t = torch.tensor(shift, dtype=torch.float32)
    root = body.rest_joints(betas)[0]
    moved_poses = poses.clone()
    moved_poses[:, 0] = roma.rotmat_to_rotvec(g @ roma.rotvec_to_rotmat(poses[:, 0]))
    moved_trans = (g @ (root + trans)[..., None])[..., 0] + t - root
    moved = synth(moved_poses.numpy(), moved_trans.numpy(), betas.numpy())
    gn, tn = g.numpy(), t.numpy()
    np.testing.assert_allclose(moved.pos, base.pos @ gn.T + tn, atol=2e-5)
    np.testing.assert_allclose(moved.rot, gn @ base.rot, atol=5e-5)  # float32 root round trip
    np.testing.assert_allclose(moved.joints, base.joints @ gn.T + tn, atol=2e-5)


def test_plate_frames_take_any_batch_shape(synth):
    skinned = torch.randn(2, 3, len(synth.topology.skin_ids), 3)
    pos, rot = plate_frames(skinned, synth.topology)
    assert pos.shape == (2, 3, 14, 3) and rot.shape == (2, 3, 14, 3, 3)


def test_fast_plate_frames_equal_the_readable_helpers(synth, body):
    poses, trans, betas = _random_motion(5, frames=6)
    skinned = body.skin_vertices(synth.topology.skin_ids, poses, betas, trans)
    pos, rot = plate_frames(skinned, synth.topology)
    topo = synth.topology
    centre = skinned[:, topo.centre]
    normal = angle_weighted_normals(
        centre, skinned[:, topo.fan_a], skinned[:, topo.fan_b], torch.as_tensor(topo.fan_mask)
    )
    ref = skinned[:, topo.ref]
    expected = frames_from_normal(normal, (ref[:, :, 0] + ref[:, :, 1] - 2 * centre) / 3)
    torch.testing.assert_close(rot, expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(pos, centre + PLATE_STANDOFF * normal, atol=1e-7, rtol=0)
