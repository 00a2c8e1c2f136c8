"""A live run as one library object: a source, a model, subjects and sinks assembled from a
:class:`LiveSetup` into a :class:`LivePipeline`, run until done or interrupted, summarised."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rbmcap.baseline.config import load_solver_config
from rbmcap.calibrate import Calibration
from rbmcap.errors import ConfigError
from rbmcap.inference import Predictor
from rbmcap.inference.refine import RefineOptions
from rbmcap.io.names import load_mapping
from rbmcap.live.calibration import LiveCalibration
from rbmcap.live.frames import LiveStats
from rbmcap.live.session import LiveOptions, LiveSession
from rbmcap.live.sinks.base import Sink
from rbmcap.live.sinks.recording import RecordingSink
from rbmcap.live.sources.base import LOOPBACK, Source
from rbmcap.live.subject import Subject

VIEW_PORT = 8080
"""The browser viewer's port when its address names none."""

THREADS = 1
"""torch's intra-op threads while a live run poses. One frame's step is a few small products:
split across a pool it gains nothing, and the pool's threads spin against whatever else runs
on the machine, which stalls the step (docs/live.md#the-command-line)."""


@dataclass(frozen=True)
class SinkOptions:
    """Which sinks a live run feeds (None: not that one); addresses are ``[HOST:]PORT`` texts
    (the host defaults to loopback), checked when the options are made.

    Attributes:
        vmc: where to send VMC (OSC); udp_json: where to send JSON datagrams.
        view: where the browser viewer binds (port :data:`VIEW_PORT` when only ``HOST:`` is
            given).
        record: motion ``.npz`` path; bvh: BVH path (both written when the run ends).
    """

    vmc: str | None = None
    udp_json: str | None = None
    view: str | None = None
    record: str | None = None
    bvh: str | None = None

    def __post_init__(self) -> None:
        self.addresses()

    def addresses(self) -> dict[str, tuple[str, int]]:
        """(host, port) of each network sink asked for, by field name.

        Raises:
            ConfigError: an address without a port, or a port outside 0..65535.
        """
        texts = {"vmc": self.vmc, "udp_json": self.udp_json, "view": self.view}
        return {
            name: host_port(text, VIEW_PORT if name == "view" else None, what=_flag(name))
            for name, text in texts.items()
            if text
        }


@dataclass(frozen=True)
class LiveSetup:
    """Everything a live run is built from besides its source (what ``rbmcap live`` takes).

    Attributes:
        ckpt: the causal stream model: a shipped model's name or a checkpoint path.
        subjects: ``NAME[:CALIB]`` texts, one per subject whose rigid bodies are named
            ``NAME_<plate>``, each with its calibration YAML (empty: one unnamed subject).
        calib: the unnamed subject's calibration YAML (None: uncalibrated).
        mapping: a name mapping YAML {rigid body: plate} (None: the names as streamed).
        sinks: which sinks to feed; session: how the session runs.
        calibrate_s: record this many seconds first, calibrate every subject, then pose with
            the result (None: no live calibration); calib_out: the YAML that calibration writes.
        threads: torch's intra-op threads while the run poses (and fits a live calibration),
            :data:`THREADS` unless told otherwise; the caller's count is restored after.
        precision: the type the stream network's weights are held in
            (:data:`rbmcap.inference.narrow.PRECISIONS`: ``float32`` as trained, ``bfloat16``
            or ``int8`` to stay in a core's cache, :mod:`rbmcap.inference.narrow`); None:
            ``bfloat16`` for the ``compiled`` backend (as accurate, a third faster paced at
            240 Hz: docs/live.md#a-step-that-stays-in-cache), else ``float32`` (a narrow type
            outside a compile is slower).

    Raises:
        ConfigError: ``calibrate_s`` without ``calib_out``, or not above 0 s; ``threads``
            not a whole number above 0; a refinement budget (``session.refine``) that is not
            seconds ≥ 0, or a refinement's solver configuration that does not load.
    """

    ckpt: str
    subjects: tuple[str, ...] = ()
    calib: str | None = None
    mapping: str | None = None
    sinks: SinkOptions = SinkOptions()
    session: LiveOptions = field(default_factory=LiveOptions)
    calibrate_s: float | None = None
    calib_out: str | None = None
    threads: int = THREADS
    precision: str | None = None

    def __post_init__(self) -> None:
        _check_threads(self.threads)
        RefineOptions.of(self.session.refine)
        if self.session.refine is not None:  # a bad --solver-config fails before the source opens
            load_solver_config(self.session.refine_config)
        if self.calibrate_s is None:
            return
        if not self.calib_out:
            raise ConfigError("--calibrate needs --calib-out: where to write the calibration")
        if self.calibrate_s <= 0:
            raise ConfigError(f"--calibrate {self.calibrate_s:g}: expected seconds > 0")

    def weights(self) -> str:
        """The type the network's weights are held in (see ``precision``)."""
        if self.precision is not None:
            return self.precision
        return "bfloat16" if self.session.backend == "compiled" else "float32"


