"""``rbmcap live`` as one library object: subjects, sinks and a session built from options, run
until done or interrupted, summarised."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rbmcap.errors import ConfigError
from rbmcap.live.frames import LiveStats
from rbmcap.live.session import LiveOptions, LiveSession
from rbmcap.live.source import Source
from rbmcap.live.subject import Subject


@dataclass
class SinkOptions:
    """Which sinks a live run feeds (None: not that one).

    Attributes:
        vmc: (host, port) to send VMC (OSC) to; udp_json: (host, port) for JSON datagrams;
        view: (host, port) the browser viewer binds; record: motion ``.npz`` path; bvh: BVH path.
    """

    vmc: tuple[str, int] | None = None
    udp_json: tuple[str, int] | None = None
    view: tuple[str, int] | None = None
    record: str | None = None
    bvh: str | None = None


@dataclass
class LiveRun:
    """A live run's parts (see :meth:`from_args` for the command line's)."""

    source: Source
    predictor: object
    subjects: list[Subject]
    sinks: list = field(default_factory=list)
    options: LiveOptions = field(default_factory=LiveOptions)
    calibration: object | None = None

    @classmethod
    def from_args(cls, args, source: Source) -> LiveRun:
        """From ``rbmcap live``'s parsed arguments."""
        from rbmcap.inference import Predictor
        from rbmcap.live.address import host_port

        sinks = SinkOptions(
            vmc=host_port(args.vmc, what="--vmc") if args.vmc else None,
            udp_json=host_port(args.udp_json, what="--udp-json") if args.udp_json else None,
            view=host_port(args.view, 8080, what="--view") if args.view else None,
            record=args.record,
            bvh=args.bvh,
        )
        calibration = None
        if args.calibrate is not None:
            from rbmcap.live.calibration import LiveCalibration

            if not args.calib_out:
                raise ConfigError("--calibrate needs --calib-out: where to write the calibration")
            if args.calibrate <= 0:
                raise ConfigError(f"--calibrate {args.calibrate:g}: expected seconds > 0")
            calibration = LiveCalibration(args.calibrate, Path(args.calib_out))
        options = LiveOptions(
            backend=args.backend,
            fps=args.fps,
            duration=args.duration,
            max_frames=args.frames,
            wait_s=args.wait,
            hot=args.hot,
        )
        return cls(
            source=source,
            predictor=Predictor.from_checkpoint(args.ckpt),
            subjects=subjects_from(args.subject, args.calib, args.map),
            sinks=build_sinks(sinks),
            options=options,
            calibration=calibration,
        )

    def run(self) -> tuple[LiveStats, bool]:
        """Run the session; returns its counters and whether it was stopped by Ctrl-C or
        SIGTERM (the frame being posed is finished, then every sink is closed: recordings
        written)."""
        _show_progress()
        session = LiveSession(
            self.source,
            self.predictor,
            self.sinks,
            self.subjects,
            self.options,
            before_posing=self.calibration,
        )
        self.session = session
        with _stopping_on_signals(session) as stopped:
            try:
                stats = session.run()
            except KeyboardInterrupt:  # a second Ctrl-C: stop at once (sinks still close)
                return session.stats, True
        return stats, bool(stopped)

    def summary(self, stats: LiveStats, interrupted: bool) -> dict:
        """A JSON-ready summary: the counters, latency, phases, whether it waited hot, sinks and
        files written."""
        written = [str(p) for s in self.sinks for p in getattr(s, "written", [])]
        if self.calibration is not None:
            written += [str(p) for p in self.calibration.written]
        return {
            "source": self.source.name,
            "subjects": [s.name for s in self.subjects],
            "phases": getattr(self, "session", None) and self.session.phases,
            "hot": self.options.hot,
            **stats.summary(),
            "sinks": [s.name for s in self.sinks],
            "written": written,
            "interrupted": interrupted,
        }


def subjects_from(specs: list[str], calib: str | None, mapping: str | None) -> list[Subject]:
    """Subjects from ``--subject NAME[:CALIB]`` texts (none: one unnamed subject with ``calib``).

    Raises:
        ConfigError: ``--calib`` together with named subjects, a subject named twice.
    """
    from rbmcap.calibrate import Calibration
    from rbmcap.io.names import load_mapping

    names = load_mapping(mapping) if mapping else None
    if not specs:
        return [Subject("", Calibration.load(calib) if calib else None, names)]
    if calib:
        raise ConfigError("--calib is for one unnamed subject; give --subject NAME:CALIB instead")
    subjects = []
    for spec in specs:
        name, path = parse_subject(spec)
        if any(s.name == name for s in subjects):
            raise ConfigError(f"--subject {name!r} given twice")
        subjects.append(Subject(name, Calibration.load(path) if path else None, names))
    return subjects


def build_sinks(opts: SinkOptions) -> list:
    """The sinks ``opts`` asks for."""
    sinks: list = []
    if opts.vmc:
        from rbmcap.live.sinks.vmc import VMCSink

        sinks.append(VMCSink(host=opts.vmc[0], port=opts.vmc[1]))
    if opts.udp_json:
        from rbmcap.live.sinks.udp_json import UDPJSONSink

        sinks.append(UDPJSONSink(host=opts.udp_json[0], port=opts.udp_json[1]))
    if opts.record or opts.bvh:
        from rbmcap.live.sinks.recording import RecordingSink

        sinks.append(RecordingSink(npz=opts.record, bvh=opts.bvh))
    if opts.view:
        from rbmcap.live.sinks.viewer import ViewerSink

        sinks.append(ViewerSink(host=opts.view[0], port=opts.view[1]))
    return sinks


def _show_progress() -> None:
    """The session's messages (waiting, reconnecting, calibrated) on stderr, once."""
    log = logging.getLogger("rbmcap.live")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("rbmcap live: %(message)s"))
        log.addHandler(handler)
        log.propagate = False


def parse_subject(text: str) -> tuple[str, str | None]:
    """``NAME[:CALIB]`` as (name, calibration path or None)."""
    name, _, calib = text.partition(":")
    if not name:
        raise ConfigError(f"--subject {text!r}: expected NAME[:CALIB.yaml]")
    return name, calib or None


@contextlib.contextmanager
def _stopping_on_signals(session):
    """Inside the block, the first Ctrl-C or SIGTERM asks ``session`` to stop after the frame
    it is posing (so no sink is interrupted half-way through a frame); a second one interrupts.
    Yields a list that holds the signals received. Outside the main thread: nothing changes."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def stop(signum, frame) -> None:
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        session.stop()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
