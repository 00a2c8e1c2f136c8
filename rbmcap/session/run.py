"""A session's trials processed in one call, incrementally: each step's output is redone only
when what it is made from changed.

Per subject: every trial imported (``trials/<trial>/capture.npz``), the subject calibrated on its
static and the trials its spec names (``subjects/<subject>/calib.yaml``), then per dynamic trial
the motion by the session's method (``motion.npz`` and the exports asked for; with ``opensim``,
the OpenSim model scaled to the subject's static and inverse kinematics on it, ``opensim/``), its
clinical angles and gait events (``angles.csv``, ``angles.events.csv``) and what the report shows
(``summary.json``: what the capture lost, how well the answer fits the plates, and where the
capture carries its own joint centres or angles the comparison with them).

**Incremental and resumable.** Each output is written atomically, then a ``.key`` beside it: a
SHA-256 of the step, its settings and the bytes of every input file. A step whose output and
key are there and whose key is the same is not redone; a run killed anywhere leaves an output
without its key at worst, which the next run makes again (every step is deterministic, so the
outputs equal an uninterrupted run's).

**Partial failure.** A trial that fails (a bad file, a plate missing, a subject without a
static) is one line in ``session.log`` and the report; the other trials go on, and the result
says how many failed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from rbmcap.atomic import write_text_atomic
from rbmcap.calibrate import Calibration
from rbmcap.calibrate.session_fit import calibrate_files
from rbmcap.errors import USER_ERRORS, DataError, user_error
from rbmcap.evaluation.capture_angles import evaluate_capture_angles, write_angles
from rbmcap.evaluation.reference import evaluate_against_reference
from rbmcap.inference import Predictor
from rbmcap.inference.capture import checkpoint_body
from rbmcap.inference.solve_capture import infer_capture
from rbmcap.io.capture import Capture
from rbmcap.io.exports.motion import export_motion
from rbmcap.io.importer import ImportOptions, import_file
from rbmcap.io.opensim.export import export_opensim
from rbmcap.markers.synth import Synthesizer
from rbmcap.motion.smpl_motion import read_motion
from rbmcap.session.spec import SessionSpec

LOG = "session.log"
RESULT = "session.json"


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def step_key(step: str, settings: dict, inputs: list[Path]) -> str:
    """The key of a step: its name, settings and the bytes of its inputs."""
    text = json.dumps(
        {"step": step, "settings": settings, "inputs": [file_hash(p) for p in inputs]}
    )
    return hashlib.sha256(text.encode()).hexdigest()


def cached(out: Path, key: str, make: Callable[[Path], object]) -> bool:
    """Make ``out`` with ``make(out)`` unless it and its key (``out`` + ``.key``) are there with
    ``key``; True when it was made."""
    key_file = out.with_name(out.name + ".key")
    if out.is_file() and key_file.is_file() and key_file.read_text() == key:
        return False
    key_file.unlink(missing_ok=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    make(out)
    write_text_atomic(key_file, key)
    return True


@dataclass
class TrialResult:
    """One trial's outcome: ``status`` done or failed (``error``, one line), the outputs, the
    report's ``summary`` and the steps redone in this run."""

    name: str
    subject: str
    static: bool
    status: str = "done"
    error: str | None = None
    outputs: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    redone: list[str] = field(default_factory=list)


@dataclass
class SessionResult:
    """Every trial's result, the folder written and the run's wall time."""

    out: Path
    trials: list[TrialResult]
    seconds: float

    @property
    def failed(self) -> list[TrialResult]:
        return [t for t in self.trials if t.status == "failed"]

    def to_dict(self) -> dict:
        return {
            "out": str(self.out),
            "seconds": round(self.seconds, 2),
            "failed": len(self.failed),
            "trials": [
                {
                    "name": t.name,
                    "subject": t.subject,
                    "static": t.static,
                    "status": t.status,
                    "error": t.error,
                    "outputs": {k: str(v) for k, v in t.outputs.items()},
                    "redone": t.redone,
                    "summary": t.summary,
                }
                for t in self.trials
            ],
        }


