"""SMPL motion of a real capture: the network, then the optional optimisation, then the answer.

:func:`infer_capture` is what ``rbmcap infer --method`` runs, one route for every method:

1. the capture's plates are matched to the marker set by name and, when a calibration is given,
   mapped onto their virtual counterparts (:func:`rbmcap.inference.capture.calibrated_plates`),
   once;
2. the network (``network``, ``refine``, ``hybrid``) answers
   (:func:`rbmcap.inference.capture.predict_plates`);
3. the optimisation (``refine``, ``hybrid``, ``solver``: :class:`rbmcap.baseline.Solver`, the
   Levenberg–Marquardt sweeps of :mod:`rbmcap.baseline.sequence`) starts from that answer, or
   from its own kinematic start (``solver``), at the capture's own rate (the smoothness term is
   in physical units), over the whole take in one batch, with the shipped pose prior unless
   another is given. A calibration's betas are **held**
   (``Solver.solve(hold_betas=True)``): the calibration measured the subject's shape on frames
   chosen for it. Without one, the betas are fitted over the take with the poses, their prior
   centred on the network's betas where it answered (docs/results.md#offline-refinement).

The methods differ in where the optimisation starts and when it stops:

- ``network``: no optimisation.
- ``refine`` (the default): the network's answer, then a fixed count of sweeps
  (``conf/baseline/refine.yaml``; ``iterations`` overrides it): reproducible, and the most
  accurate answer for its time (docs/results.md#offline-refinement).
- ``hybrid``: the network's answer, then sweeps until converged (``default.yaml``'s tolerance).
- ``solver``: the kinematic start, then sweeps until converged.

Frames where no plate is seen keep the start's answer (the network's, or the kinematic start's
nearest seen frame): :attr:`CaptureAnswer.unseen` counts them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.baseline.solver import DEFAULT_PRIOR, Solver
from rbmcap.calibrate.functional import hinge_axes, joint_centres, rest_plate_rotations
from rbmcap.errors import ConfigError, DataError
from rbmcap.inference.capture import (
    calibrated_plates,
    checkpoint_body,
    match_plates,
    predict_plates,
)
from rbmcap.markers.markerset import DEFAULT_MARKERS, MarkerSet, load_marker_set
from rbmcap.motion.smpl_motion import SMPLMotion

METHODS = ("refine", "network", "hybrid", "solver")
"""What ``rbmcap infer --method`` takes; the first is the default."""

DEFAULT_METHOD = METHODS[0]

NETWORK_METHODS = ("network", "refine", "hybrid")
"""Methods that start from the network's answer (and need a checkpoint)."""

DEFAULT_SOLVER_CONFIG = {"solver": "default", "hybrid": "default", "refine": "refine"}
"""The solver configuration of each optimising method when none is named."""


@dataclass
class CaptureAnswer:
    """What :func:`infer_capture` returns.

    Attributes:
        motion: the SMPL motion (the capture's frame count and fps, world Z up, metres).
        method: one of :data:`METHODS`.
        seconds: wall-clock seconds of the whole method (network pass, solver set-up and solve).
        iterations: solver sweeps run (None for the network).
        solver_config: the solver configuration's name or path (None for the network).
        converged: the solve stopped on its tolerance (None for the network and ``refine``).
        unseen: frames where no plate is seen, whose answer is the start's (None for the
            network alone).
    """

    motion: SMPLMotion
    method: str
    seconds: float
    iterations: int | None = None
    solver_config: str | None = None
    converged: bool | None = None
    unseen: int | None = None

    @property
    def seconds_per_frame(self) -> float:
        return self.seconds / max(self.motion.num_frames, 1)


def infer_capture(
    capture,
    calibration=None,
    *,
    method: str = DEFAULT_METHOD,
    predictor=None,
    body=None,
    markers=None,
    prior=None,
    solver_config=None,
    iterations: int | None = None,
    device: str = "cpu",
    progress: bool = False,
) -> CaptureAnswer:
    """SMPL motion of a capture by ``method`` (module docstring), timed. Long because its
    docstring states every argument: the steps are the module docstring's, one call each.

    Args:
        capture: a :class:`~rbmcap.io.capture.Capture` (world Z up, metres).
        calibration: None or a ``rbmcap.calibrate.Calibration`` of the same session.
        method: one of :data:`METHODS`.
        predictor: a :class:`~rbmcap.inference.Predictor`; required for
            :data:`NETWORK_METHODS`.
        body: the body the solver fits (default: the checkpoint's body, else the stand-in).
        markers: the solver's marker set (default: the checkpoint's, else rbm14).
        prior: the solver's pose prior (a :class:`~rbmcap.baseline.GaussianMixturePrior` or a
            path; None: the one shipped with rbmcap).
        solver_config: default :data:`DEFAULT_SOLVER_CONFIG` of the method.
        iterations: sweeps (``refine``: the count; ``hybrid``, ``solver``: at most); default
            the configuration's.
        device: 'cpu', 'cuda', ...
        progress: a progress bar over the network's chunks on stderr.

    Raises:
        ConfigError: an unknown method, a network method without a predictor, a sweep count
            below 1, a prior file that is not a pose prior, a bad solver configuration, a
            calibration without an offset for a plate.
        DataError: a marker-set plate missing from the capture, no frames.
    """
    _check_method(method, iterations, predictor)
    body, ms = _solver_body_and_markers(predictor, body, markers)
    corrected = calibration.joint_offset_array() if calibration is not None else None
    body = body.with_joint_offsets(corrected)
    solver = None
    if method != "network":  # a bad prior or configuration fails before any work
        config = solver_config or DEFAULT_SOLVER_CONFIG[method]
        prior = DEFAULT_PRIOR if prior is None else prior
        solver = Solver(body, ms, config, prior=prior, device=device)
    label = capture.source or "capture"
    t0 = time.perf_counter()
    cap = calibrated_plates(capture, list(ms.names), ms.name, calibration)
    start = None
    if method in NETWORK_METHODS:
        net_cap = cap
        if ms.name != predictor.marker_set:
            names = predictor.marker_names
            net_cap = calibrated_plates(capture, names, predictor.marker_set, calibration)
        start = predict_plates(predictor, net_cap, calibration, capture.source, progress=progress)
        if method == "network":
            return CaptureAnswer(start, method, time.perf_counter() - t0)
        if start.num_frames != cap.num_frames:
            raise DataError(f"{label}: {cap.num_frames} frames, the start has {start.num_frames}")
    centres = _joint_centres(capture, list(ms.names), ms.name, calibration)
    hinges = _hinges(solver, calibration)
    sol = _optimise(solver, cap, start, calibration, iterations, centres, hinges)
    motion = _solution_motion(sol, capture, ms.name, calibration is not None, body, cap.fps)
    if start is not None:
        motion.source["network"] = start.source
    seconds = time.perf_counter() - t0
    converged = None if method == "refine" else sol.converged
    config_name = str(solver_config or DEFAULT_SOLVER_CONFIG[method])
    return CaptureAnswer(
        motion, method, seconds, sol.iterations, config_name, converged, sol.unseen
    )


