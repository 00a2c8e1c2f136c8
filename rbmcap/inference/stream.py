"""Live streams: one frame of plate observations in, that frame's SMPL pose out.

A causal GRU keeps its recurrent state, so a frame costs the same however long the stream has
run. What a frame costs on one CPU thread is the GRU's weights, read once a frame, and the count
of small tensor operations more than their arithmetic, so the recurrent path runs the whole
frame (features, the GRU step, decoding with the running betas and the plate fit's running sums)
as one TorchScript trace recorded on the first frame: the same operations on the same values
(outputs are bit-identical to the eager ones), without Python between them, frozen (constants
folded) and without the trace's slices of whole dimensions (:func:`drop_whole_slices`). The
``compiled`` backend goes further: the same step exported and compiled ahead of time into native
code (:mod:`rbmcap.inference.compiled`; compiled once per model, then cached), with no
interpreter between the operations. Figures: docs/benchmarks.md#rbmcap-bench-infer. Other
networks re-run on the last ``context`` frames.
"""

from __future__ import annotations

import collections
import warnings

import numpy as np
import torch

from rbmcap.errors import ConfigError, DataError
from rbmcap.inference.compiled import compiled_step, frozen
from rbmcap.inference.refine import RefineOptions, Refiner, RefineStats, clock

BACKENDS = ("eager", "trace", "compiled")
"""How a recurrent stream runs its frame step: the Python modules as they are, a TorchScript
trace (the default: recorded on the first frame), or compiled ahead of time
(:mod:`rbmcap.inference.compiled`: the fastest, one compile per model, cached, and a C++
compiler)."""


class FrameStep(torch.nn.Module):
    """One frame of a causal recurrent model, with its whole state as inputs and outputs.

    ``forward(pos (N, 3), rot (N, 3, 3), valid (N,), state, betas_sum (1, 1, B) float64,
    frames () float64, fit_h (1, 1, B', B'), fit_g (1, 1, B'))`` →
    ``(rotmats (24, 3, 3), trans (3,), state, betas_sum, fit_h, fit_g)``; ``frames`` counts this
    frame. The betas are the running mean over the frames so far (summed in float64, as the
    offline running mean is), and the plate fit's normal equations are summed the same way, so
    the stream answers as the network run offline on the whole sequence does.

    Several subjects step together when pos is (S, N, 3), rot (S, N, 3, 3) and valid (S, N):
    the sums' leading 1 is then S and the answers are (S, 24, 3, 3) and (S, 3), each subject's
    as if it streamed alone (the network's weights are read once for all of them).
    """

    def __init__(self, model) -> None:
        super().__init__()
        # Held outside the module tree: the step has no parameters of its own, and a trace or an
        # export records the model's (frozen) weights as constants.
        object.__setattr__(self, "model", model)

    def forward(self, pos, rot, valid, state, betas_sum, frames, fit_h, fit_g):
        model = self.model
        subjects = pos.dim() == 3  # decided when traced or exported: one branch is recorded
        if not subjects:
            pos, rot, valid = pos[None], rot[None], valid[None]
        x, ctx = model.encoder(pos[:, None], rot[:, None], valid[:, None])
        y, state = model.net.step(x[:, 0], state)
        y = y[:, None]
        betas_sum = betas_sum + model.betas_outputs(y).double()
        betas = (betas_sum / frames).to(y.dtype)
        out = model.decode_outputs(y, ctx, betas=betas, fit_carry=(fit_h, fit_g))
        fit_h, fit_g = out.get("fit_carry", (fit_h, fit_g))
        rotmats, trans = out["rotmats"][:, -1], out["trans"][:, -1]
        if not subjects:
            rotmats, trans = rotmats[0], trans[0]
        return rotmats, trans, state, betas_sum, fit_h, fit_g


def frame_step(model, pos, rot, valid, state, backend: str = "trace"):
    """:class:`FrameStep` of ``model`` for one of :data:`BACKENDS` (``trace``:
    ``torch.jit.trace`` on this frame, frozen, the model's parameters as constants; ``compiled``:
    :func:`~rbmcap.inference.compiled.compiled_step`; ``eager``: the plain step), and the zero
    running sums to start it with (betas_sum, fit_h, fit_g)."""
    step = FrameStep(model)
    sums = zero_sums(model, pos.shape[0] if pos.dim() == 3 else 1)
    if backend == "eager":
        return step, sums
    frames = torch.ones((), dtype=torch.float64)
    example = (pos, rot, valid, state, sums[0], frames, *sums[1:])
    if backend == "compiled":
        return compiled_step(step, model, example), sums
    with frozen(model), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TracerWarnings about Python values in shapes
        traced = torch.jit.trace(step, example, check_trace=False)
    traced = torch.jit.freeze(traced.eval())  # constant folding, dead code removed
    drop_whole_slices(traced.graph)
    return traced, sums


