"""Live refinement (rbmcap/inference/refine.py, rbmcap/baseline/frame.py): solver steps after
the network's pose within a time budget, anytime, warm-started, causal."""

from __future__ import annotations

import math

import numpy as np
import pytest
import roma
import torch
from helpers.live import synthetic_take

import rbmcap.inference.refine as refine_module
from rbmcap.baseline import default_pose_prior, load_solver_config
from rbmcap.baseline.frame import FrameTerms, rotation_residual
from rbmcap.baseline.objective import predict_markers
from rbmcap.errors import ConfigError
from rbmcap.geometry.rotations import rotmat_geodesic_angle
from rbmcap.inference import Predictor
from rbmcap.inference.capture import checkpoint_body
from rbmcap.inference.refine import KernelCost, RefineOptions, Refiner

FRAMES = 24
DETERMINISTIC = RefineOptions(60.0, max_iterations=2)
"""Two steps a frame whatever they cost: the same answer every run."""


@pytest.fixture(scope="module")
def predictor():
    return Predictor.from_checkpoint("standin-rbm14-stream")


@pytest.fixture(scope="module")
def take():
    """A realistic synthetic walk at the model's rate."""
    return synthetic_take(FRAMES, fps=60.0)


def streamed(session, take, frames: int = FRAMES):
    """Each frame's (rotmats, trans) from ``session``."""
    return [session.push(take.pos[t], take.rot[t], take.valid[t]) for t in range(frames)]


def plate_error(predictor, answers, take, betas) -> float:
    """Mean distance (m) of the body's plates, posed by ``answers`` with ``betas``, from the
    observed ones."""
    body = checkpoint_body(predictor.body_id)
    refiner = Refiner(predictor, RefineOptions(0.0))
    rotmats = torch.as_tensor(np.stack([a[0] for a in answers]))
    trans = torch.as_tensor(np.stack([a[1] for a in answers]))
    topology = refiner._modules[0].terms.topology
    with torch.no_grad():
        pos, _ = predict_markers(body, topology, rotmats, torch.as_tensor(betas), trans)
    n = len(answers)
    seen = torch.as_tensor(take.valid[:n])
    return float((pos - torch.as_tensor(take.pos[:n])).norm(dim=-1)[seen].mean())


def test_a_budget_of_zero_gives_the_network_answer_exactly(predictor, take):
    plain = streamed(predictor.stream(), take)
    for refine in (0.0, RefineOptions(1.0, max_iterations=0)):
        session = predictor.stream(refine=refine)
        for (r0, t0), (r1, t1) in zip(plain, streamed(session, take)):
            np.testing.assert_array_equal(r0, r1)
            np.testing.assert_array_equal(t0, t1)
        assert session.refine_stats.frames == FRAMES
        assert session.refine_stats.iterations == 0


def test_a_generous_budget_brings_the_body_closer_to_the_plates(predictor, take):
    plain, session = predictor.stream(), predictor.stream(refine=DETERMINISTIC)
    network = plate_error(predictor, streamed(plain, take), take, plain.betas)
    refined = plate_error(predictor, streamed(session, take), take, session.betas)
    assert session.refine_stats.iterations == 2 * FRAMES
    # the plates of the realistic take sit off their places on the body (as strapped): the
    # refined body cannot meet them, only come closer
    assert refined < 0.9 * network, (refined, network)


def test_refinement_is_causal(predictor, take):
    """A frame's answer is the same however many frames come after it."""
    short = streamed(predictor.stream(refine=DETERMINISTIC), take, 10)
    long = streamed(predictor.stream(refine=DETERMINISTIC), take, FRAMES)
    for (r0, t0), (r1, t1) in zip(short, long[:10]):
        np.testing.assert_array_equal(r0, r1)
        np.testing.assert_array_equal(t0, t1)


TICK = 2.0**-10
"""What the test clock moves each time it is read (s; a binary fraction, so that sums of
ticks compare exactly)."""