class SessionRun:
    """One run of a session (module docstring); :meth:`run` does it, its steps mapped over the
    trials by ``mapper`` (``mapper(function, items) -> results``: in this process by default,
    or on a Dask cluster, :mod:`rbmcap.session.cluster`)."""

    def __init__(
        self,
        spec: SessionSpec,
        out: Path,
        log: Callable[[str], None] = print,
        mapper: Callable | None = None,
    ):
        self.spec = spec
        self.out = Path(out)
        self.say = log
        self.map = mapper or (lambda function, items: [function(item) for item in items])
        self._predictor: Predictor | None = None

    def __getstate__(self) -> dict:
        # shipped to a cluster's workers: each loads its own network, logs nothing
        return self.__dict__ | {"_predictor": None, "say": None, "map": None}

    def run(self) -> SessionResult:
        t0 = time.perf_counter()
        self.out.mkdir(parents=True, exist_ok=True)
        trials = [
            TrialResult(name, s.name, name == s.static)
            for s in self.spec.subjects
            for name in ([s.static] if s.static else []) + list(s.trials)
        ]
        trials = self.map(self._import_step, trials)
        by_name = {(t.subject, t.name): t for t in trials}
        jobs = []
        for subject in self.spec.subjects:
            mine = [t for t in trials if t.subject == subject.name]
            holder = by_name.get((subject.name, subject.static))
            if subject.static is None:
                _fail_all(
                    mine,
                    f"subject {subject.name}: no static trial (name one as `static:` "
                    "in session.yaml, or a file named *static* or *cal*)",
                )
            elif holder.status == "failed":
                _fail_all(mine, f"subject {subject.name}: its static {subject.static} failed")
            else:
                used = [subject.static] + [
                    n for n in subject.calibrate if by_name[(subject.name, n)].status == "done"
                ]
                holder.summary = {"calibrated_with": used}
                jobs.append(holder)
        for holder in self.map(self._calibrate_step, jobs):
            by_name[(holder.subject, holder.name)] = holder
            mine = [t for k, t in by_name.items() if k[0] == holder.subject and t is not holder]
            if holder.status == "failed":
                _fail_all(mine, f"subject {holder.subject}: {holder.error}")
            if holder.status == "done":
                for t in mine:
                    t.outputs["calibration"] = holder.outputs["calibration"]
        todo = [t for t in by_name.values() if not t.static and t.status == "done"]
        for t in self.map(self._process_step, todo):
            by_name[(t.subject, t.name)] = t
        results = [by_name[(t.subject, t.name)] for t in trials]
        lines = [
            f"{t.name}: done ({', '.join(t.redone) or 'nothing redone'})"
            if t.status == "done"
            else f"{t.name}: FAILED: {t.error}"
            for t in results
        ]
        for line in lines:
            self.say(line)
        result = SessionResult(self.out, results, time.perf_counter() - t0)
        write_text_atomic(self.out / LOG, "\n".join(lines) + "\n")
        write_text_atomic(self.out / RESULT, json.dumps(result.to_dict(), indent=1) + "\n")
        return result

    # ------------------------------------------------------------------------- the phases
    def _import_step(self, trial: TrialResult) -> TrialResult:
        return _guarded(trial, lambda: self._import(trial))

    def _calibrate_step(self, holder: TrialResult) -> TrialResult:
        subject = next(s for s in self.spec.subjects if s.name == holder.subject)
        used = holder.summary.pop("calibrated_with")
        captures = {n: self._dir_of(n) / "capture.npz" for n in used}
        return _guarded(holder, lambda: self._calibrate(subject, used, captures, holder))

    def _process_step(self, trial: TrialResult) -> TrialResult:
        calib = trial.outputs["calibration"]
        return _guarded(trial, lambda: self._process(trial, trial.outputs["capture"], calib))

    # ------------------------------------------------------------------------- the steps
    def _dir(self, trial: TrialResult) -> Path:
        return self._dir_of(trial.name)

    def _dir_of(self, name: str) -> Path:
        return self.out / "trials" / Path(name).stem

    def _import(self, trial: TrialResult) -> Path:
        raw = self.spec.folder / trial.name
        out = self._dir(trial) / "capture.npz"
        settings = {"plates": self.spec.plates, "markers": self.spec.markers}
        options = ImportOptions(plates=self.spec.plates, markers=self.spec.markers, progress=False)
        if cached(out, step_key("import", settings, [raw]), lambda p: import_file(raw, p, options)):
            trial.redone.append("import")
        trial.outputs["capture"] = out
        return out

    def _calibrate(self, subject, used, captures, holder) -> Path:
        out = self.out / "subjects" / subject.name / "calib.yaml"
        inputs = [captures[n] for n in used]
        settings = {"markers": self.spec.markers, "trials": used}

        def make(path: Path) -> None:
            calibrate_files(inputs, path, markers=self.spec.markers, check=False)

        if cached(out, step_key("calibrate", settings, inputs), make):
            holder.redone.append("calibrate")
        holder.outputs["calibration"] = out
        return out

    def _process(self, trial: TrialResult, capture_path: Path, calib_path: Path) -> None:
        folder = self._dir(trial)
        trial.outputs["calibration"] = calib_path
        settings = {"model": self.spec.model, "method": self.spec.method}
        motion_path = folder / "motion.npz"
        key = step_key("infer", settings, [capture_path, calib_path])
        if cached(motion_path, key, lambda p: self._infer(capture_path, calib_path, p)):
            trial.redone.append("infer")
        trial.outputs["motion"] = motion_path
        for kind in self.spec.exports:
            path = folder / f"motion.{kind}"
            if cached(
                path,
                step_key(kind, {}, [motion_path]),
                lambda p, k=kind: self._export(motion_path, k, p),
            ):
                trial.redone.append(kind)
            trial.outputs[kind] = path
        if self.spec.opensim:
            self._opensim(trial, motion_path, calib_path)
        angles = folder / "angles.csv"
        if cached(
            angles, step_key("angles", {}, [motion_path]), lambda p: write_angles(motion_path, p)
        ):
            trial.redone.append("angles")
        trial.outputs["angles"] = angles
        trial.outputs["events"] = angles.with_name("angles.events.csv")
        summary = folder / "summary.json"
        raw = self.spec.folder / trial.name
        inputs = [motion_path, capture_path, calib_path, raw]
        key = step_key("summary", {"markers": self.spec.markers}, inputs)
        if cached(
            summary, key, lambda p: self._summary(raw, capture_path, calib_path, motion_path, p)
        ):
            trial.redone.append("summary")
        trial.outputs["summary"] = summary
        trial.summary = json.loads(summary.read_text())
        if self.spec.opensim:
            trial.summary["opensim"] = json.loads(trial.outputs["opensim"].read_text())

    def _opensim(self, trial: TrialResult, motion_path: Path, calib_path: Path) -> None:
        """The subject's static inferred (once per subject), the OpenSim model scaled to it and
        inverse kinematics of the trial on the scaled model (``opensim/``; its figures in
        ``opensim/opensim.json``)."""
        subject = next(s for s in self.spec.subjects if s.name == trial.subject)
        static_capture = self._dir_of(subject.static) / "capture.npz"
        static = self.out / "subjects" / subject.name / "static_motion.npz"
        settings = {"model": self.spec.model, "method": self.spec.method}
        key = step_key("infer", settings, [static_capture, calib_path])
        if cached(static, key, lambda p: self._infer(static_capture, calib_path, p)):
            trial.redone.append("static motion")
        opensim = self.spec.opensim
        out = self._dir(trial) / "opensim" / "opensim.json"
        inputs = [motion_path, static, Path(opensim["model"])]
        settings = {"mass": opensim["mass"], "map": opensim["map"]}

        def make(path: Path) -> None:
            written = export_opensim(
                read_motion(motion_path),
                checkpoint_body(self._body_id(), None),
                path.parent,
                model=opensim["model"],
                marker_map=opensim["map"],
                static=read_motion(static),
                mass=opensim["mass"],
            )
            figures = {k: v for k, v in written.items() if not isinstance(v, Path)}
            write_text_atomic(path, json.dumps(figures, indent=1) + "\n")

        if cached(out, step_key("opensim", settings, inputs), make):
            trial.redone.append("opensim")
        trial.outputs["opensim"] = out

    def _infer(self, capture_path: Path, calib_path: Path, out: Path) -> None:
        if self._predictor is None:
            self._predictor = Predictor.from_checkpoint(self.spec.model)
        answer = infer_capture(
            Capture.load(capture_path),
            Calibration.load(calib_path),
            method=self.spec.method,
            predictor=self._predictor,
        )
        export_motion(answer.motion, None, npz=out)

    def _export(self, motion_path: Path, kind: str, out: Path) -> None:
        motion = read_motion(motion_path)
        body = checkpoint_body(self._body_id(), None)
        export_motion(motion, body, **{kind: out})

    def _body_id(self) -> str:
        if self._predictor is None:
            self._predictor = Predictor.from_checkpoint(self.spec.model)
        return self._predictor.body_id

    def _synth(self) -> Synthesizer:
        """The clean plates of the network's body and the session's marker set."""
        return Synthesizer(checkpoint_body(self._body_id(), None), self.spec.markers)

    def _summary(self, raw: Path, capture_path: Path, calib_path: Path, motion_path: Path, out):
        capture = Capture.load(capture_path)
        motion = read_motion(motion_path)
        calib = Calibration.load(calib_path)
        summary = {
            "frames": capture.num_frames,
            "fps": float(capture.fps),
            "lost": capture_losses(capture),
            "plate_fit_mm": plate_fit_mm(capture, calib, motion, self._synth()),
        }
        try:
            summary["reference"] = evaluate_against_reference(
                motion, capture, floor=False
            ).to_dict()
        except DataError:
            summary["reference"] = None  # the capture carries no reference joint centres
        summary["angles"] = None
        if raw.suffix.lower() == ".c3d":
            try:
                summary["angles"] = evaluate_capture_angles(motion, raw).to_dict()
            except DataError:
                pass  # the C3D carries no angles of its own
        write_text_atomic(out, json.dumps(summary, indent=1, default=float) + "\n")


