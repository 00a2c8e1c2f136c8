"""The closed-form shape and translation fit (rbmcap.model.platefit): exact on its own linear
model, close on the real body, causal when asked, and wired into the network's decoding."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch
from helpers.training import small_model

from rbmcap.geometry import local_to_global
from rbmcap.markers.markerset import load_marker_set
from rbmcap.markers.synth import Synthesizer
from rbmcap.model.body_facts import marker_description, plate_rest_frames
from rbmcap.model.platefit import PlateFit
from rbmcap.motion.procedural.library import generate


@pytest.fixture(scope="module")
def fit(standin):
    markers = load_marker_set("rbm14")
    rest_pos, _, shapedirs = plate_rest_frames(standin, markers)
    from rbmcap.body.joints import JointModel

    jm = JointModel.from_body(standin)
    carriers = marker_description(markers)["joints"]
    return PlateFit(carriers, rest_pos, shapedirs, jm.joint_template, jm.joint_shapedirs, 1e-8)


def _random_pose(t: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return local_to_global(roma.rotvec_to_rotmat(0.4 * torch.randn(t, 24, 3, generator=gen)))


def test_the_fit_recovers_shape_and_translation_of_its_own_model(fit):
    """Plates made by the fit's linear model from known betas and translations, a third of them
    hidden per frame: the fit returns those betas and translations (no prior pull)."""
    gen = torch.Generator().manual_seed(0)
    t = 30
    rots = _random_pose(t, 1)
    betas = torch.randn(fit.num_betas, generator=gen)
    trans = torch.randn(t, 3, generator=gen)
    design = fit.design(rots)
    pos = design[:, 0] + torch.einsum("b,tbnc->tnc", betas, design[:, 1:]) + trans[:, None]
    valid = torch.rand(t, pos.shape[1], generator=gen) > 0.33
    got = fit(rots, pos, valid, torch.zeros(t, fit.num_betas))
    torch.testing.assert_close(got.betas, betas.expand(t, -1), atol=2e-3, rtol=0)
    torch.testing.assert_close(got.trans, trans, atol=2e-4, rtol=0)
    assert got.seen.all()


def test_on_the_body_with_true_rotations_the_fit_finds_the_shape(standin, fit):
    """Noise-free plates synthesised on the stand-in (skinned, so not quite rigid on their
    bones) for a walk with a non-zero shape: with the true rotations the fitted betas and
    translation put the joints within a few millimetres; the zero shape is centimetres off."""
    motion = generate("walk", seed=2, body=standin)
    poses = motion.poses[:60]
    trans = motion.trans[:60]
    betas = np.zeros(standin.num_betas, dtype=np.float32)
    betas[:4] = [1.5, -1.0, 0.8, 0.5]
    obs = Synthesizer(standin, "rbm14", "none")(poses, trans, betas)
    local = roma.rotvec_to_rotmat(torch.as_tensor(poses, dtype=torch.float32))
    rots = local_to_global(local)
    pos = torch.as_tensor(obs.pos)
    valid = torch.as_tensor(obs.valid)
    from rbmcap.body.joints import JointModel

    jm = JointModel.from_body(standin)
    truth = torch.as_tensor(obs.joints)
    got = fit(rots, pos, valid, torch.zeros(60, fit.num_betas))
    err = (jm(local, got.betas, got.trans) - truth).norm(dim=-1).mean()
    zero = fit(rots, pos, valid, torch.zeros(60, fit.num_betas))._replace(
        betas=torch.zeros(60, fit.num_betas)
    )
    placed = pos - fit.design(rots)[:, 0]
    zero_trans = (placed * valid[..., None]).sum(1) / valid.sum(1, keepdim=True)
    err_zero = (jm(local, zero.betas, zero_trans) - truth).norm(dim=-1).mean()
    assert err < 0.004, float(err)
    assert err_zero > 3 * err, (float(err_zero), float(err))


def test_a_causal_fit_uses_only_the_past(fit):
    gen = torch.Generator().manual_seed(4)
    t = 20
    rots = _random_pose(t, 5)
    pos = torch.randn(t, 14, 3, generator=gen)
    valid = torch.ones(t, 14, dtype=torch.bool)
    prior = torch.zeros(t, fit.num_betas)
    a = fit(rots, pos, valid, prior, causal=True)
    pos2 = pos.clone()
    pos2[12:] += 1.0
    b = fit(rots, pos2, valid, prior, causal=True)
    torch.testing.assert_close(a.betas[:12], b.betas[:12])
    torch.testing.assert_close(a.trans[:12], b.trans[:12])
    assert not torch.allclose(a.betas[12:], b.betas[12:])
    window = fit(rots, pos, valid, prior)  # the window's fit: one shape for every frame
    torch.testing.assert_close(window.betas, window.betas[:1].expand(t, -1))
    torch.testing.assert_close(a.betas[-1], window.betas[-1], atol=1e-4, rtol=0)


def test_the_network_decodes_through_the_fit_and_falls_back_without_plates(standin):
    model = small_model(standin, "transformer", "plate_fit.enabled=true").eval()
    gen = torch.Generator().manual_seed(6)
    with torch.no_grad():  # a network whose own answer is not the prior
        for p in model.net.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    t = 12
    pos = torch.randn(1, t, 14, 3, generator=gen)
    rot = roma.rotvec_to_rotmat(torch.randn(1, t, 14, 3, generator=gen))
    valid = torch.ones(1, t, 14, dtype=torch.bool)
    valid[0, 5] = False  # no plate at all in frame 5
    fit = model.plate_fit
    with torch.no_grad():
        out = model(pos, rot, valid)
        model.plate_fit = None
        plain = model(pos, rot, valid)
        # the same fit done in the world on the decoded pose: the network's heading frame,
        # where it ran, changes nothing (the fit is invariant to a per-frame rigid motion)
        world = fit(local_to_global(out["rotmats"][0]), pos[0], valid[0], out["net_betas"][0])
    seen = valid[0].any(-1)
    torch.testing.assert_close(out["trans"][0, seen], world.trans[seen], atol=1e-5, rtol=0)
    torch.testing.assert_close(out["betas"][0], world.betas, atol=1e-4, rtol=0)
    assert not torch.allclose(out["trans"], plain["trans"])
    assert torch.allclose(out["betas"][0, 0], out["betas"][0, -1])
    # where none is seen the network's pelvis stands (its betas shift SMPL's trans only by J0)
    rest = model.joint_model.rest_joints
    pelvis_fit = out["trans"][0, 5] + rest(out["betas"][0, 5])[0]
    pelvis_net = plain["trans"][0, 5] + rest(plain["betas"][0, 5])[0]
    torch.testing.assert_close(pelvis_fit, pelvis_net, atol=1e-5, rtol=0)


@pytest.mark.parametrize("weight", [0.0, -0.01, float("nan")])
def test_the_fit_refuses_a_ridge_that_leaves_its_equations_unsolvable(standin, weight):
    """Without a positive pull to the network's betas, a frame with too few plates seen has no
    unique fit (its solve is not checked)."""
    from rbmcap.errors import ConfigError

    with pytest.raises(ConfigError, match=r"plate_fit\.prior_weight must be > 0"):
        small_model(
            standin,
            "causal_gru",
            "features=bones",
            "plate_fit.enabled=true",
            f"plate_fit.prior_weight={weight}",
        )