class Clock:
    """A clock that moves one :data:`TICK` each time it is read: every kernel call then costs a
    tick."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += TICK
        return self.t


@pytest.mark.parametrize("backend", ["eager", "trace"])
def test_steps_grow_with_the_budget_and_a_frame_keeps_to_it(predictor, take, monkeypatch, backend):
    """On a clock where each call costs a tick (the start, a step, the last evaluation and the
    rest of the frame: a tick each), a budget of B ticks leaves room for B − 3 steps; a refiner
    that ignored its deadline would take all 20 it may."""
    monkeypatch.setattr(refine_module, "_now", Clock())
    for ticks in (2, 4, 5, 7):
        session = predictor.stream(
            backend=backend, refine=RefineOptions(ticks * TICK, max_iterations=20)
        )
        for t in range(4):
            session.push(take.pos[t], take.rot[t], take.valid[t])
            stats = session.refine_stats
            assert stats.last_iterations == max(ticks - 3, 0)
            assert stats.last_seconds <= ticks * TICK


def test_a_late_network_step_leaves_refinement_less_time(predictor, take, monkeypatch):
    """The budget counts from where the network's step usually ends: a step two ticks late
    leaves two steps fewer, and the frame ends when it would have."""
    clock = Clock()
    monkeypatch.setattr(refine_module, "_now", clock)
    session = predictor.stream(refine=RefineOptions(8 * TICK, max_iterations=20))
    for t in range(3):
        session.push(take.pos[t], take.rot[t], take.valid[t])
        assert session.refine_stats.last_iterations == 5
    network = session._network

    def late(*args):
        clock.t += 2 * TICK
        return network(*args)

    monkeypatch.setattr(session, "_network", late)
    session.push(take.pos[3], take.rot[3], take.valid[3])
    assert session.refine_stats.last_iterations == 3


def test_a_real_budget_is_kept_and_more_time_buys_more_steps(predictor, take):
    """On the real clock 30 ms buy more steps than 5 ms, and a typical frame keeps to its
    budget (the deadline itself is checked on the test clock above: here the thread may be
    preempted by whatever else the machine runs, which no deadline can prevent)."""
    steps = {}
    for budget in (0.005, 0.030):
        session = predictor.stream(refine=budget)
        spent = []
        for t in range(FRAMES):
            session.push(take.pos[t], take.rot[t], take.valid[t])
            spent.append(session.refine_stats.last_seconds)
        assert np.median(spent) < 2 * budget, spent
        steps[budget] = session.refine_stats.iterations
    assert steps[0.030] > steps[0.005], steps


def test_refinement_holds_the_betas_it_is_given(predictor, take):
    """Given betas (a calibration's) replace the stream's running ones in the refinement: a
    taller body is fitted to the same plates with its pelvis elsewhere."""
    running, given = (predictor.stream(refine=DETERMINISTIC) for _ in range(2))
    tall = np.zeros(10, np.float32)
    tall[0] = 2.0
    for t in range(4):
        _, t0 = running.push(take.pos[t], take.rot[t], take.valid[t])
        _, t1 = given.push(take.pos[t], take.rot[t], take.valid[t], betas=tall)
    assert np.abs(t1 - t0).max() > 1e-3


def test_a_subject_that_sees_no_plate_keeps_the_network_answer(predictor, take):
    hidden = np.zeros_like(take.valid[0])
    plain, session = predictor.stream(), predictor.stream(refine=DETERMINISTIC)
    for t in range(3):
        plain.push(take.pos[t], take.rot[t], take.valid[t])
        session.push(take.pos[t], take.rot[t], take.valid[t])
    r0, t0 = plain.push(take.pos[3], take.rot[3], hidden)
    r1, t1 = session.push(take.pos[3], take.rot[3], hidden)
    np.testing.assert_array_equal(r0, r1)
    np.testing.assert_array_equal(t0, t1)


def test_subjects_refined_together_answer_as_each_alone(predictor, take):
    together = predictor.stream(subjects=2, refine=DETERMINISTIC)
    alone = [predictor.stream(refine=DETERMINISTIC) for _ in range(2)]
    shift = np.float32([1.5, 0.0, 0.0])
    body = checkpoint_body(predictor.body_id)
    for t in range(8):
        pos = np.stack([take.pos[t], take.pos[t] + shift])
        rot, valid = np.stack([take.rot[t]] * 2), np.stack([take.valid[t]] * 2)
        rotmats, trans = together.push(pos, rot, valid)
        for k, session in enumerate(alone):
            r, tr = session.push(pos[k], rot[k], valid[k])
            with torch.no_grad():
                a, _ = body.pose_joints(
                    torch.as_tensor(rotmats[k]), None, torch.as_tensor(trans[k])
                )
                b, _ = body.pose_joints(torch.as_tensor(r), None, torch.as_tensor(tr))
            assert float((a - b).norm(dim=-1).max()) < 1e-3


def test_a_forked_stream_shares_the_refiner_and_starts_afresh(predictor, take):
    session = predictor.stream(refine=DETERMINISTIC)
    first = streamed(session, take, 5)
    fork = session.fork()
    assert fork.refiner is session.refiner
    again = streamed(fork, take, 5)
    for (r0, t0), (r1, t1) in zip(first, again):
        np.testing.assert_array_equal(r0, r1)
        np.testing.assert_array_equal(t0, t1)


def test_a_step_lowers_the_frame_objective(predictor, take):
    """One Levenberg–Marquardt step from the network's pose lowers E, and its Jacobian (forward
    differences along the skin's and the joints' tangents) matches autograd's."""
    refiner = Refiner(predictor, RefineOptions(0.0))
    terms: FrameTerms = refiner._modules[0].terms
    start, step, keep = refiner._modules
    st = refiner.state()
    net = predictor.stream()
    rotmats, trans = (
        torch.as_tensor(a)[None] for a in net.push(take.pos[0], take.rot[0], take.valid[0])
    )
    betas = torch.as_tensor(net.betas)[None]
    offsets = torch.zeros(1, 24, 3)
    offsets[0, 4] = torch.tensor([0.01, -0.02, 0.015])  # a subject's left knee moved
    obs = (
        betas,
        offsets,
        torch.as_tensor(take.pos[0])[None],
        torch.as_tensor(take.rot[0])[None],
        torch.as_tensor(take.valid[0])[None],
        st.context,
        st.solved,
        *refiner._no_centres,
        refiner._no_hinges,
    )
    with torch.no_grad():
        x, t, base, e0, plates = start(st.x, st.trans, st.base, st.has_prev, rotmats, trans, *obs)
        inf = torch.full_like(e0, math.inf)
        damping = torch.full_like(e0, 1e-4)
        x1, t1, _, *best = step(x, t, damping, inf, x, t, plates, base, *obs)
        e1 = keep(x1, t1, *best, base, rotmats, trans, st.solved, *obs)[0]
    assert float(e1) < float(e0) - 1.0

    def residuals(xt):
        return terms.residuals(xt[None, None, :72], xt[None, None, 72:], base, *obs)[0][0, 0]

    # every joint drawn to a centre, so that the joints' rows are checked too
    obs = (*obs[:7], torch.zeros(1, 24, 3), torch.ones(1, 24, dtype=torch.bool), obs[-1])
    exact = torch.autograd.functional.jacobian(residuals, torch.cat([x[0], t[0]]))
    with torch.no_grad():
        # the pose and a step along each unknown
        r, _ = terms.residuals_of(*step._skin(x, t, base, obs[0], obs[1]), *obs[2:-1])
    differences = (r[0, 1:] - r[0, 0]).T / step.step
    scale = 0.01 * float(exact.abs().max())
    assert float((differences - exact[:, :72]).abs().max()) < scale
    joints = slice(-72, None)  # the joints' rows alone, at their own scale
    scale = 0.01 * float(exact[joints].abs().max())
    assert float(exact[joints, :72].abs().max()) > 0
    assert float((differences[joints] - exact[joints, :72]).abs().max()) < scale


