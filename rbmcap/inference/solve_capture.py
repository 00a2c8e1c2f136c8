"""SMPL motion of a real capture by the network, the optimisation solver, or both (hybrid).

:func:`infer_capture` is what ``rbmcap infer --method`` runs:

- ``network``: :func:`rbmcap.inference.capture.predict_capture` (the checkpoint's answer).
- ``solver``: :func:`solve_capture`, the optimisation baseline (:class:`rbmcap.baseline.Solver`)
  fitted to the capture's plates from its own kinematic start.
- ``hybrid``: the network's answer as the solver's start, then a few solver iterations.

The solver side (:func:`solve_capture`):

1. the capture's plates are matched to the marker set by name (as for the network);
2. a calibration, when given, maps the physical plates onto their virtual counterparts
   (:meth:`rbmcap.calibrate.Calibration.apply`), and its betas are the solver's betas, **held**
   (``Solver.solve(hold_betas=True)``): the calibration measured the subject's shape on frames
   chosen for it, and a solve of one take would otherwise trade shape against pose. Without a
   calibration the betas are fitted with the pose (from the network's in the hybrid);
3. the solver runs at the capture's own rate (its smoothness term is in physical units, so a
   100 Hz capture needs no resampling), over the whole take in one batch;
4. the pose prior is :func:`rbmcap.baseline.prior.default_pose_prior` unless another is given.

Solver configurations: ``default`` for the solver, ``hybrid`` (30 iterations) for the hybrid,
unless another is named (:func:`rbmcap.baseline.config.load_solver_config`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.baseline.prior import default_pose_prior
from rbmcap.baseline.solver import Solver
from rbmcap.errors import ConfigError, DataError
from rbmcap.inference.capture import calibrated_plates, checkpoint_body, predict_capture
from rbmcap.markers.markerset import DEFAULT_MARKERS, MarkerSet, load_marker_set
from rbmcap.motion.smpl_motion import SMPLMotion

METHODS = ("network", "solver", "hybrid")
"""What ``rbmcap infer --method`` takes."""

DEFAULT_SOLVER_CONFIG = {"solver": "default", "hybrid": "hybrid"}
"""The solver configuration of each solving method when none is named."""


@dataclass
class CaptureAnswer:
    """What :func:`infer_capture` returns.

    Attributes:
        motion: the SMPL motion (the capture's frame count and fps, world Z up, metres).
        method: 'network', 'solver' or 'hybrid'.
        seconds: wall-clock seconds of the whole method (network pass, solver set-up and solve).
        iterations: solver iterations run (None for the network).
        solver_config: the solver configuration's name or path (None for the network).
    """

    motion: SMPLMotion
    method: str
    seconds: float
    iterations: int | None = None
    solver_config: str | None = None

    @property
    def seconds_per_frame(self) -> float:
        return self.seconds / max(self.motion.num_frames, 1)


def solve_capture(
    capture,
    calibration=None,
    *,
    body,
    markers=DEFAULT_MARKERS,
    prior=None,
    config="default",
    iterations: int | None = None,
    init: SMPLMotion | None = None,
    device: str = "cpu",
):
    """Fit SMPL to a capture's plates with the optimisation solver (module docstring).

    Args:
        capture: a :class:`~rbmcap.io.capture.Capture` (world Z up, metres).
        calibration: None or a ``rbmcap.calibrate.Calibration`` of the same session.
        body: the :class:`~rbmcap.body.BodyModel` to fit.
        markers: the marker set (name, YAML path or :class:`~rbmcap.markers.MarkerSet`).
        prior: a :class:`~rbmcap.baseline.prior.GaussianMixturePrior`, a path to one, or None
            (the shipped :func:`~rbmcap.baseline.prior.default_pose_prior`).
        config: solver configuration (name, YAML path or ``SolverConfig``).
        iterations: optimiser iterations (default: the configuration's).
        init: a start (the hybrid: the network's motion, same frames); None: the solver's own.
        device: 'cpu', 'cuda', ...

    Returns:
        (:class:`SMPLMotion` with the capture's frames and fps, the solver's
        :class:`~rbmcap.baseline.result.Solution`).

    Raises:
        DataError: a marker-set plate missing from the capture, no frames, an ``init`` of
            another frame count. ConfigError: a bad solver configuration, a calibration
            without an offset for a plate.
    """
    ms = markers if isinstance(markers, MarkerSet) else load_marker_set(markers)
    cap = calibrated_plates(capture, list(ms.names), ms.name, calibration)
    start = _start(cap, init, calibration, capture.source or "capture")
    held = getattr(calibration, "betas", None) is not None
    solver = Solver(
        body, ms, config, prior=default_pose_prior() if prior is None else prior, device=device
    )
    sol = solver.solve(
        cap.pos,
        cap.rot,
        cap.valid,
        fps=cap.fps,
        init=start or None,
        iterations=iterations,
        hold_betas=held,
    )
    return _solution_motion(sol, capture, ms.name, calibration is not None, body, cap.fps), sol


def _solution_motion(
    sol, capture, marker_set: str, calibrated: bool, body, fps: float
) -> SMPLMotion:
    """The solver's answer as an :class:`SMPLMotion` at ``fps`` Hz, named after the capture."""
    source = {
        "capture": capture.source,
        "marker_set": marker_set,
        "calibrated": calibrated,
        "solver_iterations": sol.iterations,
    }
    return SMPLMotion(
        poses=sol.params.poses.double().numpy(),
        trans=sol.params.trans.double().numpy(),
        betas=sol.params.betas.double().numpy(),
        gender=getattr(body, "gender", "neutral"),
        fps=fps,
        name=Path(capture.source).stem if capture.source else "capture",
        source=source,
    )


def _start(cap, init: SMPLMotion | None, calibration, label: str) -> dict[str, np.ndarray]:
    """The solver's ``init``: the start motion's poses, trans and betas, the calibration's
    betas over them."""
    start: dict[str, np.ndarray] = {}
    if init is not None:
        if init.num_frames != cap.num_frames:
            raise DataError(f"{label}: {cap.num_frames} frames, the start has {init.num_frames}")
        start = {"poses": init.poses, "trans": init.trans, "betas": init.betas}
    betas = getattr(calibration, "betas", None)
    if betas is not None:
        start["betas"] = np.asarray(betas, dtype=np.float64).reshape(-1)
    return start


def infer_capture(
    capture,
    calibration=None,
    *,
    method: str = "network",
    predictor=None,
    body=None,
    markers=None,
    prior=None,
    solver_config=None,
    iterations: int | None = None,
    device: str = "cpu",
    progress: bool = False,
) -> CaptureAnswer:
    """SMPL motion of a capture by ``method`` (module docstring), timed.

    Args:
        capture, calibration: as for :func:`solve_capture`.
        method: one of :data:`METHODS`.
        predictor: a :class:`~rbmcap.inference.Predictor`; required for 'network' and 'hybrid'.
        body: the body the solver fits (default: the checkpoint's body, else the stand-in).
        markers: the solver's marker set (default: the checkpoint's, else rbm14).
        prior, iterations, device: the solver's (see :func:`solve_capture`).
        solver_config: default :data:`DEFAULT_SOLVER_CONFIG` of the method.
        progress: a progress bar over the network's chunks on stderr.

    Raises:
        ConfigError: an unknown method, or a network method without a predictor.
    """
    _check_method(method, iterations, predictor)
    t0 = time.perf_counter()
    init = None
    if predictor is not None and method in ("network", "hybrid"):
        init = predict_capture(predictor, capture, calibration, progress=progress)
        if method == "network":
            return CaptureAnswer(init, method, time.perf_counter() - t0)
    body, markers = _solver_body_and_markers(predictor, body, markers)
    config = solver_config or DEFAULT_SOLVER_CONFIG[method]
    motion, sol = solve_capture(
        capture,
        calibration,
        body=body,
        markers=markers,
        prior=prior,
        config=config,
        iterations=iterations,
        init=init,
        device=device,
    )
    if init is not None:
        motion.source["network"] = init.source
    seconds = time.perf_counter() - t0
    return CaptureAnswer(motion, method, seconds, sol.iterations, str(config))


def _check_method(method: str, iterations: int | None, predictor) -> None:
    """Raise ConfigError unless ``method`` is known, ``iterations`` (solving methods) is not
    negative and a network method has its ``predictor``."""
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method != "network" and iterations is not None and iterations < 0:
        raise ConfigError(f"iterations must be ≥ 0, got {iterations}")
    if method in ("network", "hybrid") and predictor is None:
        raise ConfigError(f"method {method!r} needs a checkpoint (--ckpt)")


def _solver_body_and_markers(predictor, body, markers):
    """The body and marker set the solver fits: those given, else the checkpoint's, else the
    stand-in body and rbm14."""
    if body is None:
        body = checkpoint_body(predictor.body_id if predictor is not None else "standin")
    if markers is None:
        markers = predictor.marker_set if predictor is not None else DEFAULT_MARKERS
    return body, markers