def zero_sums(model, subjects: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The running sums a :class:`FrameStep` starts from: betas_sum (S, 1, B) float64,
    fit_h (S, 1, B', B'), fit_g (S, 1, B') for S ``subjects``."""
    nb = model.num_betas
    fit = getattr(model, "plate_fit", None)
    nf = fit.num_betas if fit is not None else nb
    return (
        torch.zeros(subjects, 1, nb, dtype=torch.float64),
        torch.zeros(subjects, 1, nf, nf),
        torch.zeros(subjects, 1, nf),
    )


_WHOLE = (0, None)
_TO_END = (2**63 - 1, None)


def drop_whole_slices(graph) -> int:
    """Remove from a TorchScript ``graph`` every ``aten::slice`` that keeps a whole dimension
    (start 0, end the largest int, step 1): the trace records one per dimension an indexing
    expression passes over (``x[..., :2]`` slices each leading dimension whole), a quarter of
    a frame's operations, each an operator call that returns a view of its input. Uses of the
    slice read the input instead (the same elements, through the same storage). Returns how
    many were removed."""

    def constant(value):
        return value.toIValue() if value.node().kind() == "prim::Constant" else "?"

    removed = 0
    for node in list(graph.nodes()):
        inputs = list(node.inputs())
        if node.kind() != "aten::slice" or len(inputs) != 5:  # not a list's slice
            continue
        source, _, start, end, step = inputs
        if constant(start) in _WHOLE and constant(end) in _TO_END and constant(step) == 1:
            node.output().replaceAllUsesWith(source)
            node.destroy()
            removed += 1
    torch._C._jit_pass_dce(graph)
    return removed


class StreamSession:
    """Feed frames one at a time with :meth:`push`; each call returns that frame's answer.

    A causal GRU keeps its recurrent state (constant cost per frame) through a
    :class:`FrameStep` run by ``backend`` (one of :data:`BACKENDS`; ``compiled`` compiles when the
    session starts); other networks re-run on the last ``context`` frames (a non-causal network
    then sees no future frames, so its answer for the newest frame is that of a window's last
    frame), whatever the backend.

    With ``subjects`` S > 1 every frame holds S subjects' plates, stepped together (see
    :class:`FrameStep`): :meth:`push` takes and returns arrays with a leading S.

    With ``refine`` (seconds, or :class:`~rbmcap.inference.refine.RefineOptions`) each frame's
    answer is then refined by solver steps within that time (:mod:`rbmcap.inference.refine`),
    the betas held at the stream's.
    """

    def __init__(
        self,
        predictor,
        context: int,
        backend: str = "trace",
        subjects: int = 1,
        refine: RefineOptions | float | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ConfigError(f"unknown stream backend {backend!r}; expected one of {BACKENDS}")
        if int(subjects) < 1:
            raise ConfigError(f"a stream of {subjects} subjects: expected at least one")
        self.p = predictor
        self.backend = backend
        self.subjects = int(subjects)
        self.context = int(context)
        self.buffer: collections.deque = collections.deque(maxlen=self.context)
        self.recurrent = hasattr(predictor.model.net, "step") and predictor.model.is_causal
        self._step = None
        self._carry: tuple = ()
        self._count = torch.zeros((), dtype=torch.float64)  # frames so far, as the step reads it
        options = RefineOptions.of(refine)
        self.refiner = None if options is None else Refiner(predictor, options, subjects, backend)
        self._refined = None if self.refiner is None else self.refiner.state()
        if self.recurrent and backend == "compiled":
            self._start(*self._first_frame())

    @property
    def frames(self) -> int:
        """Frames a recurrent model has streamed so far."""
        return int(self._count)

    def _first_frame(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A frame to build the step on before any arrives: every plate seen, at rest."""
        n, dev = self.p.num_markers, self.p.device
        lead = (self.subjects,) if self.subjects > 1 else ()
        rot = torch.eye(3, device=dev).expand(*lead, n, 3, 3).contiguous()
        pos = torch.zeros(*lead, n, 3, device=dev)
        return pos, rot, torch.ones(*lead, n, dtype=torch.bool, device=dev)

    def _start(self, pos, rot, valid) -> None:
        state = self.p.model.net.initial_state(self.subjects, device=pos.device, dtype=pos.dtype)
        with torch.inference_mode(False), torch.no_grad():
            self._step, sums = frame_step(self.p.model, pos, rot, valid, state, self.backend)
        self._carry = (state, *sums)

    def fork(self) -> StreamSession:
        """Another session of the same model and backend at its first frame, sharing this
        session's frame step (built here from a rest frame if no frame was pushed yet; the step
        keeps no state of its own, so one trace or compile serves every fork)."""
        other = StreamSession(self.p, self.context, backend="eager", subjects=self.subjects)
        other.backend = self.backend
        if self.refiner is not None:
            other.refiner, other._refined = self.refiner, self.refiner.state()
        if self.recurrent:
            if self._step is None:
                self._start(*self._first_frame())
            pos = self._first_frame()[0]
            net = self.p.model.net
            state = net.initial_state(self.subjects, device=pos.device, dtype=pos.dtype)
            other._step = self._step
            other._carry = (state, *zero_sums(self.p.model, self.subjects))
        return other

    @property
    def betas(self) -> np.ndarray | None:
        """(B,) the running mean of the betas over the frames so far (a recurrent model after
        its first frame; (S, B) for S subjects), else None."""
        if not self.recurrent or not self._carry or self.frames == 0:
            return None
        sums = self._carry[1][:, 0] if self.subjects > 1 else self._carry[1][0, 0]
        return (sums.cpu().numpy() / float(self._count)).astype(np.float32)

    @property
    def refine_stats(self) -> RefineStats | None:
        """What this stream's refinement did so far (None without refinement)."""
        return None if self._refined is None else self._refined.stats

    @torch.inference_mode()
    def push(
        self, pos, rot, valid, betas=None, joint_centres=None, joint_offsets=None, hinges=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """One frame: pos (N, 3) m, rot (N, 3, 3), valid (N,) bool (a leading S for S
        subjects); ``betas`` (B,) (S, B for S subjects): the shape refinement holds (a
        calibration's; None: the stream's running betas); ``joint_centres``: None, or the
        centres of the joints a calibration measured, where this frame's plates put them
        (:func:`rbmcap.calibrate.functional.joint_centres`), as ((24, 3) m, (24,) bool where
        there is one) (a leading S for S subjects), drawing refinement's joints;
        ``joint_offsets``: None, or the subject's joint correction (24, 3) m (a leading S for S
        subjects; a calibration's ``joint_offset_array()``), the body's joints moved there;
        ``hinges``: None, or (23, 3, 3) (I − a aᵀ) per body joint the calibration found turning
        as a hinge about a, zero elsewhere (a leading S for S subjects;
        :meth:`rbmcap.inference.refine.Refiner.refine`).

        Returns (rotmats (24, 3, 3) local, joint 0 global; trans (3,) m) for that frame (a
        leading S for S subjects), refined when the session refines.
        """
        started = None if self.refiner is None else clock()
        pos, rot, valid = self._tensors(pos, rot, valid)
        rotmats, trans, running = self._network(pos, rot, valid)
        if self.refiner is not None:
            if betas is None:
                betas = running()
            else:
                betas = torch.as_tensor(np.asarray(betas, dtype=np.float32), device=pos.device)
                betas = betas.reshape(self.subjects, -1)
            if self.subjects == 1:
                pos, rot, valid = pos[None], rot[None], valid[None]
            if joint_centres is not None:
                joint_centres = self._centres(*joint_centres)
            if joint_offsets is not None:
                joint_offsets = self._per_subject(joint_offsets, (24, 3), "joint offsets")
            if hinges is not None:
                hinges = self._per_subject(hinges, (23, 3, 3), "hinges")
            rotmats, trans = self.refiner.refine(
                self._refined,
                rotmats,
                trans,
                betas,
                pos,
                rot,
                valid,
                started=started,
                joint_centres=joint_centres,
                joint_offsets=joint_offsets,
                hinges=hinges,
            )
        if self.subjects == 1:
            rotmats, trans = rotmats[0], trans[0]
        return rotmats.cpu().numpy(), trans.cpu().numpy()

    @torch.inference_mode()
    def advance(self, pos, rot, valid) -> None:
        """Take a frame without answering it: a recurrent model steps its state through it (as
        :meth:`push` would), and refinement does not run (its next frame does not take this one
        for the frame before it)."""
        pos, rot, valid = self._tensors(pos, rot, valid)
        self._network(pos, rot, valid)
        if self.refiner is not None:
            self.refiner.skip(self._refined)

    def _network(self, pos, rot, valid):
        """The network's answer to a frame of checked tensors: rotmats (S, 24, 3, 3), trans
        (S, 3) (S = 1 for one subject) and a function giving its betas (S, B)."""
        several = self.subjects > 1
        if not self.recurrent:
            self.buffer.append((pos, rot, valid))
            # frames (S, N, ...) stack to windows (S, T, N, ...)
            window = [torch.stack(v, dim=int(several)) for v in zip(*self.buffer)]
            out = self.p.model(*(window if several else [w[None] for w in window]))
            return out["rotmats"][:, -1], out["trans"][:, -1], lambda: out["betas"][:, -1]
        if self._step is None:
            self._start(pos, rot, valid)
        self._count += 1.0  # in place: a new scalar tensor a frame costs more than the add
        state, betas_sum, fit_h, fit_g = self._carry
        rotmats, trans, *carry = self._step(
            pos, rot, valid, state, betas_sum, self._count, fit_h, fit_g
        )
        self._carry = tuple(carry)
        if not several:
            rotmats, trans = rotmats[None], trans[None]
        return rotmats, trans, lambda: (carry[1][:, 0] / self._count).float()

    def _per_subject(self, values, shape: tuple[int, ...], what: str) -> torch.Tensor:
        """Each subject's ``values`` as the refiner's (S, *shape) tensor, or DataError when they
        are not shaped ``shape`` (a leading S for S subjects)."""
        lead = (self.subjects,) if self.subjects > 1 else ()
        values = np.asarray(values)
        if values.shape != (*lead, *shape):
            raise DataError(f"a streamed frame's {what} {values.shape}: expected {(*lead, *shape)}")
        r = self.refiner
        return torch.as_tensor(values, dtype=r.dtype, device=r.device).reshape(-1, *shape)

    def _centres(self, centres, seen) -> tuple[torch.Tensor, torch.Tensor]:
        """Joint centres and where they are seen as the refiner's (S, 24, 3) and (S, 24)
        tensors, or DataError when they are not shaped (24, 3), (24,) (a leading S for S
        subjects)."""
        lead = (self.subjects,) if self.subjects > 1 else ()
        centres = np.asarray(centres)
        seen = np.asarray(seen, dtype=bool)
        if centres.shape != (*lead, 24, 3) or seen.shape != (*lead, 24):
            raise DataError(
                f"a streamed frame's joint centres {centres.shape} and {seen.shape}: "
                f"expected {(*lead, 24, 3)} and {(*lead, 24)}"
            )
        r = self.refiner
        kw = {"dtype": r.dtype, "device": r.device}
        centres = torch.as_tensor(centres, **kw).reshape(self.subjects, 24, 3)
        seen = torch.as_tensor(seen, device=r.device).reshape(self.subjects, 24)
        return centres, seen

    def _tensors(self, pos, rot, valid) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One frame's arrays as tensors on the model's device (copies: the caller may reuse its
        buffers), or DataError when they are not shaped (N, 3), (N, 3, 3), (N,)."""
        n = self.p.num_markers
        lead = (self.subjects,) if self.subjects > 1 else ()
        pos = np.array(pos, dtype=np.float32)
        rot = np.array(rot, dtype=np.float32)
        valid = np.array(valid, dtype=bool)
        if pos.shape != (*lead, n, 3) or rot.shape != (*lead, n, 3, 3) or valid.shape != (*lead, n):
            want = ", ".join(str((*lead, *shape)) for shape in ((n, 3), (n, 3, 3), (n,)))
            raise DataError(
                f"a streamed frame's pos {pos.shape}, rot {rot.shape}, valid {valid.shape}: "
                f"expected {want} for marker set {self.p.marker_set!r}"
            )
        dev = self.p.device
        tensors = (torch.from_numpy(pos), torch.from_numpy(rot), torch.from_numpy(valid))
        return tensors if dev.type == "cpu" else tuple(t.to(dev) for t in tensors)