@dataclass
class LivePipeline:
    """A live run's parts (:meth:`build` makes them from a :class:`LiveSetup`); ``threads``:
    torch's intra-op threads while it runs (see :attr:`LiveSetup.threads`)."""

    source: Source
    predictor: Predictor
    subjects: list[Subject]
    sinks: list[Sink] = field(default_factory=list)
    options: LiveOptions = field(default_factory=LiveOptions)
    calibration: LiveCalibration | None = None
    threads: int = THREADS

    def __post_init__(self) -> None:
        _check_threads(self.threads)

    @classmethod
    def build(cls, source: Source, setup: LiveSetup) -> LivePipeline:
        """The run ``setup`` describes, reading ``source``: loads the model and calibrations
        and makes the sinks (their sockets open when it runs)."""
        calibration = None
        if setup.calibrate_s is not None:
            calibration = LiveCalibration(setup.calibrate_s, Path(setup.calib_out))
        return cls(
            source=source,
            predictor=Predictor.from_checkpoint(setup.ckpt, precision=setup.weights()),
            subjects=subjects_from(list(setup.subjects), setup.calib, setup.mapping),
            sinks=build_sinks(setup.sinks),
            options=setup.session,
            calibration=calibration,
            threads=setup.threads,
        )

    def run(self) -> tuple[LiveStats, bool]:
        """Run the session at ``threads`` torch threads (the caller's count is back when it
        returns); returns its counters and whether it was stopped by Ctrl-C or SIGTERM (the
        frame being posed is finished, then every sink is closed: recordings written)."""
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
        with _torch_threads(self.threads), _stopping_on_signals(session) as stopped:
            try:
                stats = session.run()
            except KeyboardInterrupt:  # a second Ctrl-C: stop at once (sinks still close)
                return session.stats, True
        return stats, bool(stopped)

    def summary(self, stats: LiveStats, interrupted: bool) -> dict:
        """A JSON-ready summary: the counters, latency, phases, whether it waited hot, torch's
        threads, sinks and files written."""
        written = [str(p) for s in self.sinks for p in getattr(s, "written", [])]
        if self.calibration is not None:
            written += [str(p) for p in self.calibration.written]
        return {
            "source": self.source.name,
            "subjects": [s.name for s in self.subjects],
            "phases": getattr(self, "session", None) and self.session.phases,
            "hot": self.options.hot,
            "threads": self.threads,
            "precision": self.predictor.precision,
            **stats.summary(),
            "refine": self._refined(),
            "sinks": [s.name for s in self.sinks],
            "written": written,
            "interrupted": interrupted,
        }

    def _refined(self) -> dict | None:
        """What refinement did over every phase: its budget (ms), the frames it was given and
        the share of them it took a step on, their mean steps and time (ms); None without
        refinement."""
        if self.options.refine is None:
            return None
        group = getattr(getattr(self, "session", None), "group", None)
        stats = [s.refine_stats for s in getattr(group, "sessions", ())]
        frames = sum(s.frames for s in stats)
        return {
            "budget_ms": 1e3 * self.options.refine,
            "frames": frames,
            "stepped": sum(s.stepped for s in stats) / frames if frames else None,
            "steps_mean": sum(s.iterations for s in stats) / frames if frames else None,
            "ms_mean": 1e3 * sum(s.seconds for s in stats) / frames if frames else None,
        }


def subjects_from(specs: list[str], calib: str | None, mapping: str | None) -> list[Subject]:
    """Subjects from ``--subject NAME[:CALIB]`` texts (none: one unnamed subject with ``calib``).

    Raises:
        ConfigError: ``--calib`` together with named subjects, a subject named twice.
    """
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


def build_sinks(opts: SinkOptions) -> list[Sink]:
    """The sinks ``opts`` asks for."""
    addresses = opts.addresses()
    sinks: list[Sink] = []
    if "vmc" in addresses:
        from rbmcap.live.sinks.vmc import VMCSink  # optional extra: python-osc

        host, port = addresses["vmc"]
        sinks.append(VMCSink(host=host, port=port))
    if "udp_json" in addresses:
        from rbmcap.live.sinks.udp_json import UDPJSONSink  # loads the VMC sink's python-osc

        host, port = addresses["udp_json"]
        sinks.append(UDPJSONSink(host=host, port=port))
    if opts.record or opts.bvh:
        sinks.append(RecordingSink(npz=opts.record, bvh=opts.bvh))
    if "view" in addresses:
        from rbmcap.live.sinks.viewer import ViewerSink  # optional extra: viser

        host, port = addresses["view"]
        sinks.append(ViewerSink(host=host, port=port))
    return sinks


def host_port(text: str, default_port: int | None = None, what: str = "address") -> tuple[str, int]:
    """``[host:]port`` (host defaults to loopback) as (host, port); ``default_port`` when the
    text ends in ``:`` or is empty.

    Raises:
        ConfigError: no port, or a port that is not a number in 0..65535.
    """
    host, sep, port = str(text).rpartition(":")
    if not sep:
        host, port = LOOPBACK, str(text)
    if not port and default_port is not None:
        port = str(default_port)
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"{what} {text!r}: expected [HOST:]PORT") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"{what} {text!r}: port {number} is outside 0..65535")
    return host or LOOPBACK, number


def _flag(field_name: str) -> str:
    """The ``rbmcap live`` flag of a :class:`SinkOptions` field (``udp_json`` → ``--udp-json``)."""
    return "--" + field_name.replace("_", "-")


def _check_threads(threads: int) -> None:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigError(f"--threads {threads!r}: expected a whole number of threads, 1 or more")


@contextlib.contextmanager
def _torch_threads(threads: int):
    """Inside the block torch runs ``threads`` intra-op threads; the count before is restored
    after. (Inter-op threads are left alone: the step forks no work, and torch allows setting
    them only once, before any parallel work.)"""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


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
