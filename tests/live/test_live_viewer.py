"""The live viewer sink: a viser server whose mesh follows each pose as the body model poses it,
whose plates follow the pose (unseen ones greyed where last seen), with a readout of the session's
counters; and (slow) a real browser showing a body that moves on screen as poses stream in."""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import roma
import torch
from helpers.browser import (
    CHROMIUM,
    SOFTWARE_GL,
    VIEWPORT,
    changed_mask,
    colour_mask,
    needs_browser_tools,
    screenshot_until,
)

from rbmcap.errors import ConfigError, DataError
from rbmcap.live.frames import LivePose, LiveStats
from rbmcap.live.sinks import viewer as viewer_module
from rbmcap.live.sinks.base import Sink, SubjectInfo
from rbmcap.live.sinks.viewer import ViewerSink, readout_text

pytest.importorskip("viser")

PLATE_JOINTS = (15, 20, 21)  # head, left wrist, right wrist
PLATES = ("head", "left_hand", "right_hand")
UPRIGHT = {0: (np.pi / 2, 0.0, 0.0)}  # SMPL's Y up turned to the world's Z up
ARMS_UP_KNEE_BENT = {
    **UPRIGHT,
    16: (0.0, 0.0, 1.3),  # left shoulder: arm from +x (T-pose) towards up
    17: (0.0, 0.0, -1.3),
    1: (-1.0, 0.0, 0.0),  # left hip flexed: thigh forward
    4: (1.4, 0.0, 0.0),  # left knee bent: shin back
}
SHOTS = Path("/tmp/live_viewer_shots")


def _pose(body, rotvecs: dict, frame: int, betas=None, valid=(True, True, True)) -> LivePose:
    """A pose standing at the origin with the given joints' rotation vectors, and plates at the
    head and wrists (turned with their joints)."""
    rv = torch.zeros(24, 3)
    for joint, v in rotvecs.items():
        rv[joint] = torch.tensor(v)
    rotmats = roma.rotvec_to_rotmat(rv)
    trans = torch.tensor([0.0, 0.0, 0.95])
    betas = torch.zeros(10) if betas is None else torch.as_tensor(betas, dtype=torch.float32)
    with torch.no_grad():
        joints, grot = body.pose_joints(rotmats, betas, trans)
    idx = list(PLATE_JOINTS)
    return LivePose(
        subject="",
        frame=frame,
        timestamp=frame / 60.0,
        received=time.perf_counter(),
        rotmats=rotmats.numpy().astype(np.float32),
        trans=trans.numpy(),
        betas=betas.numpy(),
        plates_pos=joints[idx].numpy().astype(np.float32),
        plates_rot=grot[idx].numpy().astype(np.float32),
        plates_valid=np.asarray(valid, bool),
        index=frame,
    )


def _full_vertices(body, pose: LivePose) -> np.ndarray:
    with torch.no_grad():
        return body(pose.rotmats, pose.betas, pose.trans).vertices.numpy()


@pytest.fixture
def stats() -> LiveStats:
    return LiveStats()


@pytest.fixture
def sink(standin, stats):
    """An open viewer of one unnamed, uncalibrated subject on a free local port."""
    s = ViewerSink(port=0)
    s.open([SubjectInfo("", standin, "neutral", None, PLATES, 60.0)], stats)
    yield s
    s.close()


# ------------------------------------------------------------------------------ headless
def test_the_viewer_is_a_threaded_sink_on_the_bound_loopback_port(sink):
    assert isinstance(sink, Sink) and not sink.inline
    assert sink.port != 0 and sink.url == sink.name == f"http://127.0.0.1:{sink.port}"
    assert sink.server.get_port() == sink.port


def test_each_pose_skins_the_mesh_as_the_body_model_poses_it(sink, standin):
    assert sink.subjects[""].mesh is None  # no betas until the first pose
    shown = []
    for frame, rotvecs in enumerate((UPRIGHT, ARMS_UP_KNEE_BENT), start=1):
        pose = _pose(standin, rotvecs, frame)
        sink.send(pose)
        shown.append(sink.shown_vertices(""))
        err = np.linalg.norm(shown[-1] - _full_vertices(standin, pose), axis=-1)
        assert err.mean() < 0.003 and err.max() < 0.02, (err.mean(), err.max())  # correctives
    moved = np.linalg.norm(shown[1] - shown[0], axis=-1)
    assert moved.max() > 0.5 and (moved > 0.1).mean() > 0.1  # arms and a leg moved


