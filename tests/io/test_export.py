"""Exports of an SMPL motion: BVH (read back by rbmcap and by bvhio), animated .glb, .ply."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rbmcap.errors import ConfigError
from rbmcap.io.exports.bvh import Z_UP_TO_Y_UP
from rbmcap.io.exports.motion import export_motion
from rbmcap.motion.bvh import read_bvh
from rbmcap.motion.smpl_motion import SMPLMotion


@pytest.fixture(scope="module")
def motion():
    rng = np.random.default_rng(0)
    poses = rng.normal(0.0, 0.4, (23, 24, 3))
    poses[:, 0] += [np.pi / 2, 0.0, 0.0]  # stand up in the Z-up world
    return SMPLMotion(
        poses=poses,
        trans=rng.normal(0.0, 0.5, (23, 3)),
        betas=rng.normal(0.0, 1.0, 10),
        fps=30.0,
        name="walk",
    )


def test_bvh_read_back_gives_the_body_joints_within_a_millimetre(motion, standin, tmp_path):
    path = export_motion(motion, standin, bvh=tmp_path / "m.bvh")["bvh"]
    bvh = read_bvh(path)
    assert bvh.num_frames == 23 and bvh.fps == 30.0
    _, pos = bvh.global_transforms()  # cm, Y up, file order
    order = [bvh.index(n) for n in standin.joint_names]
    got = pos[:, order] / 100.0 @ Z_UP_TO_Y_UP  # back to metres, Z up
    args = (motion.poses, motion.betas, motion.trans)
    ref, _ = standin.pose_joints(*(torch.as_tensor(x, dtype=torch.float32) for x in args))
    err_mm = 1000 * np.linalg.norm(got - ref.numpy(), axis=-1).max()
    assert err_mm < 1.0, err_mm


def test_bvh_reads_in_a_third_party_parser(motion, standin, tmp_path):
    bvhio = pytest.importorskip("bvhio")
    path = export_motion(motion, standin, bvh=tmp_path / "m.bvh")["bvh"]
    root = bvhio.readAsHierarchy(str(path))
    assert len(root.layout()) == 24
    assert len(root.Keyframes) == 23
    assert {j.Name for j, *_ in root.layout()} == set(standin.joint_names)


def test_glb_loads_with_the_body_vertices_and_the_motion_length(motion, standin, tmp_path):
    import pygltflib
    import trimesh

    path = export_motion(motion, standin, glb=tmp_path / "m.glb")["glb"]
    scene = trimesh.load(path)
    (mesh,) = scene.geometry.values()
    assert len(mesh.vertices) == standin.num_vertices and len(mesh.faces) == len(standin.faces)
    doc = pygltflib.GLTF2().load(str(path))
    (anim,) = doc.animations
    assert len(anim.channels) == 25  # 24 rotations and the root translation
    times = doc.accessors[anim.samplers[0].input]
    assert times.count == 23 and times.max[0] == pytest.approx(22 / 30.0)


def test_ply_every_n_frames(motion, standin, tmp_path):
    import trimesh

    paths = export_motion(motion, standin, ply_dir=tmp_path / "ply", ply_every=5)["ply"]
    assert [p.name for p in paths] == [f"walk_{k:06d}.ply" for k in (0, 5, 10, 15, 20)]
    mesh = trimesh.load(paths[2], process=False)
    assert mesh.vertices.shape == (standin.num_vertices, 3)
    ref = standin(
        *(
            torch.as_tensor(x, dtype=torch.float32)
            for x in (motion.poses[10], motion.betas, motion.trans[10])
        )
    )
    np.testing.assert_allclose(mesh.vertices, ref.vertices.numpy(), atol=1e-5)


def test_a_wrong_suffix_writes_nothing(motion, standin, tmp_path):
    with pytest.raises(ConfigError, match=r"must end in \.glb"):
        export_motion(motion, standin, npz=tmp_path / "m.npz", glb=tmp_path / "m.gltf")
    assert not any(tmp_path.iterdir())
