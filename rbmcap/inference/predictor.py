"""``Predictor``: a trained checkpoint as a plain function from RBM observations to SMPL.

Whole sequences run in overlapping chunks (each frame's answer comes from the chunk where it is
furthest from an edge), then are smoothed over time (:mod:`rbmcap.inference.smoothing`);
streams keep the last ``context`` frames and answer for the newest one, or use a causal GRU's
recurrent state. Missing plates are masked through ``valid``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from rbmcap.baseline.solver import Solver
from rbmcap.body.params import SMPLParams
from rbmcap.checkpoint import load_model
from rbmcap.errors import ConfigError, DataError, ModelError
from rbmcap.inference.capture import checkpoint_body, predict_capture
from rbmcap.inference.narrow import narrowed
from rbmcap.inference.refine import RefineOptions
from rbmcap.inference.smoothing import DEFAULT_SIGMA_FRAMES, smooth_answer
from rbmcap.inference.stream import StreamSession


class Predictor:
    """Inference wrapper around a :class:`~rbmcap.model.regressor.PoseRegressor`.

    Args:
        model: the trained model; chunk: frames per chunk; overlap: frames shared by chunks.
        smoothing: σ (frames) of the zero-phase Gaussian over a whole sequence's answer
            (:func:`rbmcap.inference.smoothing.smooth_answer`; 0: the network's raw answer).
        precision: the type the network's weights are held in, one of
            :data:`rbmcap.inference.narrow.PRECISIONS` (``bfloat16`` and ``int8``: a causal
            GRU for live streams, :mod:`rbmcap.inference.narrow`).
    """

    def __init__(
        self,
        model,
        chunk: int = 240,
        overlap: int = 60,
        device: str = "cpu",
        smoothing: float = DEFAULT_SIGMA_FRAMES,
        precision: str = "float32",
    ) -> None:
        if not 0 <= 2 * overlap < chunk:
            raise ModelError(f"chunk={chunk}, overlap={overlap}: need 0 <= 2*overlap < chunk")
        if not (math.isfinite(smoothing) and smoothing >= 0):
            raise ModelError(f"smoothing={smoothing}: expected a number of frames >= 0")
        self.smoothing = float(smoothing)
        self.model = narrowed(model.to(device).eval(), precision)
        self.precision = precision
        self.device = torch.device(device)
        self.chunk, self.overlap = int(chunk), int(overlap)
        config = model.config
        self.marker_set: str = config.markers["name"]
        self.marker_names: list[str] = list(config.markers["names"])
        self.num_markers = len(config.markers["parents"])
        self.body_id: str = config.body_id
        self.fps = float(config.fps)  # the training data's frame rate (Hz)
        self._refiner = None

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str = "cpu", **kwargs) -> Predictor:
        """Load a checkpoint written by ``train.py`` or a pretrained model shipped with rbmcap
        by its name (e.g. ``"standin-rbm14"``; see :mod:`rbmcap.inference.pretrained`): safe
        loading, plain data only, checked before use (:func:`rbmcap.checkpoint.load_model`)."""
        return cls(load_model(path, device), device=device, **kwargs)

    def _check(self, pos, rot, valid):
        # copies: inputs are often read-only memory maps
        pos = torch.from_numpy(np.array(pos, dtype=np.float32))
        rot = torch.from_numpy(np.array(rot, dtype=np.float32))
        valid = torch.from_numpy(np.array(valid, dtype=bool))
        t, n = pos.shape[:2]
        if (
            pos.shape != (t, self.num_markers, 3)
            or rot.shape != (t, n, 3, 3)
            or valid.shape != (t, n)
        ):
            raise DataError(
                f"observations pos {tuple(pos.shape)}, rot {tuple(rot.shape)}, valid "
                f"{tuple(valid.shape)}: expected (T, {self.num_markers}, 3), (T, N, 3, 3), (T, N) "
                f"for marker set {self.marker_set!r}"
            )
        if t == 0:
            raise DataError("observations have no frames")
        return pos, rot, valid

    def predict(
        self,
        pos,
        rot,
        valid,
        *,
        progress: bool = False,
        smoothing: float | None = None,
        refine: int | None = None,
    ) -> SMPLParams:
        """Predict a whole sequence: pos (T, N, 3) m, rot (T, N, 3, 3), valid (T, N) bool;
        ``progress`` shows a bar over the chunks on stderr; ``smoothing`` overrides the
        predictor's σ (frames) for this call; ``refine``: that many Levenberg–Marquardt sweeps
        of the solver's objective after the network (:meth:`refiner`; the betas refined over the
        sequence, their prior centred on the network's; the sequence's frame rate taken as the
        checkpoint's), None: the network's answer.

        Returns:
            :class:`SMPLParams` (CPU float32): ``poses`` (T, 24, 3), ``betas`` (B,) averaged over
            the frames (refined: fitted), ``trans`` (T, 3) m.

        Raises:
            DataError: observations of the wrong shape or without frames.
            ConfigError: ``refine`` not a count ≥ 1.
        """
        if refine is not None and (isinstance(refine, bool) or int(refine) != refine or refine < 1):
            raise ConfigError(f"refine={refine!r}: expected a number of sweeps ≥ 1")
        params = self._predict(pos, rot, valid, progress, smoothing)
        if refine is None:
            return params
        sol = self.refiner().solve(
            pos,
            rot,
            valid,
            fps=self.fps,
            init=params,
            iterations=int(refine),
            tolerance=0,
        )
        return sol.params

    def refiner(self):
        """The :class:`~rbmcap.baseline.Solver` ``predict(refine=...)`` runs: the checkpoint's
        body and marker set, ``conf/baseline/refine.yaml``, the shipped pose prior (built on
        first use). For another prior or configuration, build a ``Solver`` and pass the
        network's answer as its ``init``."""
        if self._refiner is None:
            body = checkpoint_body(self.body_id)
            self._refiner = Solver(body, self.marker_set, "refine", device=self.device)
        return self._refiner

    @torch.no_grad()
    def _predict(self, pos, rot, valid, progress, smoothing) -> SMPLParams:
        """The network's answer (:meth:`predict` without refinement)."""
        pos, rot, valid = self._check(pos, rot, valid)
        t = pos.shape[0]
        step = self.chunk - 2 * self.overlap
        starts = list(range(0, max(t - self.chunk, 0) + 1, step))
        if starts[-1] + self.chunk < t:
            starts.append(t - self.chunk)
        rotmats = torch.empty(t, 24, 3, 3)
        trans = torch.empty(t, 3)
        betas_sum, betas_n = torch.zeros(self.model.num_betas), 0
        bar = tqdm(starts, disable=not progress, unit="chunk", desc="infer", file=sys.stderr)
        for k, s in enumerate(bar):
            e = min(s + self.chunk, t)
            out = self.model(*(x[s:e][None].to(self.device) for x in (pos, rot, valid)))
            lo = s if k == 0 else max(s + self.overlap, 0)
            hi = e if k == len(starts) - 1 else e - self.overlap
            if k + 1 < len(starts):
                hi = min(hi, starts[k + 1] + self.overlap)
            rotmats[lo:hi] = out["rotmats"][0, lo - s : hi - s].cpu()
            trans[lo:hi] = out["trans"][0, lo - s : hi - s].cpu()
            betas_sum += out["betas"][0, lo - s : hi - s].sum(0).cpu()
            betas_n += hi - lo
        sigma = self.smoothing if smoothing is None else float(smoothing)
        rotmats, trans = smooth_answer(rotmats, trans, sigma)
        return SMPLParams.from_rotmats(rotmats, betas_sum / max(betas_n, 1), trans)

    def predict_capture(
        self, capture, calibration=None, *, vertices: bool = False, body=None, progress=False
    ):
        """SMPL motion of a :class:`~rbmcap.io.capture.Capture` (plates matched by name,
        optional calibration, resampled to the training rate and back; see
        :mod:`rbmcap.inference.capture`).

        Returns:
            :class:`~rbmcap.motion.smpl_motion.SMPLMotion` at the capture's fps; with
            ``vertices=True`` the pair (motion, vertices (T, V, 3) float32 metres, world Z up),
            skinned in chunks by ``body`` (default: the checkpoint's body model).
        """
        motion = predict_capture(self, capture, calibration, progress=progress)
        if not vertices:
            return motion
        # trimesh takes about a second to import: only when vertices are asked for.
        from rbmcap.io.exports.meshes import motion_vertices

        body = body if body is not None else checkpoint_body(self.body_id)
        return motion, motion_vertices(motion, body)

    def stream(
        self,
        context: int = 60,
        backend: str = "trace",
        subjects: int = 1,
        refine: RefineOptions | float | None = None,
    ):
        """A frame-by-frame session answering for the newest frame (bounded latency); see
        :class:`rbmcap.inference.stream.StreamSession`. ``backend`` runs a recurrent model's
        frame: ``"trace"`` (TorchScript, recorded on the first frame), ``"compiled"`` (compiled
        ahead of time into native code, the fastest: about a minute once per model and subject
        count, then cached; needs a C++ compiler) or ``"eager"``; all three answer the same to
        1e-5. ``subjects`` > 1: each frame holds that many subjects' plates, stepped together.
        ``refine``: seconds per frame (or :class:`~rbmcap.inference.refine.RefineOptions`) of
        solver steps after the network's pose (:mod:`rbmcap.inference.refine`; its kernels run
        as ``backend`` says); None or 0: the network's pose."""
        return StreamSession(self, context, backend=backend, subjects=subjects, refine=refine)