def test_the_steps_translation_jacobian_is_exact_joint_centres_included(predictor, take):
    """∂r/∂t, which a step takes analytically, is autograd's: plate positions where seen,
    accelerations where smoothing, joint centres where seen (some plates and centres unseen)."""
    refiner = Refiner(predictor, RefineOptions(0.0))
    terms: FrameTerms = refiner._modules[0].terms
    step = refiner._modules[1]
    net = predictor.stream()
    rotmats, trans = (
        torch.as_tensor(a)[None] for a in net.push(take.pos[0], take.rot[0], take.valid[0])
    )
    valid = torch.as_tensor(take.valid[0])[None].clone()
    valid[0, :3] = False
    seen = torch.zeros(1, 24, dtype=torch.bool)
    seen[0, 4:12] = True
    gen = torch.Generator().manual_seed(0)
    centres = trans[:, None] + 0.3 * torch.randn(1, 24, 3, generator=gen)
    context = torch.as_tensor(take.pos[:2])[None].clone()
    obs = (
        torch.as_tensor(net.betas)[None],
        torch.zeros(1, 24, 3),
        torch.as_tensor(take.pos[0])[None],
        torch.as_tensor(take.rot[0])[None],
        valid,
        context,
        torch.ones(1),
        centres,
        seen,
        torch.zeros(1, 23, 3, 3),
    )
    x = torch.cat([torch.zeros(3), roma.rotmat_to_rotvec(rotmats[0, 1:]).flatten()])
    base = rotmats[:, 0]

    def residuals(t):
        return terms.residuals(x[None, None], t[None, None], base, *obs)[0][0, 0]

    exact = torch.autograd.functional.jacobian(residuals, trans[0])
    with torch.no_grad():
        analytic = step.trans_jacobian(valid, obs[6], seen)[0]
    assert analytic.shape == exact.shape == (terms.residual_count, 3)
    torch.testing.assert_close(analytic, exact, atol=1e-2, rtol=1e-4)
    sigma_m = load_solver_config("default").weights.joints_sigma_mm * 1e-3
    # the joint rows: the identity over σ_j for each of the 8 centres seen, zero elsewhere
    assert float(analytic[-72:].abs().sum()) == pytest.approx(8 * 3 / sigma_m, rel=1e-5)


