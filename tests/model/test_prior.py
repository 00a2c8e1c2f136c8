"""The kinematic prior: bone rotations and the pelvis read off the plates."""

from __future__ import annotations

import math

import numpy as np
import roma
import torch
from omegaconf import OmegaConf

from rbmcap.body.joints import JointModel
from rbmcap.body.poses import stride_pose
from rbmcap.geometry import forward_kinematics
from rbmcap.geometry.gaps import fill_gaps, nearest_seen
from rbmcap.geometry.plates_to_bones import KinematicPrior
from rbmcap.markers.markerset import load_marker_set
from rbmcap.markers.synth import Synthesizer
from rbmcap.model.body_facts import marker_description, plate_rest_frames
from rbmcap.skeleton import SMPL_PARENTS


def _rest(standin):
    """The rbm14 set's description, plate rest positions and rotations, and rest joints."""
    markers = load_marker_set("rbm14")
    rest_pos, rest_rot, _ = plate_rest_frames(standin, markers)
    return (
        marker_description(markers),
        rest_pos,
        rest_rot,
        JointModel.from_body(standin).joint_template,
    )


def _observe(standin, poses, trans):
    obs = Synthesizer(standin, "rbm14", "none")(poses.numpy(), trans=trans.numpy())
    desc, rest_pos, rest_rot, joints = _rest(standin)
    prior = KinematicPrior(
        desc["joints"], desc["parents"].index(-1), rest_pos, joints, parents=desc["parents"]
    )
    bone = torch.from_numpy(obs.rot) @ rest_rot.transpose(-1, -2)
    return prior, bone, torch.from_numpy(obs.pos), torch.from_numpy(obs.valid), obs


def _global(standin, poses):
    rest = standin.rest_joints(None)[None].expand(poses.shape[0], 24, 3)
    glob, _ = forward_kinematics(roma.rotvec_to_rotmat(poses), rest, SMPL_PARENTS)
    return glob


def test_plated_bones_and_pelvis_of_a_noise_free_stride(standin):
    poses = torch.as_tensor(stride_pose(), dtype=torch.float32)[None].repeat(3, 1, 1)
    trans = torch.tensor([[0.4, -0.3, 0.9]]).repeat(3, 1)
    prior, bone, pos, valid, obs = _observe(standin, poses, trans)
    rots, pelvis = prior(bone, pos, valid)
    err = torch.rad2deg(roma.rotmat_geodesic_distance(rots, _global(standin, poses)))
    plated = sorted(prior.carrier)
    # a plate is carried by skin, not bone: a few degrees where the skin bends near a joint
    assert float(err[:, plated].max()) < 4.0
    # pelvis and spine follow from the hips and chest (spine2's short bone is pointed at the
    # chest plate's joint estimate, so millimetres there are degrees here)
    assert float(err[:, 0].max()) < 2.0
    assert float(err[:, [3, 6]].max()) < 8.0
    assert float((pelvis - torch.from_numpy(obs.joints[:, 0])).norm(dim=-1).max()) < 0.015


def test_anchored_prior_keeps_plates_and_pelvis_and_hands_the_rest_down(standin):
    """``anchored`` features: the plated bones and the fitted pelvis as ``kinematic``, but spine1-2,
    neck and collars copy their nearest estimated ancestor (no interpolation, no swing)."""
    from rbmcap.model.features import FeatureEncoder

    poses = torch.as_tensor(stride_pose(), dtype=torch.float32)[None].repeat(3, 1, 1)
    trans = torch.tensor([[0.4, -0.3, 0.9]]).repeat(3, 1)
    full, bone, pos, valid, _ = _observe(standin, poses, trans)
    desc, rest_pos, rest_rot, joints = _rest(standin)
    enc = FeatureEncoder("anchored", desc["parents"], rest_rot, desc["joints"], rest_pos, joints)
    want, want_pelvis = full(bone, pos, valid)
    rots, pelvis = enc.prior(bone, pos, valid)
    plated = [0, *sorted(full.carrier)]
    assert torch.allclose(rots[:, plated], want[:, plated], atol=1e-6)
    assert pelvis is not None and float((pelvis - want_pelvis).abs().max()) < 0.02
    # spine1, spine2 copy the pelvis; neck and both collars copy the chest (spine3)
    for joint, ancestor in ((3, 0), (6, 0), (12, 9), (13, 9), (14, 9)):
        assert torch.equal(rots[:, joint], rots[:, ancestor]), joint
    # ``kinematic`` interpolates the stride's bent spine (its neck and collars are nearly
    # straight, so their swings are nearly copies)
    for joint, ancestor in ((3, 0), (6, 0)):
        assert not torch.allclose(want[:, joint], want[:, ancestor], atol=1e-3), joint
    assert set(full.swing) == {6, 12, 13, 14} and not enc.prior.swing and not enc.prior.plan
    assert (
        enc.dim
        == FeatureEncoder(
            "kinematic", desc["parents"], rest_rot, desc["joints"], rest_pos, joints
        ).dim
    )


def test_an_occluded_plate_keeps_its_relative_rotation_from_the_nearest_seen_frame():
    gen = torch.Generator().manual_seed(3)
    bone = roma.rotvec_to_rotmat(torch.randn(5, 2, 3, generator=gen))
    valid = torch.ones(5, 2, dtype=torch.bool)
    valid[2:4, 1] = False  # the child plate is lost in frames 2 and 3
    filled, known = fill_gaps(bone, valid, [-1, 0])
    assert bool(known.all())
    for t, src in ((2, 1), (3, 4)):
        rel = bone[src, 0].T @ bone[src, 1]
        assert torch.allclose(filled[t, 1], bone[t, 0] @ rel, atol=1e-5)
    assert torch.equal(filled[valid], bone[valid])


def test_nearest_seen_frame():
    valid = torch.tensor([[False, True, False, False, False, True], [False] * 6])
    idx, has = nearest_seen(valid)
    assert idx[0].tolist() == [1, 1, 1, 1, 5, 5]
    assert has.all(-1).tolist() == [True, False]
    idx, has = nearest_seen(valid, causal=True)
    assert idx[0].tolist() == [0, 1, 1, 1, 1, 5]
    assert has[0].tolist() == [False] + [True] * 5


def test_untrained_regressor_answers_with_the_prior(standin):
    from helpers.training import compose_train

    from rbmcap.model.body_facts import regressor_config
    from rbmcap.model.regressor import PoseRegressor

    cfg = compose_train("experiment=demo")
    settings = OmegaConf.to_container(cfg.module.model, resolve=True)
    model = PoseRegressor(regressor_config(standin, load_marker_set("rbm14"), **settings)).eval()
    poses = torch.as_tensor(stride_pose(), dtype=torch.float32)[None].repeat(4, 1, 1)
    trans = torch.tensor([[0.1, 0.2, 0.95]]).repeat(4, 1)
    _, _, _, _, obs = _observe(standin, poses, trans)
    with torch.no_grad():
        out = model(*(torch.from_numpy(np.asarray(a))[None] for a in (obs.pos, obs.rot, obs.valid)))
        joints = model.joint_model(out["rotmats"], out["betas"], out["trans"])[0]
    assert float(out["betas"].abs().max()) == 0.0
    err = (joints - torch.from_numpy(obs.joints)).norm(dim=-1)
    assert float(err.mean()) < 0.02, f"prior MPJPE {1e3 * float(err.mean()):.1f} mm"
    angle = math.degrees(
        float(
            roma.rotmat_geodesic_distance(
                out["rotmats"][0, :, 0], roma.rotvec_to_rotmat(poses[:, 0])
            ).max()
        )
    )
    assert angle < 4.0
