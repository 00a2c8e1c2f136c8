"""A live run built in Python from typed options, as ``rbmcap live`` builds it: :class:`LiveSetup`
and :class:`SinkOptions` check their values when made, :meth:`LivePipeline.build` makes the run
(rbmcap/live/pipeline.py)."""

from __future__ import annotations

import math

import pytest
import torch
from helpers.live import KeepingSink, synthetic_take

from rbmcap.errors import ConfigError
from rbmcap.live.pipeline import LivePipeline, LiveSetup, SinkOptions, build_sinks
from rbmcap.live.session import LiveOptions
from rbmcap.live.sinks.recording import RecordingSink
from rbmcap.live.sinks.udp_json import UDPJSONSink
from rbmcap.live.sources.replay import ReplaySource
from rbmcap.motion.smpl_motion import SMPLMotion


def test_a_setup_made_in_python_runs_a_replay_to_a_recording(tmp_path):
    take = synthetic_take(120, fps=120.0)
    out = tmp_path / "rec.npz"
    setup = LiveSetup(
        ckpt="standin-rbm14-stream",
        sinks=SinkOptions(record=str(out)),
        session=LiveOptions(backend="trace"),
    )
    run = LivePipeline.build(ReplaySource(take), setup)
    assert [type(s) for s in run.sinks] == [RecordingSink] and run.calibration is None
    stats, interrupted = run.run()
    summary = run.summary(stats, interrupted)
    assert summary["processed"] > 0 and not interrupted
    assert summary["written"] == [str(out)]
    assert SMPLMotion.load(out).num_frames == summary["processed"]


def test_sink_addresses_default_to_loopback_and_the_viewer_to_its_port():
    addresses = SinkOptions(vmc="39539", udp_json="0.0.0.0:9000", view="10.0.0.2:").addresses()
    assert addresses == {
        "vmc": ("127.0.0.1", 39539),
        "udp_json": ("0.0.0.0", 9000),
        "view": ("10.0.0.2", 8080),
    }


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SinkOptions(vmc="host:"), "--vmc 'host:': expected [HOST:]PORT"),
        (lambda: SinkOptions(udp_json="70000"), "--udp-json '70000': port 70000 is outside"),
        (lambda: LiveSetup("m", calibrate_s=2.0), "--calibrate needs --calib-out"),
        (lambda: LiveSetup("m", calibrate_s=0.0, calib_out="c.yaml"), "expected seconds > 0"),
        (lambda: LiveSetup("m", threads=0), "--threads 0: expected a whole number"),
    ],
)
def test_bad_options_are_refused_when_made(make, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        make()


def test_each_sink_asked_for_is_built_at_its_address(tmp_path):
    sinks = build_sinks(SinkOptions(udp_json="9000", bvh=str(tmp_path / "a.bvh")))
    assert [type(s) for s in sinks] == [UDPJSONSink, RecordingSink]
    assert (sinks[0].host, sinks[0].port) == ("127.0.0.1", 9000)


class ThreadCounting(KeepingSink):
    """A :class:`KeepingSink` noting torch's thread count as each pose arrives."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[int] = set()

    def send(self, pose) -> None:
        super().send(pose)
        self.seen.add(torch.get_num_threads())


@pytest.mark.parametrize(("threads", "posing"), [(None, 1), (2, 2)])
def test_a_run_poses_at_one_torch_thread_unless_told_and_gives_the_callers_count_back(
    threads, posing
):
    setup = LiveSetup(
        ckpt="standin-rbm14-stream",
        session=LiveOptions(backend="trace"),
        **({} if threads is None else {"threads": threads}),
    )
    run = LivePipeline.build(ReplaySource(synthetic_take(24, fps=60.0), rate=math.inf), setup)
    sink = ThreadCounting()
    run.sinks.append(sink)
    callers = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        stats, _ = run.run()
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(callers)
    assert sink.seen == {posing} and stats.processed == len(sink.poses) == 23
    assert run.summary(stats, False)["threads"] == posing


def test_the_compiled_step_holds_bfloat16_weights_unless_told_otherwise():
    """As accurate and a third faster paced (docs/live.md#a-step-that-stays-in-cache); a narrow
    type outside a compile would be slower, so other backends keep float32."""
    assert LiveSetup("m").weights() == "bfloat16"
    assert LiveSetup("m", session=LiveOptions(backend="trace")).weights() == "float32"
    assert LiveSetup("m", precision="int8").weights() == "int8"
    assert LiveSetup("m", precision="float32").weights() == "float32"