def test_plates_follow_the_pose_and_an_unseen_one_stays_grey_where_last_seen(sink, standin):
    view = sink.subjects[""]
    first = _pose(standin, UPRIGHT, 1, valid=(True, True, False))  # right hand never seen yet
    sink.send(first)
    np.testing.assert_array_equal(view.observed.batched_scales, [1, 1, 0])
    np.testing.assert_allclose(view.observed.batched_positions[:2], first.plates_pos[:2], atol=1e-6)
    grey = view.missing.points.reshape(3, 3, 2, 3)
    assert np.allclose(grey[..., 1, :], grey[..., 0, :])  # nothing to grey out yet

    second = _pose(standin, ARMS_UP_KNEE_BENT, 2, valid=(True, False, True))
    sink.send(second)
    np.testing.assert_array_equal(view.observed.batched_scales, [1, 0, 1])
    np.testing.assert_allclose(view.observed.batched_positions[2], second.plates_pos[2], atol=1e-6)
    grey = view.missing.points.reshape(3, 3, 2, 3)
    np.testing.assert_allclose(grey[1, :, 0], first.plates_pos[[1, 1, 1]], atol=1e-6)
    assert np.linalg.norm(grey[1, :, 1] - grey[1, :, 0], axis=-1).min() > 0.05
    assert np.allclose(grey[[0, 2], :, 1], grey[[0, 2], :, 0])


def test_the_readout_shows_frame_counters_and_latency_percentiles():
    stats = LiveStats(
        processed=120, dropped=3, lost=1, latencies_ms=[float(x) for x in range(1, 101)]
    )
    text = readout_text(stats, {"alice": 812, "bob": -1})
    for row in (
        "| frame · alice | 812 |",
        "| frame · bob | – |",
        "| frames posed | 120 |",
        "| dropped | 3 |",
        "| lost | 1 |",
        "| latency p50 | 50.5 ms |",
        "| latency p99 | 99.0 ms |",
    ):
        assert row in text, row
    assert "| latency p50 | – |" in readout_text(LiveStats(), {"": -1})


def test_the_readout_on_the_page_follows_the_poses_at_most_every_interval(
    sink, stats, standin, monkeypatch
):
    assert viewer_module.READOUT_EVERY_S <= 0.2  # at most 5 updates a second
    monkeypatch.setattr(viewer_module, "READOUT_EVERY_S", 60.0)
    stats.processed = 7
    sink.send(_pose(standin, UPRIGHT, 41))  # the first pose is shown at once
    assert (
        "| frame | 41 |" in sink.readout.content and "| frames posed | 7 |" in sink.readout.content
    )
    sink.send(_pose(standin, UPRIGHT, 42))  # within the interval: not yet
    assert "| frame | 41 |" in sink.readout.content
    monkeypatch.setattr(viewer_module, "READOUT_EVERY_S", 0.0)
    sink.send(_pose(standin, UPRIGHT, 43))
    assert "| frame | 43 |" in sink.readout.content


def test_an_uncalibrated_subjects_mesh_is_rebuilt_when_its_betas_move(sink, standin, monkeypatch):
    view = sink.subjects[""]
    sink.send(_pose(standin, UPRIGHT, 1))
    rest = view.rest
    sink.send(_pose(standin, UPRIGHT, 2, betas=np.full(10, 0.01)))  # within the tolerance
    assert view.rest is rest
    monkeypatch.setattr(viewer_module, "RESHAPE_EVERY_S", 0.0)
    moved = _pose(standin, UPRIGHT, 3, betas=np.linspace(-1.5, 1.5, 10))
    sink.send(moved)
    assert view.rest is not rest
    np.testing.assert_allclose(view.betas, moved.betas)
    err = np.linalg.norm(sink.shown_vertices("") - _full_vertices(standin, moved), axis=-1)
    assert err.mean() < 0.003 and err.max() < 0.02


