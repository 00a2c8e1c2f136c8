"""Live calibration: record the first seconds of a stream, calibrate each subject's plates with
``rbmcap calibrate``'s fit over frames, write the calibrations and stream on with them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rbmcap.calibrate.session_fit import calibrate
from rbmcap.errors import DataError
from rbmcap.inference.capture import checkpoint_body
from rbmcap.io.capture import Capture
from rbmcap.markers.synth import Synthesizer

log = logging.getLogger("rbmcap.live")


@dataclass
class LiveCalibration:
    """What ``rbmcap live --calibrate SECONDS`` does before posing (see the module docstring).

    Attributes:
        seconds: how long to record (any static pose, or a short movement).
        out: the calibration YAML to write; several subjects write one each, the subject's
            name inserted before the suffix (``calib.yaml`` → ``calib_alice.yaml``).
        betas: (B,) the subject's known shape (held), or None to fit it.
    """

    seconds: float
    out: Path
    betas: np.ndarray | None = None

    def __call__(self, session, first) -> None:
        frames = [first, *session.collect(self.seconds)]
        fps = session.options.fps or session.source.fps
        for stream in session.streams:
            calib = self.calibrate(stream, frames, fps, session.predictor)
            path = self.path_for(stream.subject.name, len(session.streams))
            calib.save(path)
            log.warning(
                "calibrated %s on %d frames: %s",
                stream.subject.name or "the subject",
                len(frames),
                path,
            )
            stream.set_calibration(calib)
            self.written.append(path)

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.written: list[Path] = []

    def path_for(self, subject: str, subjects: int) -> Path:
        """Where ``subject``'s calibration is written."""
        if subjects == 1 or not subject:
            return self.out
        return self.out.with_name(f"{self.out.stem}_{subject}{self.out.suffix}")

    def calibrate(self, stream, frames, fps: float, predictor):
        """Calibrate ``stream``'s subject on ``frames`` (its plates as observed)."""
        pos, rot, valid = (np.stack(x) for x in zip(*(stream.observed(f) for f in frames)))
        if not valid.any(axis=0).all():
            unseen = [n for n, v in zip(stream.marker_names, valid.any(axis=0)) if not v]
            raise DataError(f"live calibration: plate {unseen[0]!r} was never seen while recording")
        capture = Capture(
            fps=float(fps),
            names=list(stream.marker_names),
            pos=pos,
            rot=rot,
            valid=valid,
            frame_numbers=np.array([f.frame for f in frames], dtype=np.int64),
            format="live",
            source=f"live:{stream.subject.name or 'subject'}",
        )
        synth = Synthesizer(checkpoint_body(predictor.body_id), predictor.marker_set)
        return calibrate(capture, synth, betas=self.betas)
