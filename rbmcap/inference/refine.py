"""Live refinement: each streamed frame's network pose, then as many solver steps as the frame's
time budget leaves.

After the network has posed a frame, :class:`Refiner` runs Levenberg–Marquardt steps
(:class:`rbmcap.baseline.frame.LMStep`) of the solver's objective for that frame (the plates'
6-DoF residuals, the pose prior, and the acceleration of the plates over this frame and the two
refined before it) with the betas held at the stream's, until a wall-clock deadline:

- **anytime**: the budget is a time, not a count. Before each step the refiner checks that the
  step, the last evaluation and the rest of the frame's work still fit before the deadline,
  from what each has cost on this machine (:class:`KernelCost`: timed while warming up, then
  at every call); it returns the best iterate it evaluated. A budget of 0, or one that leaves
  no room for a step, returns the network's answer unchanged.
- **warm-started**: a frame starts from the previous frame's refined answer (pose and
  translation; the one this stream, a phase of a live source, refined before) or from the
  network's answer, whichever the objective prefers (:class:`~rbmcap.baseline.frame.FrameStart`,
  both in one evaluation): from one frame to the next the refined answer moves less than the
  network's (whose own frame-to-frame jitter the solve would otherwise have to undo), while
  the network's answer takes over where the previous one no longer fits (a fast movement, a
  plate back in view). The first frame starts from the network's answer.
- **causal**: only this frame's plates and the two refined frames before it enter; a frame's
  answer never depends on a later one.
- **drawn to measured joints**: where a subject's calibration measured joint centres from the
  plates' motion (:mod:`rbmcap.calibrate.functional`), the caller gives the centres this frame's
  plates put them at, and the body's joints are drawn to them (the solver's joint-centre term,
  ``weights.joints_sigma_mm``); a subject without them gets none (the term is then zero).

Several subjects are refined in one batched step (their problems are independent, their steps
share one evaluation of the body). A subject that sees no plate in a frame keeps the network's
answer. The step runs as the stream's ``backend`` says (eager, a TorchScript trace, or compiled
ahead of time, :mod:`rbmcap.inference.compiled`).
"""

from __future__ import annotations

import collections
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from rbmcap.baseline.config import SolverConfig, load_solver_config
from rbmcap.baseline.frame import (
    JOINTS,
    UNKNOWNS,
    FrameFinish,
    FrameStart,
    FrameTerms,
    LMStep,
)
from rbmcap.baseline.prior import GaussianMixturePrior, default_pose_prior, load_pose_prior
from rbmcap.calibrate.functional import hinge_axes, rest_plate_rotations
from rbmcap.errors import ConfigError
from rbmcap.inference.capture import checkpoint_body
from rbmcap.inference.compiled import compiled_step, frozen
from rbmcap.markers.markerset import load_marker_set
from rbmcap.markers.plates import plate_topology

_now = time.perf_counter
"""The clock deadlines and costs are read on (seconds)."""


def clock() -> float:
    """Now on the clock refinement reads its deadlines and costs on (seconds): what a caller
    gives :meth:`Refiner.refine` as ``started``."""
    return _now()


DAMPING = (1e-4, 10.0, 1e4)
"""Levenberg–Marquardt damping λ: its first value each frame, the factor it grows by when a step
raised the objective (shrinking by the same after a step that lowered it, not below the first
value), and its cap."""

WARM_UP_CALLS = 8
"""Untimed calls of each kernel when the refiner is built (they pay allocation and a trace's
optimisation), before :attr:`KernelCost.WINDOW` timed ones seed its cost estimate."""


