"""BodyModel over smplx: loading, forward, sparse skinning, SMPL-H, errors."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import smplx
import torch
from helpers.bodies import smplh_arrays
from smplx.utils import Struct

from rbmcap.body import load_body_model, read_model_arrays, standin_path
from rbmcap.body.files import write_npz_atomic
from rbmcap.errors import DataError, FormatError, ModelError, RBMCapError


def _random_inputs(seed: int, batch: int, num_betas: int):
    gen = torch.Generator().manual_seed(seed)
    poses = 0.5 * torch.randn(batch, 24, 3, generator=gen)
    betas = 1.5 * torch.randn(batch, num_betas, generator=gen)
    trans = torch.randn(batch, 3, generator=gen)
    return poses, betas, trans


def test_standin_loads_through_smplx_itself_and_agrees_with_body_model(standin, tmp_path):
    from rbmcap.body.standin.build import write_standin

    write_standin(tmp_path, genders=("neutral",))
    official_path = smplx.create(str(tmp_path / "SMPL_NEUTRAL.pkl"), model_type="smpl")
    from_npz = smplx.SMPL(
        model_path=str(tmp_path), data_struct=Struct(**dict(np.load(standin_path())))
    )
    poses, betas, trans = _random_inputs(0, 4, 10)
    ours = standin(poses, betas, trans)
    for model in (official_path, from_npz):
        out = model(
            betas=betas,
            global_orient=poses[:, 0],
            body_pose=poses[:, 1:].reshape(4, -1),
            transl=trans,
        )
        assert torch.allclose(out.vertices, ours.vertices, atol=1e-5)
        assert torch.allclose(out.joints[:, :24], ours.joints, atol=1e-5)


def test_zero_pose_reproduces_the_template(standin):
    out = standin(torch.zeros(24, 3))
    assert torch.allclose(out.vertices, standin.v_template, atol=1e-6)
    assert torch.allclose(out.joints, standin.rest_joints(), atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparse_skinning_equals_full_forward(standin, seed):
    poses, betas, trans = _random_inputs(seed, 16, standin.num_betas)
    ids = np.random.default_rng(seed).choice(standin.num_vertices, 200, replace=False)
    full = standin(poses, betas, trans).vertices[:, ids]
    sparse = standin.skin_vertices(ids, poses, betas, trans)
    assert (full - sparse).abs().max() < 1e-5


def test_sparse_skinning_accepts_rotation_matrices_and_any_batch_dims(standin):
    import roma

    poses, betas, trans = _random_inputs(3, 6, 10)
    ids = [0, 10, 100]
    ref = standin.skin_vertices(ids, poses, betas, trans).reshape(2, 3, 3, 3)
    rot = roma.rotvec_to_rotmat(poses).reshape(2, 3, 24, 3, 3)
    got = standin.skin_vertices(ids, rot, betas.reshape(2, 3, -1), trans.reshape(2, 3, 3))
    assert torch.allclose(got, ref, atol=1e-6)


def test_pose_joints_match_the_forward_joints(standin):
    poses, betas, trans = _random_inputs(4, 8, 10)
    joints, global_rot = standin.pose_joints(poses, betas, trans)
    assert torch.allclose(joints, standin(poses, betas, trans).joints, atol=1e-5)
    assert torch.allclose(global_rot @ global_rot.transpose(-1, -2), torch.eye(3), atol=1e-5)


def test_fewer_betas_are_zero_padded(standin):
    poses, betas, _ = _random_inputs(5, 2, 10)
    short = standin(poses, betas[:, :4]).vertices
    padded = standin(poses, torch.cat([betas[:, :4], torch.zeros(2, 6)], dim=1)).vertices
    assert torch.allclose(short, padded)


def test_one_rings_are_symmetric_neighbourhoods(standin):
    ring = standin.one_ring(100)
    assert 3 <= len(ring) <= 12
    for n in ring:
        assert 100 in standin.one_ring(int(n))
    both = standin.with_one_rings([100, 200])
    assert set(ring) <= set(both) and {100, 200} <= set(both)


def test_smplh_with_sixteen_betas(tmp_path):
    path = write_npz_atomic(tmp_path / "model.npz", smplh_arrays(num_betas=16))
    body = load_body_model(path)
    assert body.kind == "smplh" and body.num_betas == 16 and body.num_model_joints == 52
    poses, betas, trans = _random_inputs(6, 3, 16)
    out = body(poses, betas, trans)
    assert out.joints.shape == (3, 24, 3)
    # the 16th beta moves the surface (smplx would otherwise cap the shape space at 10)
    moved = body(poses, betas + torch.nn.functional.one_hot(torch.tensor(15), 16), trans)
    assert (moved.vertices - out.vertices).abs().max() > 1e-3
    ids = np.arange(0, body.num_vertices, 50)
    assert (body.skin_vertices(ids, poses, betas, trans) - out.vertices[:, ids]).abs().max() < 1e-5
    full_pose = torch.zeros(3, 52, 3)
    full_pose[:, :22] = poses[:, :22]
    full_pose[:, 22], full_pose[:, 37] = poses[:, 22], poses[:, 23]
    assert torch.allclose(body(full_pose, betas, trans).vertices, out.vertices, atol=1e-6)


def test_smplh_poses_exactly_like_the_body_it_was_made_from(standin, tmp_path):
    """The SMPL-H test body carries the stand-in's pose correctives in SMPL-H's slots (body
    joints 1..21, index fingers 22 and 37): read and applied right, it poses like the stand-in."""
    arrays = smplh_arrays(num_betas=16)
    body = load_body_model(write_npz_atomic(tmp_path / "model.npz", arrays))
    flat = load_body_model(
        write_npz_atomic(tmp_path / "flat.npz", {**arrays, "posedirs": 0 * arrays["posedirs"]})
    )
    poses, betas, trans = _random_inputs(7, 4, 10)
    poses[:, 18] = torch.tensor([0.0, -1.5, 0.0])  # bent elbows, wrists and hands: big correctives
    poses[:, 19] = torch.tensor([0.0, 1.5, 0.0])
    poses[:, 20:24] = 0.8 * torch.sign(poses[:, 20:24])
    expected = standin(poses, betas, trans).vertices
    got = body(poses, torch.nn.functional.pad(betas, (0, 6)), trans).vertices
    assert (got - expected).abs().max() < 1e-5
    assert (flat(poses, betas, trans).vertices - expected).norm(dim=-1).max() > 2e-3
    # the hands' correctives are in the index-finger slots, not SMPL's 22/23
    hands = np.flatnonzero(standin.lbs_weights[:, 22:].sum(1).numpy() > 0.5)
    assert (got[:, hands] - flat(poses, betas, trans).vertices[:, hands]).abs().max() > 1e-4


def test_smplh_finger_correctives_in_full_and_sparse_skinning(tmp_path):
    body = load_body_model(write_npz_atomic(tmp_path / "model.npz", smplh_arrays(num_betas=16)))
    gen = torch.Generator().manual_seed(8)
    pose = 0.4 * torch.randn(2, 52, 3, generator=gen)
    still = pose.clone()
    still[:, 23:37], still[:, 38:] = 0.0, 0.0  # same body, hands and index fingers; others still
    full, full_still = body(pose).vertices, body(still).vertices
    fingers = np.flatnonzero((full - full_still).norm(dim=-1).amax(0).numpy() > 1e-3)
    assert len(fingers) > 100  # the random finger correctives move the skin ...
    ids = np.concatenate([fingers[::7], np.arange(0, body.num_vertices, 97)])
    assert (body.skin_vertices(ids, pose) - full[:, ids]).abs().max() < 1e-5  # ... in both paths


def test_missing_model_folder_names_the_files_it_looked_for(tmp_path):
    with pytest.raises(ModelError) as info:
        load_body_model(tmp_path, gender="female")
    message = str(info.value)
    assert "SMPL_FEMALE.npz" in message and "SMPL_FEMALE.pkl" in message
    assert "basicModel_f_lbs_10_207_0_v1.0.0.pkl" in message


def test_missing_model_file_is_a_library_error(tmp_path):
    with pytest.raises(RBMCapError, match="no such body model"):
        load_body_model(tmp_path / "nope.npz")


def test_wrong_array_shape_names_the_key(tmp_path):
    arrays = dict(np.load(standin_path()))
    arrays["weights"] = arrays["weights"][:, :20]
    path = write_npz_atomic(tmp_path / "bad.npz", arrays)
    with pytest.raises(FormatError, match="'weights' has shape"):
        read_model_arrays(path)


def test_missing_array_names_the_key(tmp_path):
    arrays = dict(np.load(standin_path()))
    del arrays["posedirs"]
    path = write_npz_atomic(tmp_path / "bad.npz", arrays)
    with pytest.raises(FormatError, match="posedirs"):
        load_body_model(path)


def test_truncated_file_is_a_format_error(tmp_path):
    data = standin_path().read_bytes()
    bad = tmp_path / "SMPL_NEUTRAL.npz"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(FormatError, match="not a readable"):
        load_body_model(tmp_path)


def test_out_of_range_vertex_ids_are_refused(standin):
    with pytest.raises(ModelError, match="out of range"):
        standin.skin_vertices([standin.num_vertices], torch.zeros(24, 3))


def test_bad_pose_shape_is_refused(standin):
    with pytest.raises(RBMCapError, match="expected"):
        standin(torch.zeros(23, 3))


def test_sparse_skinning_cache_built_under_inference_mode_still_allows_gradients(tmp_path):
    body = load_body_model("standin")
    ids = [5, 50, 500]
    with torch.inference_mode():
        body.skin_vertices(ids, torch.zeros(2, 24, 3))
    poses = torch.zeros(2, 24, 3, requires_grad=True)
    body.skin_vertices(ids, poses).sum().backward()
    assert poses.grad is not None and torch.isfinite(poses.grad).all()


def _left_knee_offset() -> np.ndarray:
    d = np.zeros((24, 3))
    d[4] = [0.012, -0.02, 0.03]  # left knee
    return d


def test_joint_offsets_move_the_joint_and_turn_the_shin_about_it(standin):
    """Turning only the left knee by R about a centre moved by d: the knee joint is d away, and
    everything it turns (weight w under the knee) lands (I − R) d · w away from where the
    uncorrected body puts it; the rest mesh is unchanged."""
    d = _left_knee_offset()
    moved = standin.with_joint_offsets(d)
    assert torch.allclose(moved(torch.zeros(24, 3)).vertices, standin.v_template, atol=1e-6)
    assert torch.allclose(moved.rest_joints() - standin.rest_joints(), torch.tensor(d).float())
    poses = torch.zeros(24, 3)
    poses[4] = torch.tensor([1.1, 0.2, -0.1])
    rot = roma.rotvec_to_rotmat(poses[4]).double()
    shift = ((torch.eye(3, dtype=torch.float64) - rot) @ torch.tensor(d[4])).float()
    before, after = standin(poses), moved(poses)
    under = standin.lbs_weights[:, [4, 7, 10]].sum(1)  # the knee, ankle and foot
    expected = before.vertices + under[:, None] * shift
    assert (after.vertices - expected).abs().max() < 1e-5
    assert torch.allclose(after.joints[4], before.joints[4] + torch.tensor(d[4]).float(), atol=1e-6)
    assert torch.allclose(after.joints[7], before.joints[7] + shift, atol=1e-6)
    assert torch.allclose(after.joints[1], before.joints[1], atol=1e-6)


def test_joint_offsets_in_sparse_skinning_joints_and_tangents(standin):
    moved = standin.with_joint_offsets(_left_knee_offset())
    poses, betas, trans = _random_inputs(7, 5, standin.num_betas)
    ids = [100, 1200, 3300, 4500]
    full = moved(poses, betas, trans)
    verts, joints = moved.skin_vertices_and_joints(ids, poses, betas, trans)
    assert (full.vertices[:, ids] - verts).abs().max() < 1e-6
    assert torch.allclose(moved.pose_joints(poses, betas, trans)[0], joints, atol=1e-6)
    axes = torch.eye(3).expand(5, 24, 3, 3)
    v, _, j, _ = moved.skin_vertex_tangents(ids, poses, axes, betas, trans)
    assert torch.allclose(v, verts, atol=1e-6) and torch.allclose(j, joints, atol=1e-6)
    assert moved.identity != standin.identity
    assert np.allclose(moved.joint_offsets, _left_knee_offset())
    assert standin.with_joint_offsets(None) is standin
    assert not standin.joint_offsets.any()  # the original is untouched


def test_joint_offsets_of_the_wrong_shape_are_refused(standin):
    with pytest.raises(DataError, match=r"expected \(24, 3\)"):
        standin.with_joint_offsets(np.zeros((23, 3)))


def test_per_pose_joint_offsets_equal_a_corrected_body(standin):
    """Two subjects in one batch, each with its own correction, skin as two corrected bodies."""
    poses, betas, trans = _random_inputs(9, 2, standin.num_betas)
    d = np.stack([_left_knee_offset(), -_left_knee_offset()[::-1]])
    ids = [100, 1200, 3300, 4500]
    axes = torch.eye(3).expand(2, 24, 3, 3)
    both = standin.skin_vertex_tangents(ids, poses, axes, betas, trans, joint_offsets=d)
    for k in range(2):
        one = standin.with_joint_offsets(d[k]).skin_vertex_tangents(
            ids, poses[k], axes[k], betas[k], trans[k]
        )
        for a, b in zip(both, one, strict=True):
            assert torch.allclose(a[k], b, atol=1e-6)


def test_the_joint_model_of_a_corrected_body_poses_its_joints(standin):
    from rbmcap.body.joints import JointModel

    moved = standin.with_joint_offsets(_left_knee_offset())
    poses, betas, trans = _random_inputs(11, 4, standin.num_betas)
    rot = roma.rotvec_to_rotmat(poses)
    expected = moved.pose_joints(poses, betas, trans)[0]
    assert torch.allclose(JointModel.from_body(moved)(rot, betas, trans), expected, atol=1e-5)
