"""QualisysSource against a QTM RT server on loopback (tests/helpers/qtm_server.py)."""

from __future__ import annotations

import gc
import logging
import socket
import statistics
import struct
import threading
import time
import warnings

import numpy as np
import pytest
import roma
import torch
from helpers.qtm_server import QTMServer, data_packet, sixd_component
from qtm_rt import QRTPacket

from rbmcap.errors import ConfigError
from rbmcap.io.optitrack import Y_UP_TO_Z_UP
from rbmcap.live.sources.base import Source, SourceLost
from rbmcap.live.sources.qualisys import QUEUE_FRAMES, QualisysSource, convert_6d, packet_6d

NAMES = ("pelvis", "left_foot", "right foot <R&D>")
RATE = 200.0


def random_poses(frames: int, bodies: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(T, N, 3) positions in mm within ±2 m and (T, N, 3, 3) random rotations."""
    rng = np.random.default_rng(seed)
    pos = rng.uniform(-2000.0, 2000.0, (frames, bodies, 3))
    quat = torch.from_numpy(rng.normal(size=(frames, bodies, 4)))
    rot = roma.unitquat_to_rotmat(quat / quat.norm(dim=-1, keepdim=True)).numpy()
    return pos, rot


@pytest.fixture
def server():
    with QTMServer(NAMES, random_poses(64, len(NAMES)), frequency=RATE) as srv:
        yield srv


@pytest.fixture
def opened(server):
    source = QualisysSource(port=server.port, timeout=2.0)
    source.open()
    yield source
    source.close()


@pytest.fixture
def raw_server():
    """``serve(reply)``: a port on loopback whose one client gets ``reply`` and then silence."""
    listener = socket.create_server(("127.0.0.1", 0))
    clients = []

    def accept(reply: bytes) -> None:
        sock, _ = listener.accept()
        clients.append(sock)
        sock.sendall(reply)

    def serve(reply: bytes) -> int:
        threading.Thread(target=accept, args=(reply,), daemon=True).start()
        return listener.getsockname()[1]

    yield serve
    for sock in clients:
        sock.close()
    listener.close()


def read_frames(source: QualisysSource, count: int, within: float = 2.0) -> list:
    frames, end = [], time.perf_counter() + within
    while len(frames) < count and time.perf_counter() < end:
        frame = source.read(0.2)
        if frame is not None:
            frames.append(frame)
    assert len(frames) == count, f"only {len(frames)} of {count} frames within {within} s"
    return frames


def test_source_states_names_and_fps_from_the_parameters(server, opened):
    assert isinstance(opened, Source)
    assert opened.names == NAMES
    assert opened.fps == RATE
    assert opened.name == f"qtm://127.0.0.1:{server.port}"
    assert read_frames(opened, 1)[0].names == NAMES


def test_frames_carry_the_sent_poses_in_metres_and_z_up(server, opened):
    for frame in read_frames(opened, 5):
        pos_mm, rot, tracked = server.pose(frame.frame)
        assert tracked.all() and frame.valid.all()
        assert frame.pos.dtype == np.float32 and frame.pos.shape == (3, 3)
        assert frame.rot.dtype == np.float32 and frame.rot.shape == (3, 3, 3)
        np.testing.assert_allclose(frame.pos, pos_mm / 1000.0, rtol=1e-6, atol=1e-9)
        # rotation elements near zero are bounded by float32's absolute resolution instead
        np.testing.assert_allclose(frame.rot, rot, rtol=1e-6, atol=1e-7)
        assert frame.timestamp == pytest.approx(frame.frame / RATE, abs=1e-6)


def test_frames_follow_one_another_at_the_capture_rate(opened):
    frames = read_frames(opened, 6)
    steps = np.diff([f.frame for f in frames])
    assert (steps >= 1).all()
    assert min(steps) == 1


def test_y_up_qtm_world_is_turned_to_z_up(server):
    source = QualisysSource(port=server.port, up="y", timeout=2.0)
    source.open()
    try:
        frame = read_frames(source, 1)[0]
    finally:
        source.close()
    pos_mm, rot, _ = server.pose(frame.frame)
    np.testing.assert_allclose(frame.pos, pos_mm / 1000.0 @ Y_UP_TO_Z_UP.T, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(frame.rot, Y_UP_TO_Z_UP @ rot, rtol=1e-6, atol=1e-6)


def test_untracked_body_is_invalid_with_zero_position_and_identity(server, opened):
    server.hide("left_foot")
    time.sleep(0.05)
    while opened.read(0.0) is not None:  # the frames queued before the body went
        pass
    frame = read_frames(opened, 1)[0]
    assert frame.valid.tolist() == [True, False, True]
    np.testing.assert_array_equal(frame.pos[1], np.zeros(3))
    np.testing.assert_array_equal(frame.rot[1], np.eye(3))
    np.testing.assert_allclose(frame.pos[0], server.pose(frame.frame)[0][0] / 1000.0, rtol=1e-6)


def test_rotation_elements_arrive_column_major_as_world_from_body():
    """A quarter turn about Z (body X along world Y) sent element by element as QTM does."""
    world_from_body = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    wire = sixd_component(np.array([[1000.0, -2000.0, 500.0]]), world_from_body[None])
    floats = struct.unpack_from("<12f", wire, 16)
    assert floats[3:6] == (0.0, 1.0, 0.0)  # the first column: the body's X axis in the world
    pos, rot, valid = convert_6d(np.array(floats)[None])
    np.testing.assert_array_equal(rot[0], world_from_body)
    np.testing.assert_allclose(pos[0], [1.0, -2.0, 0.5])
    assert valid.tolist() == [True]


def test_bodies_read_from_the_wire_match_qtm_rts_own_6d_parser():
    pos, rot = random_poses(1, 4, seed=5)
    pos[0, 2] = rot[0, 2] = np.nan
    wire = data_packet(12345, 7, [sixd_component(pos[0], rot[0])])
    packet = QRTPacket(wire[8:])
    info, bodies = packet.get_6d()
    reference = np.array([(*p, *r.matrix) for p, r in bodies], dtype=np.float32)
    assert info.body_count == 4 and (packet.framenumber, packet.timestamp) == (7, 12345)
    np.testing.assert_array_equal(packet_6d(packet), reference)


def test_requested_frequency_is_asked_for_and_stated_as_fps(server):
    source = QualisysSource(port=server.port, frequency=50, timeout=2.0)
    source.open()
    try:
        frames = read_frames(source, 4)
    finally:
        source.close()
    assert "streamframes frequency:50 6d" in server.commands
    assert source.fps == 50.0
    assert np.diff([f.frame for f in frames]).min() >= 4


@pytest.mark.exclusive  # counts the frames the server sends while the reader sleeps
def test_a_slow_reader_gets_every_frame_in_order_and_only_a_bounded_backlog(server, opened):
    first = read_frames(opened, 1)[0].frame
    time.sleep((QUEUE_FRAMES + 40) / RATE)  # the reader away for more than the queue holds
    numbers = []
    while (frame := opened.read(0.0)) is not None:
        numbers.append(frame.frame)
    assert QUEUE_FRAMES - 2 <= len(numbers) <= QUEUE_FRAMES + 2  # bounded: the oldest went
    assert opened.overwritten >= 20 and numbers[0] > first + 1
    assert (np.diff(numbers) > 0).all()  # in order, never the newest before an older one


def test_dropped_frames_show_as_gaps_in_frame_numbers(server, opened):
    server.drop(0.5, seed=3)
    numbers = [f.frame for f in read_frames(opened, 12)]
    assert (np.diff(numbers) > 0).all()
    assert np.diff(numbers).max() > 1


def test_restarted_server_makes_read_raise_source_lost_then_reopen_works(server, opened):
    read_frames(opened, 1)
    server.restart()
    with pytest.raises(SourceLost, match="connection lost"):
        for _ in range(20):
            opened.read(0.1)
    opened.close()
    opened.open()
    assert read_frames(opened, 2)[0].names == NAMES


def test_stopped_server_makes_open_raise_source_lost_quickly(server):
    server.stop()
    source = QualisysSource(port=server.port, timeout=2.0)
    start = time.perf_counter()
    with pytest.raises(SourceLost) as raised:
        source.open()
    assert time.perf_counter() - start < 1.0
    assert "\n" not in str(raised.value) and str(server.port) in str(raised.value)
    with pytest.raises(SourceLost, match="not open"):
        source.read(0.01)
    source.close()
    source.close()


def test_a_server_that_never_answers_is_lost_after_the_timeout(raw_server):
    source = QualisysSource(port=raw_server(b""), timeout=0.3)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(SourceLost, match=r"no answer within 0\.3 s"):
            source.open()
        gc.collect()
    assert time.perf_counter() - start < 2.0
    assert [str(w.message) for w in caught] == []


def test_a_server_sending_unreadable_packets_is_lost_with_the_reason(raw_server):
    source = QualisysSource(port=raw_server(struct.pack("<II", 12, 99) + b"abcd"), timeout=2.0)
    with pytest.raises(SourceLost, match="unreadable data from QTM"):
        source.open()
    source.close()


def test_nothing_reaches_stderr_the_logs_or_warnings(server, capfd, caplog):
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        source = QualisysSource(port=server.port, timeout=2.0)
        source.open()
        read_frames(source, 2)
        server.restart()
        with pytest.raises(SourceLost):
            for _ in range(20):
                source.read(0.1)
        source.close()
        server.stop()
        with pytest.raises(SourceLost):
            source.open()
        source.close()
        gc.collect()
    assert [str(w.message) for w in caught] == []
    # asyncio's debug mode (python -X dev) reports callbacks that a busy machine delayed
    slow = "Executing "
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [m for m in messages if not m.startswith(slow)] == []
    assert capfd.readouterr().err == ""


def test_read_returns_soon_after_the_packet_arrives(opened):
    read_frames(opened, 1)
    delays = []
    for _ in range(10):
        frame = opened.read(0.5)
        delays.append(time.perf_counter() - frame.received)
    assert statistics.median(delays) < 0.05


def test_bad_options_are_config_errors():
    with pytest.raises(ConfigError, match="up axis"):
        QualisysSource(up="x")
    with pytest.raises(ConfigError, match="port"):
        QualisysSource(port=70000)
    with pytest.raises(ConfigError, match="frequency"):
        QualisysSource(frequency=0)