@dataclass(frozen=True)
class RefineOptions:
    """How a stream refines its frames.

    Attributes:
        budget_s: wall-clock seconds a frame's refinement may take (after the network's step);
            0 returns the network's answer.
        max_iterations: at most this many steps a frame (None: as many as the budget allows;
            a cap with an unbounded budget gives a deterministic answer).
        prior: the pose prior (a :class:`GaussianMixturePrior` or its ``.npz``; None: the one
            shipped with rbmcap).
        config: the solver configuration whose weights make the objective (a
            ``conf/baseline`` name or YAML path, or a :class:`SolverConfig`).

    Raises:
        ConfigError: a budget that is negative or not a number, a cap below 0.
    """

    budget_s: float
    max_iterations: int | None = None
    prior: GaussianMixturePrior | str | Path | None = None
    config: SolverConfig | str | Path = "default"

    def __post_init__(self) -> None:
        b = self.budget_s
        if isinstance(b, bool) or not isinstance(b, int | float) or not b >= 0:
            raise ConfigError(f"refine budget {b!r}: expected seconds ≥ 0 (e.g. 0.004)")
        if self.max_iterations is not None and self.max_iterations < 0:
            raise ConfigError(f"refine max_iterations {self.max_iterations}: expected ≥ 0")

    @classmethod
    def of(cls, refine: RefineOptions | float | None) -> RefineOptions | None:
        """``refine`` as options: seconds become a budget, None stays None."""
        if refine is None or isinstance(refine, RefineOptions):
            return refine
        return cls(budget_s=refine)


@dataclass
class RefineStats:
    """What a stream's refinement did: frames it was given, of them those it took a step on
    (``stepped``; the others got the network's answer), steps taken, seconds spent (after the
    network), and the last frame's steps and seconds."""

    frames: int = 0
    stepped: int = 0
    iterations: int = 0
    seconds: float = 0.0
    last_iterations: int = 0
    last_seconds: float = 0.0

    def add(self, iterations: int, seconds: float) -> None:
        self.frames += 1
        self.stepped += iterations > 0
        self.iterations += iterations
        self.seconds += seconds
        self.last_iterations, self.last_seconds = iterations, seconds


@dataclass
class RefineState:
    """One stream's refinement memory, per subject: the previous frame's answer as unknowns
    (x (S, 72) with ω zero, translation (S, 3), global orientation (S, 3, 3)) and whether there
    is one (S,); the predicted plate positions of the last two refined frames (S, 2, N, 3) and
    how many of them hold a frame (S,); and the stream's :class:`RefineStats`."""

    x: torch.Tensor
    trans: torch.Tensor
    base: torch.Tensor
    has_prev: torch.Tensor
    context: torch.Tensor
    solved: torch.Tensor
    stats: RefineStats = field(default_factory=RefineStats)