def test_rotation_residual_is_the_geodesic_angle_along_the_relative_axis():
    gen = torch.Generator().manual_seed(0)
    a = torch.linalg.qr(torch.randn(50, 3, 3, generator=gen))[0]
    a = a * torch.linalg.det(a)[:, None, None].sign()
    b = torch.linalg.qr(torch.randn(50, 3, 3, generator=gen))[0]
    b = b * torch.linalg.det(b)[:, None, None].sign()
    r = rotation_residual(a, b)
    torch.testing.assert_close(r.norm(dim=-1), rotmat_geodesic_angle(a, b), atol=1e-5, rtol=0)
    torch.testing.assert_close(rotation_residual(a, a), torch.zeros(50, 3), atol=1e-6, rtol=0)


def test_frame_terms_refuse_a_prior_over_other_joints(predictor):
    prior = default_pose_prior()
    prior.joints = tuple(range(2, 25))
    body = checkpoint_body(predictor.body_id)
    refiner = Refiner(predictor, RefineOptions(0.0))
    topology = refiner._modules[0].terms.topology
    with pytest.raises(ConfigError, match=r"joints 1\.\.23"):
        FrameTerms(body, topology, load_solver_config("default").weights, prior, 60.0)


@pytest.mark.parametrize("budget", [-0.001, float("nan"), "4ms", True])
def test_a_budget_that_is_not_seconds_is_refused(budget):
    with pytest.raises(ConfigError, match="expected seconds ≥ 0"):
        RefineOptions(budget)


def test_a_cost_estimate_ignores_a_lone_slow_call_and_recovers_from_a_slow_spell():
    cost = KernelCost()
    cost.seed([1e-3] * KernelCost.WINDOW)
    cost.observe(0.05)
    assert cost.value == pytest.approx(1e-3)
    for _ in range(KernelCost.WINDOW):
        cost.observe(0.01)
    assert cost.value == pytest.approx(0.01)
    for _ in range(KernelCost.WINDOW // 2 + 1):
        cost.idle()
    assert cost.value == pytest.approx(1e-3)


@pytest.mark.slow  # compiles three kernels (about a minute each the first time)
def test_compiled_kernels_refine_as_the_eager_ones(predictor, take):
    """The compiled kernels (each input a tensor of its own when exported: two inputs that were
    one tensor in the example would be read as one) answer as the eager modules do."""
    answers = {
        backend: streamed(predictor.stream(backend=backend, refine=DETERMINISTIC), take, 8)
        for backend in ("eager", "compiled")
    }
    for (r0, t0), (r1, t1) in zip(answers["eager"], answers["compiled"]):
        np.testing.assert_allclose(r0, r1, atol=2e-3)
        np.testing.assert_allclose(t0, t1, atol=2e-4)


def test_a_hinges_term_is_its_turn_off_the_axis_over_sigma_squared(predictor):
    """E_h = Σ ‖θ_h − (θ_h·a) a‖² / σ_h², built from the axis alone, and its Hessian's quadratic
    form gives it back; joints that are not hinges add nothing."""
    options = RefineOptions(
        0.0, config=load_solver_config("default", {"weights.hinge_sigma_deg": 2.0})
    )
    terms: FrameTerms = Refiner(predictor, options)._modules[0].terms
    axis = np.array([0.9, 0.3, -0.3]) / np.linalg.norm([0.9, 0.3, -0.3])
    hinges = torch.zeros(1, 23, 3, 3, dtype=torch.float64)
    hinges[0, 4 - 1] = torch.as_tensor(np.eye(3) - np.outer(axis, axis))  # the left knee
    gen = torch.Generator().manual_seed(1)
    pose = 0.3 * torch.randn(1, 69, generator=gen, dtype=torch.float64)
    knee = pose[0, 9:12].numpy()
    off = knee - (knee @ axis) * axis
    expected = float(off @ off) / np.radians(2.0) ** 2
    e, hess = terms.hinge_terms(pose.float(), hinges.float())
    assert float(e[0]) == pytest.approx(expected, rel=1e-4)
    assert float(pose.float()[0] @ hess[0] @ pose.float()[0]) == pytest.approx(expected, rel=1e-4)
    pose[0, 9:12] = torch.as_tensor(1.3 * axis)  # a turn about the axis alone costs nothing
    assert float(terms.hinge_terms(pose.float(), hinges.float())[0][0]) < 1e-5 * expected