def _joint_centres(capture, names: list[str], marker_set: str, calibration):
    """The joint centres a calibration measured from the plates' motion, where this capture's
    plates put them (:func:`rbmcap.calibrate.functional.joint_centres`), or None."""
    if not getattr(calibration, "joints", None):
        return None
    cap = match_plates(capture, names, marker_set)
    return joint_centres(calibration.joints.values(), cap.pos, cap.rot, cap.valid, names)


def _hinges(solver: Solver, calibration):
    """The calibration's hinges and their axes in the solver's body (the calibrated shape's
    rest pose), or None (:func:`rbmcap.calibrate.functional.hinge_axes`)."""
    if not getattr(calibration, "joints", None):
        return None
    names = list(solver.markers.names)
    rest = rest_plate_rotations(solver.body, solver.markers, calibration.betas)
    offsets = calibration.offsets(names).rotation
    ids, axes = hinge_axes(calibration.joints.values(), rest, offsets, names)
    return (ids, axes) if len(ids) else None


def _optimise(
    solver: Solver,
    cap,
    start: SMPLMotion | None,
    calibration,
    iterations=None,
    centres=None,
    hinges=None,
):
    """The solver's :class:`~rbmcap.baseline.result.Solution` on the calibrated plates ``cap``
    from ``start`` (the network's motion, or None: its own start), a calibration's betas held
    and its joint centres (``centres``) drawing the body's joints."""
    init = {} if start is None else {"poses": start.poses, "trans": start.trans}
    if start is not None:
        init["betas"] = start.betas
    held = getattr(calibration, "betas", None)
    if held is not None:
        init["betas"] = np.asarray(held, dtype=np.float64).reshape(-1)
    return solver.solve(
        cap.pos,
        cap.rot,
        cap.valid,
        fps=cap.fps,
        init=init or None,
        iterations=iterations,
        hold_betas=held is not None,
        joint_centres=centres,
        hinges=hinges,
    )


def _solution_motion(
    sol, capture, marker_set: str, calibrated: bool, body, fps: float
) -> SMPLMotion:
    """The solver's answer as an :class:`SMPLMotion` at ``fps`` Hz, named after the capture."""
    source = {
        "capture": capture.source,
        "marker_set": marker_set,
        "calibrated": calibrated,
        "solver_iterations": sol.iterations,
        "unseen_frames": sol.unseen,
    }
    return SMPLMotion(
        poses=sol.params.poses.double().numpy(),
        trans=sol.params.trans.double().numpy(),
        betas=sol.params.betas.double().numpy(),
        gender=getattr(body, "gender", "neutral"),
        fps=fps,
        name=Path(capture.source).stem if capture.source else "capture",
        source=source,
        joint_offsets=body.joint_offsets,
    )


def _check_method(method: str, iterations: int | None, predictor) -> None:
    """Raise ConfigError unless ``method`` is known, ``iterations`` is at least 1 and a network
    method has its ``predictor``."""
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if method != "network" and iterations is not None and iterations < 1:
        raise ConfigError(f"--iterations {iterations}: expected sweeps ≥ 1")
    if method in NETWORK_METHODS and predictor is None:
        raise ConfigError(f"method {method!r} needs a checkpoint (--ckpt)")


def _solver_body_and_markers(predictor, body, markers) -> tuple[object, MarkerSet]:
    """The body and marker set the solver fits: those given, else the checkpoint's, else the
    stand-in body and rbm14."""
    if body is None:
        body = checkpoint_body(predictor.body_id if predictor is not None else "standin")
    if markers is None:
        markers = predictor.marker_set if predictor is not None else DEFAULT_MARKERS
    ms = markers if isinstance(markers, MarkerSet) else load_marker_set(markers)
    return body, ms