def _guarded(trial: TrialResult, work: Callable[[], object]) -> TrialResult:
    """``trial`` after ``work()`` (one thread: a step's output does not depend on where it
    ran), failed in one line when ``work`` raises a user error."""
    if trial.status != "failed":
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            work()
        except USER_ERRORS as exc:
            trial.status, trial.error = "failed", user_error(exc)[0]
        finally:
            torch.set_num_threads(threads)
    return trial


def _fail_all(trials, why: str) -> None:
    for trial in trials:
        if trial.status == "done":
            trial.status, trial.error = "failed", why


def capture_losses(capture) -> dict:
    """Per plate the share of frames seen and the gaps (runs of frames not seen) a capture has:
    ``{plate: {"seen": 0..1, "gaps": n, "longest_gap_frames": n}}``."""
    out = {}
    for i, name in enumerate(capture.names):
        valid = np.asarray(capture.valid[:, i], dtype=bool)
        edges = np.diff(np.concatenate([[1], valid.astype(int), [1]]))
        starts, ends = np.flatnonzero(edges == -1), np.flatnonzero(edges == 1)
        out[name] = {
            "seen": round(float(valid.mean()), 4) if len(valid) else 0.0,
            "gaps": len(starts),
            "longest_gap_frames": int((ends - starts).max()) if len(starts) else 0,
        }
    return out


def plate_fit_mm(capture, calib, motion, synth: Synthesizer) -> float:
    """How well an answer fits the plates: the mean distance (mm) between the calibrated
    plates seen and the clean plates ``synth`` puts on the answer's body."""
    names = list(synth.markers.names)
    if motion.joint_offsets is not None:
        synth = Synthesizer(synth.body.with_joint_offsets(motion.joint_offsets), synth.markers)
    seen = calib.apply(capture.select(names))
    predicted = synth(motion.poses, motion.trans, np.asarray(motion.betas), fps=motion.fps)
    gap = np.linalg.norm(predicted.pos - seen.pos, axis=-1)[seen.valid]
    return round(float(gap.mean() * 1e3), 2) if gap.size else float("nan")


def run_session(
    spec: SessionSpec, out: str | Path, log: Callable[[str], None] = print, mapper=None
):
    """Process ``spec``'s trials into ``out`` (module docstring), its steps mapped by ``mapper``
    (default: in this process; :func:`rbmcap.session.cluster.dask_mapper`); returns the
    :class:`SessionResult`."""
    return SessionRun(spec, Path(out), log, mapper).run()