class Refiner:
    """Refines S subjects' frames within a time budget (see the module docstring). One refiner
    serves every stream forked from a session (the phases of a live source): its kernels and
    cost estimates are shared, each stream keeps its own :class:`RefineState`.

    Args:
        predictor: the :class:`~rbmcap.inference.Predictor` whose streams it refines (its
            marker set, body and frame rate).
        options: the budget and the objective.
        subjects: subjects refined together.
        backend: how the kernels run: 'eager', 'trace' or 'compiled'
            (:data:`rbmcap.inference.stream.BACKENDS`).
        body: the body model (default: the predictor's checkpoint body).

    Raises:
        ConfigError: a marker set without plate orientations; a prior not over joints 1..23.
    """

    def __init__(
        self,
        predictor,
        options: RefineOptions,
        subjects: int = 1,
        backend: str = "trace",
        body=None,
    ) -> None:
        self.options = options
        self.subjects = int(subjects)
        self.budget_s = float(options.budget_s)
        self.backend = backend
        config = options.config
        if not isinstance(config, SolverConfig):
            config = load_solver_config(config)
        markers = load_marker_set(predictor.marker_set)
        if not markers.is_rbm:
            raise ConfigError(f"refinement needs 6-DoF plates; {markers.name!r} has points")
        body = checkpoint_body(predictor.body_id) if body is None else body
        prior = options.prior
        prior = default_pose_prior() if prior is None else prior
        if not isinstance(prior, GaussianMixturePrior):
            prior = load_pose_prior(prior)
        vertex_ids = markers.resolve(body)
        topology = plate_topology(
            body.faces.cpu().numpy(), body.v_template.detach().cpu().numpy(), vertex_ids
        )
        ref = body.v_template
        self.dtype, self.device = ref.dtype, ref.device
        self.body, self.markers = body, markers
        self.plates, self.num_betas = len(vertex_ids), body.num_betas
        s, kw = self.subjects, {"dtype": self.dtype, "device": self.device}
        # a frame without measured joints: every centre unseen (the term is zero)
        self._no_centres = (
            torch.zeros(s, JOINTS, 3, **kw),
            torch.zeros(s, JOINTS, dtype=torch.bool, device=self.device),
        )
        # no subject's joint correction: the joints where the body's regressor puts them
        self._no_offsets = torch.zeros(s, JOINTS, 3, **kw)
        # no subject's hinges: every body joint a ball joint
        self._no_hinges = torch.zeros(s, JOINTS - 1, 3, 3, **kw)
        terms = FrameTerms(body, topology, config.weights, prior, float(predictor.fps))
        self._modules = (
            FrameStart(terms),
            LMStep(terms, *DAMPING),
            FrameFinish(terms),
        )
        self._start = self._step = self._keep = None
        # what each part of a frame costs here: the start, a step, the last evaluation, and
        # the rest (conversions, bookkeeping)
        self.cost = {name: KernelCost() for name in ("start", "step", "keep", "rest")}
        self.network = KernelCost()  # the network's step before a frame's refinement
        if self.budget_s > 0 and options.max_iterations != 0:
            self._build()

    # -------------------------------------------------------------------------- kernels
    def state(self) -> RefineState:
        """A fresh stream's memory."""
        s, n, kw = self.subjects, self.plates, {"dtype": self.dtype, "device": self.device}
        return RefineState(
            x=torch.zeros(s, UNKNOWNS, **kw),
            trans=torch.zeros(s, 3, **kw),
            base=torch.eye(3, **kw).expand(s, 3, 3).contiguous(),
            has_prev=torch.zeros(s, dtype=torch.bool, device=self.device),
            context=torch.zeros(s, 2, n, 3, **kw),
            solved=torch.zeros(s, **kw),
        )

    def _examples(self):
        """Example inputs of the three kernels: S subjects at rest, every plate seen."""
        st = self.state()
        s, n, kw = self.subjects, self.plates, {"dtype": self.dtype, "device": self.device}
        eye = torch.eye(3, **kw)
        obs = (
            torch.zeros(s, self.num_betas, **kw),
            torch.zeros(s, JOINTS, 3, **kw),
            torch.zeros(s, n, 3, **kw),
            eye.expand(s, n, 3, 3).contiguous(),
            torch.ones(s, n, dtype=torch.bool, device=self.device),
            st.context,
            st.solved,
            torch.zeros(s, JOINTS, 3, **kw),
            torch.ones(s, JOINTS, dtype=torch.bool, device=self.device),
            torch.zeros(s, JOINTS - 1, 3, 3, **kw),
        )
        net = (eye.expand(s, 24, 3, 3).contiguous(), st.trans)
        best = (torch.full((s,), math.inf, **kw), st.x, st.trans, st.context[:, 1])
        damping = torch.full((s,), DAMPING[0], **kw)
        examples = (
            (st.x, st.trans, st.base, st.has_prev, *net, *obs),
            (st.x, st.trans, damping, *best, st.base, *obs),
            (st.x, st.trans, *best, st.base, *net, st.solved, *obs),
        )
        # no two inputs one tensor: an export would take them for one input
        return tuple(tuple(t.clone() for t in example) for example in examples)

    def _build(self) -> None:
        """Trace or compile the kernels, then time them (:data:`WARM_UP_CALLS`)."""
        examples = self._examples()
        with torch.no_grad():  # fills the body's sparse-skinning cache: not part of a kernel
            self._modules[0](*examples[0])
        kernels = [_kernel(m, ex, self.backend) for m, ex in zip(self._modules, examples)]
        self._start, self._step, self._keep = kernels
        with torch.no_grad():
            for name, kernel, example in zip(("start", "step", "keep"), kernels, examples):
                for _ in range(WARM_UP_CALLS):
                    kernel(*example)
                self.cost[name].seed([_timed(kernel, example) for _ in range(KernelCost.WINDOW)])
            st, (net_rot, net_trans) = self.state(), examples[0][4:6]
            inputs = (*examples[0][6:11], *examples[0][13:16])
            rest = self.cost["rest"]
            for _ in range(KernelCost.WINDOW):  # frames without steps: the rest's cost
                self._frame(st, net_rot, net_trans, inputs, steps=0)
            rest.seed(list(rest.times))

    def calibration_hinges(self, calibration) -> np.ndarray | None:
        """(23, 3, 3) (I − a aᵀ) for each body joint ``calibration`` found turning as a hinge
        about a (its axis in the joint's parent frame on this body at the calibrated shape,
        :func:`rbmcap.calibrate.functional.hinge_axes`), zero elsewhere; None when it found no
        hinge or measured no joints."""
        joints = getattr(calibration, "joints", None)
        if not joints:
            return None
        names = list(self.markers.names)
        rest = rest_plate_rotations(self.body, self.markers, calibration.betas)
        rotation = calibration.offsets(names).rotation
        ids, axes = hinge_axes(joints.values(), rest, rotation, names)
        if not len(ids):
            return None
        out = np.zeros((JOINTS - 1, 3, 3))
        out[ids - 1] = np.eye(3) - axes[:, :, None] * axes[:, None, :]
        return out

    # ---------------------------------------------------------------------------- frame
    @torch.no_grad()
    def refine(
        self,
        state: RefineState,
        rotmats,
        trans,
        betas,
        pos,
        rot,
        valid,
        started=None,
        joint_centres=None,
        joint_offsets=None,
        hinges=None,
    ):
        """Refine one frame of S subjects (tensors on the refiner's device; pos, rot, rotmats
        and trans in its dtype).

        Args:
            state: the stream's :class:`RefineState` (updated).
            rotmats: (S, 24, 3, 3) the network's local rotations; trans: (S, 3) m.
            betas: (S, B) the shape to hold (padded with zeros or cut to the body's size).
            pos, rot, valid: (S, N, 3), (S, N, 3, 3), (S, N) the frame's plates.
            started: when the frame's network step began (on this module's clock), or None.
                Given, the budget counts from where that step usually ends (the median of its
                recent times): a step that ran late (the thread preempted) leaves refinement
                less time instead of delaying the frame further.
            joint_centres: None (no subject's joints measured), or the joint centres this
                frame's plates put each subject's measured joints at
                (:func:`rbmcap.calibrate.functional.joint_centres`): ((S, 24, 3) m, (S, 24) bool
                where there is one), drawn on by the body's joints.
            joint_offsets: None, or (S, 24, 3) m each subject's joint correction (a
                calibration's, :meth:`rbmcap.body.BodyModel.with_joint_offsets`): the body's
                joints moved there.
            hinges: None, or (S, 23, 3, 3) each subject's (I − a aᵀ) for each body joint that
                its calibration found turning as a hinge about a (in the joint's parent frame,
                :func:`rbmcap.calibrate.functional.hinge_axes`), zero elsewhere; held by the
                configuration's ``weights.hinge_sigma_deg`` (0: free).

        Returns:
            (rotmats (S, 24, 3, 3), trans (S, 3)): the best iterate within the budget, or the
            network's answer where the budget leaves no room for a step or no plate is seen.
        """
        t0 = _now()
        cost = self.cost
        anchor = t0
        if started is not None:
            if self.network.times:
                anchor = min(t0, started + self.network.value)
            self.network.observe(t0 - started)
        least = sum(c.value for c in cost.values())
        if self._step is None or t0 + least > anchor + self.budget_s:
            for c in cost.values():
                c.idle()
            state.has_prev = torch.zeros_like(state.has_prev)
            state.solved = torch.zeros_like(state.solved)
            state.stats.add(0, _now() - t0)
            return rotmats, trans
        inputs = self._inputs(betas, pos, rot, valid, joint_centres, joint_offsets, hinges)
        return self._frame(state, rotmats, trans, inputs, t0=t0, anchor=anchor)

    def _inputs(self, betas, pos, rot, valid, joint_centres, joint_offsets, hinges) -> tuple:
        """A frame's kernel inputs but the stream's memory: (betas, offsets, pos, rot, valid,
        centres, seen, hinges), the betas padded or cut to the body's size and each subject's
        absent terms zero (:meth:`refine`'s arguments)."""
        if betas.shape[-1] != self.num_betas:  # the network's shape space, the body's size
            nb = self.num_betas
            betas = torch.nn.functional.pad(betas, (0, max(0, nb - betas.shape[-1])))[:, :nb]
        centres, seen = self._no_centres if joint_centres is None else joint_centres
        offsets = self._no_offsets if joint_offsets is None else joint_offsets
        hinges = self._no_hinges if hinges is None else hinges
        return betas, offsets, pos, rot, valid, centres, seen, hinges

    def skip(self, state: RefineState) -> None:
        """A frame of the stream that is not refined (taken without an answer): the next
        frame starts from the network's answer or the last refined one, whichever fits better,
        without the smoothness term until two frames in a row are refined again."""
        state.solved = torch.zeros_like(state.solved)

    def _frame(self, state, rotmats, trans, inputs, t0=None, anchor=None, steps=None):
        """:meth:`refine` past its checks: the start, steps until the deadline (the budget
        after ``anchor``; or ``steps``), the last evaluation, the answer."""
        t0 = _now() if t0 is None else t0
        anchor = t0 if anchor is None else anchor
        cost = self.cost
        deadline = anchor + self.budget_s - cost["rest"].value
        cap = self.options.max_iterations if steps is None else steps
        cap = math.inf if cap is None else cap
        smooth = (state.solved >= 2).to(self.dtype)
        obs = (*inputs[:5], state.context, smooth, *inputs[5:])  # (:meth:`_inputs`)
        x, t, base, e, plates = self._start(
            state.x, state.trans, state.base, state.has_prev, rotmats, trans, *obs
        )
        now = _now()
        spent = cost["start"].observe(now - t0)
        # the first step takes its own E at the start as the best (E of one pose in a batch of
        # 73 and of 2 differ in the last bits: a start compared with itself must not be
        # rejected)
        best = (torch.full_like(e, math.inf), x, t, plates)
        damping = torch.full_like(e, DAMPING[0])
        done = 0
        while done < cap and now + cost["step"].value + cost["keep"].value <= deadline:
            x, t, damping, *best = self._step(x, t, damping, *best, base, *obs)
            done += 1
            later = _now()
            spent += cost["step"].observe(later - now)
            now = later
        if done == 0:
            cost["step"].idle()
        # the last evaluation (its time was kept free before each step) and the answer
        _, out_rot, out_trans, state.x, state.context, state.solved, refined = self._keep(
            x, t, *best, base, rotmats, trans, state.solved, *obs
        )
        spent += cost["keep"].observe(_now() - now)
        state.trans, state.base, state.has_prev = out_trans, out_rot[:, 0], refined
        total = _now() - t0
        cost["rest"].observe(max(total - spent, 0.0))
        if steps is None:
            state.stats.add(done, total)
        return out_rot, out_trans