def test_a_calibrated_subject_keeps_its_betas(standin, monkeypatch):
    monkeypatch.setattr(viewer_module, "RESHAPE_EVERY_S", 0.0)
    calibrated = np.linspace(-1.0, 1.0, 10).astype(np.float32)
    s = ViewerSink(port=0)
    s.open([SubjectInfo("alice", standin, "neutral", calibrated, (), 60.0)], LiveStats())
    try:
        assert s.subjects["alice"].mesh is not None and s.subjects["alice"].observed is None
        pose = _pose(standin, UPRIGHT, 1)
        pose.subject = "alice"
        s.send(pose)
        np.testing.assert_array_equal(s.subjects["alice"].betas, calibrated)
        with pytest.raises(DataError, match="'bob'"):
            s.send(dataclasses.replace(pose, subject="bob"))
    finally:
        s.close()


def test_closing_twice_is_safe_and_later_poses_are_ignored(sink, standin):
    sink.close()
    sink.close()
    sink.send(_pose(standin, UPRIGHT, 1))
    assert sink.server is None


def test_a_port_out_of_range_is_a_config_error():
    with pytest.raises(ConfigError, match="70000"):
        ViewerSink(port=70000)


# ------------------------------------------------------------------------ a real browser (slow)
NETWORK_BLUE = (70, 130, 230)


class _Streamer:
    """Sends ``pose`` to the sink at 30 Hz from its own thread (as the session's sink thread
    would), counting frames in ``stats``; ``pose`` may be swapped while it runs."""

    def __init__(self, sink: ViewerSink, stats: LiveStats, pose: LivePose) -> None:
        self.sink, self.stats, self.pose = sink, stats, pose
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        frame = 0
        while not self._stop.wait(1 / 30):
            frame += 1
            pose = self.pose
            self.sink.send(dataclasses.replace(pose, frame=frame, index=frame))
            self.stats.processed += 1
            self.stats.latencies_ms.append(2.0 + frame % 5)
            self.sent = frame

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


def _keep(png: bytes, name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    path.write_bytes(png)
    SHOTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, SHOTS / name)
    return path


@pytest.mark.slow
def test_a_browser_shows_the_body_move_as_poses_stream_in(standin, tmp_path):
    needs_browser_tools()
    import playwright.sync_api as playwright

    stats = LiveStats()
    sink = ViewerSink(port=0)
    sink.open([SubjectInfo("", standin, "neutral", None, PLATES, 30.0)], stats)
    streamer = _Streamer(sink, stats, _pose(standin, UPRIGHT, 0))
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=SOFTWARE_GL
            )
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(120_000)  # software WebGL on a busy machine is slow
            page.goto(sink.url)
            page.wait_for_selector("canvas", timeout=60_000)
            rest = screenshot_until(page, lambda png: colour_mask(png, NETWORK_BLUE).sum() > 300)
            _keep(rest, "live_rest.png", tmp_path)
            for text in ("frames posed", "dropped", "latency p50", "latency p99"):
                assert page.get_by_text(text, exact=True).is_visible(), text

            streamer.pose = _pose(standin, ARMS_UP_KNEE_BENT, 0)
            swapped = streamer.sent
            while sink.subjects[""].frame <= swapped + 1:
                time.sleep(0.05)
            screenshot_until(
                page, lambda png: changed_mask(rest, png).mean() > 0.005, timeout_s=60.0
            )
            time.sleep(3.0)  # software WebGL may show a frame drawn halfway through the update
            moved = page.screenshot()
            _keep(moved, "live_arms_up_knee_bent.png", tmp_path)
            browser.close()
    finally:
        streamer.stop()
        sink.close()
    body = [colour_mask(png, NETWORK_BLUE) for png in (rest, moved)]
    assert body[0].sum() > 1000 and body[1].sum() > 1000, "no body drawn"
    region = body[0] | body[1]
    assert changed_mask(rest, moved)[region].mean() > 0.2, "the body did not move on screen"
    assert stats.processed > 10
