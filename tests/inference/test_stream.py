"""Live streaming: the per-frame fast paths compute what the plain ones do, and a causal model
streamed frame by frame answers exactly as it does offline on the whole sequence."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch
from helpers.observations import random_observations
from helpers.training import small_model

from rbmcap.baseline.init import _nearest_estimated_ancestors
from rbmcap.body.joints import JointModel
from rbmcap.geometry import posed_joints
from rbmcap.geometry.gaps import fill_gaps
from rbmcap.geometry.plates_to_bones import TORSO_CHAIN, KinematicPrior
from rbmcap.geometry.registration import points_rotation
from rbmcap.geometry.rotations import rotation_between, rotmat_slerp
from rbmcap.inference import Predictor
from rbmcap.markers.markerset import load_marker_set
from rbmcap.model.body_facts import marker_description, plate_rest_frames
from rbmcap.skeleton import SMPL_PARENTS


# ------------------------------------------------- the prior's walk, joint by joint (reference)
def _plain_posed_joints(rots, rest):
    pos = [rest[0].expand(*rots.shape[:-3], 3)]
    for j in range(1, 24):
        p = SMPL_PARENTS[j]
        pos.append(pos[p] + (rots[..., p, :, :] @ (rest[j] - rest[p])[..., None])[..., 0])
    return torch.stack(pos, dim=-2)


def _plain_prior(prior: KinematicPrior, bone, pos, valid, fallback=None):
    """The module docstring's rules applied joint by joint, parents first (the walk as it was
    written before it went depth by depth)."""
    eye = torch.eye(3).expand(*bone.shape[:-3], 3, 3)
    seen = valid
    if prior.fill:
        bone, seen = fill_gaps(bone, valid, prior.parents)
    ok = seen[..., None, None]
    own = {j: (bone[..., m, :, :], ok[..., m, :, :]) for j, m in prior.carrier.items()}
    if fallback is None:
        r = prior.root_marker
        fallback = torch.where(ok[..., r, :, :], bone[..., r, :, :], eye)
    root = fallback
    for j in reversed(TORSO_CHAIN):
        if j in own:
            root = torch.where(own[j][1], own[j][0], root)
    where, at, rj = None, [None] * 24, getattr(prior, "rest_joints", None)
    if prior.has_position:
        where = pos - (bone @ prior.rest_offset[..., None])[..., 0]
        pts = [prior.carrier[j] for j in prior.points]
        joints, w = where[..., pts, :], valid[..., pts].float()
        if len(pts) >= 3:
            fit, _ = points_rotation(rj[prior.points], joints, w)
            root = torch.where((w.sum(-1) >= 3)[..., None, None], fit, root)
        guess = joints - (root[..., None, :, :] @ (rj[prior.points] - rj[0])[..., None])[..., 0]
        at[0] = (guess * w[..., None]).sum(-2) / w.sum(-1, keepdim=True).clamp_min(1.0)
        if 0 in prior.carrier:
            m = prior.carrier[0]
            at[0] = torch.where(valid[..., m, None], where[..., m, :], at[0])
    rots = [root] + [eye] * 23
    for j in range(1, 24):
        p = SMPL_PARENTS[j]
        parent = rots[p]
        if at[p] is not None:
            at[j] = at[p] + (parent @ (rj[j] - rj[p])[..., None])[..., 0]
        if j in own:
            rots[j] = torch.where(own[j][1], own[j][0], parent)
            if where is not None:
                m = prior.carrier[j]
                at[j] = torch.where(valid[..., m, None], where[..., m, :], at[j])
        elif j in prior.swing:
            c = prior.carrier[prior.swing[j]]
            turned = (parent @ (rj[prior.swing[j]] - rj[j])[..., None])[..., 0]
            swung = rotation_between(turned, where[..., c, :] - at[j]) @ parent
            rots[j] = torch.where(valid[..., c, None, None], swung, parent)
        elif j in prior.plan:
            below, fraction = prior.plan[j]
            target, visible = own[below]
            rots[j] = torch.where(visible, rotmat_slerp(parent, target, fraction), parent)
        else:
            rots[j] = parent
    rots = torch.stack(rots, dim=-3)
    if where is None:
        return rots, None
    offsets = (_plain_posed_joints(rots, rj) - rj[0])[..., prior.marker_joints, :]
    w = valid.float()[..., None]
    return rots, ((where - offsets) * w).sum(-2) / w.sum(-2).clamp_min(1.0)


def _plates(shape, seed: int, seen: float):
    gen = torch.Generator().manual_seed(seed)
    bone = roma.rotvec_to_rotmat(2 * torch.randn(*shape, 3, generator=gen))
    pos = 0.5 * torch.randn(*shape, 3, generator=gen)
    return bone, pos, torch.rand(*shape, generator=gen) < seen


def _assert_same(got, want):
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w, atol=1e-5, rtol=0)


@pytest.mark.parametrize("markers", ["rbm14", "rbm_a", "rbm_b", "rbm_c", "rbm_d", "rbm_e", "vr3"])
@pytest.mark.parametrize("variant", ["positions", "rotations only", "no gap filling"])
def test_the_depth_by_depth_walk_equals_the_joint_by_joint_one(standin, markers, variant):
    ms = load_marker_set(markers)
    desc = marker_description(ms)
    rest_pos, _, _ = plate_rest_frames(standin, ms)
    rest = JointModel.from_body(standin).joint_template
    kwargs = {"parents": desc["parents"]} if variant != "no gap filling" else {}
    place = (rest_pos, rest) if variant != "rotations only" else ()
    prior = KinematicPrior(desc["joints"], desc["parents"].index(-1), *place, **kwargs)
    n = len(desc["joints"])
    for seed, shape, seen in [(0, (2, 7, n), 0.8), (1, (1, 1, n), 0.9), (2, (30, n), 0.3)]:
        bone, pos, valid = _plates(shape, seed, seen)
        _assert_same(prior(bone, pos, valid), _plain_prior(prior, bone, pos, valid))


@pytest.mark.parametrize(
    "joints",
    [
        [0, 1, 2, 4, 5, 9, 15, 16, 17],
        [1, 2, 9, 12, 18, 19, 20],
        [7, 8, 15, 20, 21],
        list(range(24)),
    ],
)
def test_the_walk_equals_the_joint_by_joint_one_for_the_solvers_start(standin, joints):
    """The solver's start: any plated joints, plates at their joints, a given fallback."""
    rest = JointModel.from_body(standin).joint_template
    prior = KinematicPrior(joints, 0, rest[joints], rest, _nearest_estimated_ancestors(joints))
    bone, pos, valid = _plates((6, len(joints)), 5, 0.7)
    fallback = roma.rotvec_to_rotmat(torch.randn(6, 3, generator=torch.Generator().manual_seed(1)))
    want = _plain_prior(prior, bone, pos, valid, fallback)
    _assert_same(prior(bone, pos, valid, fallback), want)


