"""Motion → observations: shapes, joints, bad input, chunking, realism end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rbmcap.errors import DataError
from rbmcap.markers.realism import NoiseConfig, RealismConfig
from rbmcap.markers.synth import Synthesizer, check_motion_arrays, synthesize


@pytest.fixture(scope="module")
def body():
    from rbmcap.body import load_body_model

    return load_body_model("standin")


@pytest.fixture(scope="module")
def synth(body):
    return Synthesizer(body, "rbm14")


def _motion(frames: int = 50, seed: int = 0):
    rng = np.random.default_rng(seed)
    t = np.arange(frames)[:, None, None] / 60.0
    poses = 0.4 * np.sin(
        2 * np.pi * rng.uniform(0.2, 1.5, (1, 24, 3)) * t + rng.uniform(0, 6, (1, 24, 3))
    )
    trans = np.cumsum(rng.normal(0, 0.01, (frames, 3)), 0)
    return poses, trans, rng.normal(0, 1, 16)


def test_observation_shapes_dtypes_and_joints(body, synth):
    poses, trans, betas = _motion()
    obs = synth(poses, trans, betas)
    assert obs.pos.shape == (50, 14, 3) and obs.pos.dtype == np.float32
    assert obs.rot.shape == (50, 14, 3, 3) and obs.rot.dtype == np.float32
    assert obs.valid.shape == (50, 14) and obs.valid.dtype == bool and obs.valid.all()
    ref = body(poses.astype(np.float32), betas[:10].astype(np.float32), trans.astype(np.float32))
    np.testing.assert_allclose(obs.joints, ref.joints.numpy(), atol=1e-5)


def test_flat_72_poses_are_accepted(synth):
    poses, trans, betas = _motion(10)
    a = synth(poses, trans, betas)
    b = synth(poses.reshape(10, 72), trans, betas)
    np.testing.assert_array_equal(a.pos, b.pos)


def test_results_do_not_depend_on_the_chunk_size(body):
    # to float precision: vectorised kernels may round the last bit differently in a short chunk
    # (the chunk size is a fixed constant, so a dataset's bytes are reproducible)
    poses, trans, betas = _motion(37)
    whole = Synthesizer(body, "rbm_d", "harsh")(poses, trans, betas, key="k", seed=3)
    chunked = Synthesizer(body, "rbm_d", "harsh", chunk_frames=8)(
        poses, trans, betas, key="k", seed=3
    )
    np.testing.assert_allclose(chunked.pos, whole.pos, atol=1e-5)
    np.testing.assert_allclose(chunked.rot, whole.rot, atol=1e-5)
    np.testing.assert_array_equal(chunked.valid, whole.valid)


def test_motion_with_nan_is_one_clear_error(synth):
    poses, trans, betas = _motion(20)
    poses[7, 3, 1] = np.nan
    with pytest.raises(DataError, match=r"walk: poses has NaN .* frame 7"):
        synth(poses, trans, betas, key="walk")
    poses, trans, betas = _motion(20)
    trans[2] = np.inf
    with pytest.raises(DataError, match=r"trans has NaN"):
        synth(poses, trans, betas)


@pytest.mark.parametrize(
    ("poses", "trans", "message"),
    [
        (np.zeros((5, 23, 3)), np.zeros((5, 3)), r"expected \(T, 24, 3\)"),
        (np.zeros((0, 24, 3)), np.zeros((0, 3)), "no frames"),
        (np.zeros((5, 24, 3)), np.zeros((4, 3)), r"trans of shape \(4, 3\)"),
    ],
)
def test_malformed_motion_arrays_are_data_errors(poses, trans, message):
    with pytest.raises(DataError, match=message):
        check_motion_arrays(poses, trans)


def test_point_marker_sets_give_positions_and_identity_rotations(body):
    poses, trans, betas = _motion(6)
    obs = synthesize(body, poses, trans, betas, markers="moshpp53")
    assert obs.pos.shape == (6, 53, 3)
    np.testing.assert_array_equal(obs.rot, np.broadcast_to(np.eye(3), obs.rot.shape))
    skin = body(poses.astype(np.float32), betas[:10].astype(np.float32), trans.astype(np.float32))
    ids = Synthesizer(body, "moshpp53").vertex_ids
    dist = np.linalg.norm(obs.pos - skin.vertices[:, ids].numpy(), axis=-1)
    np.testing.assert_allclose(dist, 0.0095, atol=1e-5)


def test_realism_same_seed_same_bytes(body):
    poses, trans, betas = _motion(40)
    s = Synthesizer(body, "rbm14", "realistic")
    a = s(poses, trans, betas, seed=1, key="walk")
    b = s(poses, trans, betas, seed=1, key="walk")
    c = s(poses, trans, betas, seed=2, key="walk")
    assert a.pos.tobytes() == b.pos.tobytes() and a.rot.tobytes() == b.rot.tobytes()
    assert not np.array_equal(a.pos, c.pos)


def test_measured_noise_of_synthesised_plates_matches_the_configuration(body, synth):
    poses, trans, betas = _motion(600, seed=4)
    cfg = RealismConfig(name="noise", noise=NoiseConfig(position_mm=0.8, rotation_deg=0.5))
    clean = synth(poses, trans, betas)
    noisy = Synthesizer(body, "rbm14", cfg)(poses, trans, betas, key="n")
    err_mm = (noisy.pos - clean.pos).astype(np.float64) * 1e3
    assert abs(err_mm.std() - 0.8) < 0.08
    rel = np.einsum("tnij,tnkj->tnik", noisy.rot.astype(np.float64), clean.rot)
    angle = np.rad2deg(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))
    # the angle of an isotropic Gaussian rotation vector is Maxwell-distributed: rms = σ√3
    assert abs(np.sqrt(np.mean(angle**2)) / np.sqrt(3) - 0.5) < 0.05


def test_chunk_iteration_leaves_autograd_alone(synth):
    poses, trans, betas = _motion(10)
    for _, _obs in synth.chunks(poses, trans, betas):
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