class KernelCost:
    """What one part of a refined frame costs on this machine (s): the median of its recent
    times (:data:`WINDOW`), so that the thread being preempted now and then (which no estimate
    can foresee, and which delays a frame with or without refinement) does not count as the
    part's cost, while a lasting slowdown (a busier machine) does within half a window.

    A part that did not run in a frame (it no longer fit the budget) gives back its oldest time
    for its typical one, the median of its warm-up (:meth:`idle`): a slowdown that made it stop
    fitting is forgotten after a window's frames and the part is tried again, instead of never.
    """

    WINDOW = 32

    def __init__(self) -> None:
        self.times: collections.deque[float] = collections.deque(maxlen=self.WINDOW)
        self.typical = 0.0
        self.value = 0.0

    def seed(self, times: list[float]) -> None:
        """The times measured while warming up: the window and the typical time."""
        self.times.clear()
        self.times.extend(times)
        self.typical = sorted(times)[len(times) // 2]
        self._update()

    def observe(self, seconds: float) -> float:
        """One more measured time; returns it."""
        self.times.append(seconds)
        self._update()
        return seconds

    def idle(self) -> None:
        """A frame this part did not run in."""
        if self.times:
            self.times.append(self.typical)
            self._update()

    def _update(self) -> None:
        self.value = sorted(self.times)[len(self.times) // 2]


def _timed(kernel, example: tuple) -> float:
    """Seconds one call of ``kernel`` on ``example`` takes."""
    t0 = _now()
    kernel(*example)
    return _now() - t0


def _kernel(module: torch.nn.Module, example: tuple, backend: str):
    """``module`` run as ``backend`` says, for inputs shaped as ``example``."""
    if backend == "eager":
        return module
    if backend == "compiled":
        what = f"the refinement's {type(module).__name__} kernel"
        run = compiled_step(module, module, example, what)
        return lambda *tensors: tuple(run(*tensors))
    with frozen(module), warnings.catch_warnings():
        # TracerWarnings about Python values in shapes; freeze's deprecation notice
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(module, example, check_trace=False)
        return torch.jit.freeze(traced.eval())