def test_few_poses_are_posed_exactly_as_many(standin):
    """posed_joints places a stream's frame depth by depth and a batch joint by joint: the same
    sums in the same order, so the same bits."""
    rest = JointModel.from_body(standin).joint_template
    rots = roma.rotvec_to_rotmat(
        torch.randn(300, 24, 3, generator=torch.Generator().manual_seed(2))
    )
    many = posed_joints(rots, rest)
    assert torch.equal(posed_joints(rots[:3], rest), many[:3])
    assert torch.equal(posed_joints(rots[5], rest), many[5])
    assert torch.equal(many, _plain_posed_joints(rots, rest))


# ----------------------------------------------------------------------------- the stream
@pytest.mark.parametrize(
    "overrides",
    [
        (),
        ("plate_fit.enabled=true",),
        ("features=bones", "plate_fit.enabled=true"),
        ("features=reach", "plate_fit.enabled=true"),
    ],
    ids=["kinematic", "kinematic+fit", "bones+fit", "reach+fit"],
)
def test_a_streamed_causal_gru_answers_as_offline_frame_by_frame(standin, overrides):
    """Rotations and translation (whose betas are the running mean over the past, and with the
    plate fit the running fit) to 1e-5, with plates coming and going, through the traced
    frame step."""
    model = small_model(standin, "causal_gru", *overrides).eval()
    with torch.no_grad():  # an output layer that is not zero, so the network's answer counts
        for p in model.net.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    pos, rot, valid = random_observations(40)
    session = Predictor(model).stream()
    streamed = [session.push(pos[i], rot[i], valid[i]) for i in range(40)]
    with torch.no_grad():
        offline = model(*(torch.as_tensor(x)[None] for x in (pos, rot, valid)))
    got_rot = np.stack([r for r, _ in streamed])
    got_trans = np.stack([t for _, t in streamed])
    np.testing.assert_allclose(got_rot, offline["rotmats"][0].numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(got_trans, offline["trans"][0].numpy(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", ["eager", "trace"])
@pytest.mark.parametrize(
    "net, overrides",
    [("causal_gru", ("plate_fit.enabled=true",)), ("causal_gru", ()), ("mlp", ())],
    ids=["gru+fit", "gru", "windowed"],
)
def test_subjects_streamed_together_answer_as_each_streamed_alone(standin, net, overrides, backend):
    """Three subjects' plates stacked into one session: each subject's rotations, translation
    and running betas as its own session's, to 1e-5 (a recurrent step batched, or a windowed
    network's windows)."""
    model = small_model(standin, net, *overrides).eval()
    with torch.no_grad():
        for p in model.net.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    predictor = Predictor(model)
    takes = [random_observations(12, seed=s) for s in range(3)]
    together = predictor.stream(backend=backend, subjects=3)
    alone = [predictor.stream(backend=backend) for _ in takes]
    for i in range(12):
        pos, rot, valid = (np.stack([take[k][i] for take in takes]) for k in range(3))
        rotmats, trans = together.push(pos, rot, valid)
        assert rotmats.shape == (3, 24, 3, 3) and trans.shape == (3, 3)
        for k, (session, take) in enumerate(zip(alone, takes)):
            want_rot, want_trans = session.push(*(x[i] for x in take))
            np.testing.assert_allclose(rotmats[k], want_rot, atol=1e-5, rtol=0)
            np.testing.assert_allclose(trans[k], want_trans, atol=1e-5, rtol=0)
    if together.recurrent:
        np.testing.assert_allclose(together.betas, np.stack([a.betas for a in alone]), atol=1e-6)
        fork = together.fork()  # a fork starts afresh, for as many subjects
        assert fork.subjects == 3 and fork.frames == 0


def _whole_slices(graph) -> int:
    big = 2**63 - 1
    count = 0
    for node in graph.nodes():
        inputs = list(node.inputs())
        if node.kind() == "aten::slice" and len(inputs) == 5:
            start, end, step = (
                v.toIValue() if v.node().kind() == "prim::Constant" else "?" for v in inputs[2:]
            )
            count += start in (0, None) and end in (big, None) and step == 1
    return count


def test_slices_of_whole_dimensions_are_dropped_and_the_answer_kept():
    from rbmcap.inference.stream import drop_whole_slices

    def f(x):
        return x[..., :2] * x[:, :, 1:3] + x[:, 1:2, :2]

    x = torch.randn(3, 4, 5)
    traced = torch.jit.trace(f, x)
    before = _whole_slices(traced.graph)
    assert before > 0
    assert drop_whole_slices(traced.graph) == before
    assert _whole_slices(traced.graph) == 0
    slices = [n for n in traced.graph.nodes() if n.kind() == "aten::slice"]
    assert len(slices) == 4  # :2 twice, 1:3, 1:2
    assert torch.equal(traced(x), f(x))
    assert torch.equal(traced(x + 1), f(x + 1))


def test_the_streams_frame_step_runs_without_whole_slices(standin):
    model = small_model(standin, "causal_gru", "features=bones", "plate_fit.enabled=true").eval()
    pos, rot, valid = random_observations(2)
    session = Predictor(model).stream()
    session.push(pos[0], rot[0], valid[0])
    assert _whole_slices(session._step.graph) == 0


def test_a_malformed_streamed_frame_is_one_data_error_line(standin):
    from rbmcap.errors import DataError

    model = small_model(standin, "causal_gru", "features=bones", "plate_fit.enabled=true").eval()
    session = Predictor(model).stream()
    pos, rot, valid = random_observations(1)
    with pytest.raises(DataError) as err:
        session.push(pos[0, :13], rot[0], valid[0])
    assert str(err.value) == (
        "a streamed frame's pos (13, 3), rot (14, 3, 3), valid (14,): expected (14, 3), "
        "(14, 3, 3), (14,) for marker set 'rbm14'"
    )
    assert session.frames == 0
    session.push(pos[0], rot[0], valid[0])  # the session still streams
    assert session.frames == 1
    two = Predictor(model).stream(subjects=2)
    with pytest.raises(DataError) as err:
        two.push(pos[0], rot[0], valid[0])  # one subject's plates to a stream of two
    assert str(err.value) == (
        "a streamed frame's pos (14, 3), rot (14, 3, 3), valid (14,): expected (2, 14, 3), "
        "(2, 14, 3, 3), (2, 14) for marker set 'rbm14'"
    )
