"""NatNetSource against rbmcap's NatNetServer on loopback (rbmcap/live/sources/natnet.py and
rbmcap/bench/natnet_server.py)."""

from __future__ import annotations

import math
import socket
import sys
import time

import numpy as np
import pytest
import roma
import torch
from helpers.live import KeepingSink, synthetic_take
from helpers.natnet_sender import MotiveSender, frames_from_capture

from rbmcap.bench.natnet_server import BodyFrames, NatNetServer
from rbmcap.errors import ConfigError, FormatError
from rbmcap.inference import Predictor
from rbmcap.io.capture import Capture
from rbmcap.live.session import LiveOptions, LiveSession
from rbmcap.live.sources import natnet_decoder as nn
from rbmcap.live.sources.base import Source, SourceLost
from rbmcap.live.sources.natnet import NatNetSource, convert_bodies
from rbmcap.live.sources.replay import ReplaySource

NAMES = ("pelvis", "left foot", "right_hand <R&D>")
RATE = 200.0
GROUP = "239.255.42.99"


def body_frames(frames: int = 40, seed: int = 0) -> BodyFrames:
    """Random poses in metres, Z up; the last body untracked every third frame."""
    rng = np.random.default_rng(seed)
    quat = rng.normal(size=(frames, len(NAMES), 4))
    valid = np.ones((frames, len(NAMES)), bool)
    valid[::3, -1] = False
    return BodyFrames(
        NAMES,
        rng.uniform(-2, 2, (frames, len(NAMES), 3)),
        quat / np.linalg.norm(quat, axis=-1, keepdims=True),
        valid,
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_frames(source: NatNetSource, count: int, timeout: float = 2.0) -> list:
    frames, deadline = [], time.perf_counter() + timeout
    while len(frames) < count and time.perf_counter() < deadline:
        frame = source.read(0.2)
        if frame is not None:
            frames.append(frame)
    assert len(frames) == count, f"{len(frames)} of {count} frames within {timeout} s"
    return frames


def assert_matches(frame, data: BodyFrames) -> None:
    """A received frame equals the streamed one (frame numbers from 1, as the server counts)."""
    t = (frame.frame - 1) % len(data.valid)
    valid = data.valid[t]
    np.testing.assert_array_equal(frame.valid, valid)
    np.testing.assert_allclose(frame.pos[valid], data.pos[t][valid], atol=1e-5)
    rot = roma.unitquat_to_rotmat(torch.from_numpy(data.quat[t])).numpy()
    np.testing.assert_allclose(frame.rot[valid], rot[valid], atol=1e-5)
    assert (frame.pos[~valid] == 0).all() and (frame.rot[~valid] == np.eye(3)).all()


@pytest.fixture
def server():
    with NatNetServer(body_frames(), RATE, version=(4, 1)) as srv:
        yield srv


@pytest.fixture
def source(server):
    src = NatNetSource(command_port=server.command_port, data_port=0, timeout=1.0)
    yield src
    src.close()


def test_source_meets_the_source_protocol(source):
    assert isinstance(source, Source)
    assert source.name.startswith("natnet://127.0.0.1:") and source.finite is False


@pytest.mark.parametrize("version", [(3, 0), (3, 1), (4, 0), (4, 1)])
def test_unicast_frames_arrive_named_and_turned_z_up(version):
    data = body_frames()
    with NatNetServer(data, RATE, version=version) as server:
        source = NatNetSource(command_port=server.command_port, data_port=0)
        source.open()
        try:
            assert source.server_info.version == version
            frames = read_frames(source, 6)
        finally:
            source.close()
    for frame in frames:
        assert frame.names == NAMES
        assert frame.pos.dtype == np.float32 and frame.rot.shape == (3, 3, 3)
        assert_matches(frame, data)
    assert any(not f.valid[-1] for f in frames), "an untracked frame among six"


def test_y_up_stream_is_turned_as_the_csv_importer_does():
    """A body at Motive's (0, 1, 0) (one metre up) lands at rbmcap's (0, 0, 1)."""
    frame = nn.FrameOfData(
        1,
        0.0,
        np.array([1], np.int32),
        np.array([[0.0, 1.0, 0.0]], np.float32),
        np.array([[0.0, 0.0, 0.0, 1.0]], np.float32),
        np.array([True]),
        np.zeros(1, np.float32),
    )
    pos, rot, _ = convert_bodies(frame, "y", scale=0.001)
    np.testing.assert_allclose(pos, [[0.0, 0.0, 0.001]], atol=1e-9)
    np.testing.assert_allclose(rot[0], roma.rotvec_to_rotmat(torch.tensor([np.pi / 2, 0, 0])))
    pos, rot, _ = convert_bodies(frame, "z")
    np.testing.assert_allclose(pos, [[0.0, 1.0, 0.0]])
    np.testing.assert_allclose(rot[0], np.eye(3))


def streamed_take(take: Capture, up: str) -> Capture:
    """``take`` streamed by the test-side Motive sender with its Up Axis set to ``up`` and read
    by a NatNet source told the same: one frame for each of the take's frames (the sender repeats
    the take, frame number i carrying its frame i mod T), in the take's order."""
    t = take.num_frames
    with MotiveSender(take.names, frames_from_capture(take, up), RATE) as sender:
        source = NatNetSource(command_port=sender.command_port, data_port=0, up=up)
        source.open()
        try:
            got, deadline = {}, time.perf_counter() + 5.0
            while len(got) < t and time.perf_counter() < deadline:
                frame = source.read(0.2)
                if frame is not None:
                    got[frame.frame % t] = frame
        finally:
            source.close()
    assert len(got) == t, f"{len(got)} of the take's {t} frames arrived"
    frames = [got[k] for k in range(t)]
    assert all(f.names == tuple(take.names) for f in frames)
    return Capture(
        fps=RATE,
        names=list(take.names),
        pos=np.stack([f.pos for f in frames]),
        rot=np.stack([f.rot for f in frames]),
        valid=np.stack([f.valid for f in frames]),
        source=f"natnet-{up}-up",
    )


def posed(predictor: Predictor, frames: Capture) -> list:
    """Every frame after the first posed by a live session with the stream model (a replay
    that hands over one frame per turn, so none is dropped)."""
    sink = KeepingSink()
    source = ReplaySource(frames, rate=math.inf)
    LiveSession(source, predictor, [sink], options=LiveOptions(backend="trace")).run()
    assert len(sink.poses) == frames.num_frames - 1
    return sink.poses


def test_a_take_streamed_y_up_and_z_up_gives_the_same_frames_and_poses():
    """Motive's Up Axis set to Y (its default: the world turned -90 degrees about X from
    rbmcap's, each rigid body keeping its own axes) with ``up="y"``, or set to Z with ``up="z"``:
    the same plates in rbmcap's world, and the same poses."""
    take = synthetic_take(96, fps=RATE)
    y_up, z_up = streamed_take(take, "y"), streamed_take(take, "z")
    np.testing.assert_array_equal(y_up.valid, z_up.valid)
    np.testing.assert_array_equal(y_up.valid, take.valid)
    np.testing.assert_allclose(y_up.pos, z_up.pos, atol=1e-6)
    np.testing.assert_allclose(y_up.rot, z_up.rot, atol=1e-6)
    valid = take.valid
    np.testing.assert_allclose(y_up.pos[valid], take.pos[valid], atol=1e-6)
    np.testing.assert_allclose(y_up.rot[valid], take.rot[valid], atol=2e-6)
    predictor = Predictor.from_checkpoint("standin-rbm14-stream")
    from_y, from_z = posed(predictor, y_up), posed(predictor, z_up)
    assert [p.frame for p in from_y] == [p.frame for p in from_z]
    for a, b in zip(from_y, from_z, strict=True):
        np.testing.assert_allclose(a.rotmats, b.rotmats, atol=1e-5)
        np.testing.assert_allclose(a.trans, b.trans, atol=1e-5)


def test_fps_is_measured_once_two_consecutive_frames_arrived(server, source):
    server.pause()
    time.sleep(0.05)
    source.open()
    assert source.fps is None
    server.resume()
    read_frames(source, 3)
    assert source.fps == pytest.approx(RATE)


def test_ids_without_names_are_called_by_id_until_the_definitions_know_them(server, source):
    server.names = NAMES[:1]  # model definitions with the first body only
    source.open()
    assert read_frames(source, 1)[0].names == ("pelvis", "id:2", "id:3")
    server.names = NAMES
    deadline = time.perf_counter() + 3.0
    while read_frames(source, 1)[0].names != NAMES:
        assert time.perf_counter() < deadline, "names not asked for again"


def test_close_says_disconnect_and_the_server_forgets_the_client(server, source):
    source.open()
    read_frames(source, 1)
    assert len(server.clients) == 1
    source.close()
    source.close()
    time.sleep(0.1)
    assert server.clients == []


def test_a_restarted_server_is_picked_up_again(server, source):
    """As the session does: a lost source is closed and opened again until frames come."""
    source.open()
    read_frames(source, 5)
    server.stop()
    time.sleep(0.1)
    server.start()
    restarted = time.perf_counter()
    deadline, frame = restarted + 3.0, None
    while frame is None:
        assert time.perf_counter() < deadline, "no frames from the restarted server"
        try:
            frame = source.read(0.2)
        except SourceLost:
            source.close()
            try:
                source.open()
            except SourceLost:
                time.sleep(0.1)
    assert frame.received > restarted and frame.names == NAMES


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel stamps: Linux")
def test_a_frame_is_stamped_when_its_packet_arrived_not_when_it_was_read(server, source):
    """Packets left waiting in the socket keep their arrival times: the latency a session
    reports includes the time a frame waited to be read."""
    source.open()
    read_frames(source, 2)
    time.sleep(0.25)  # about 50 frames arrive unread
    waited = []
    while (frame := source.read(0.0)) is not None:
        waited.append((frame.received, time.perf_counter()))
    assert len(waited) > 20
    received = np.array([r for r, _ in waited])
    assert waited[0][1] - received[0] > 0.15  # the oldest waited most of the 0.25 s
    # arrivals are spread over the wait at the server's rate, not bunched at reading
    assert np.median(np.diff(received)) == pytest.approx(1.0 / RATE, rel=0.3)


def test_isolated_malformed_frame_is_skipped_and_counted(server, source):
    source.open()
    read_frames(source, 1)
    client = server.clients[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"\x07\x00\x05\x00\x01\x02\x03\x04\x05", client)
    read_frames(source, 5)
    assert source.malformed == 1


def test_no_server_is_a_lost_source_after_the_timeout():
    source = NatNetSource(command_port=free_port(), data_port=0, timeout=0.3)
    start = time.perf_counter()
    with pytest.raises(SourceLost, match=r"no reply to NAT_CONNECT within 0\.3 s"):
        source.open()
    assert time.perf_counter() - start < 2.0
    with pytest.raises(SourceLost, match="not open"):
        source.read(0.1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"up": "x"}, "up axis"),
        ({"local": "localhost"}, "IPv4 address"),
        ({"multicast": "10.0.0.1"}, "not a multicast address"),
        ({"command_port": 70000}, "command port"),
        ({"scale": 0.0}, "scale"),
    ],
)
def test_bad_options_are_config_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        NatNetSource(**kwargs)


def test_unresolvable_server_is_a_config_error():
    with pytest.raises(ConfigError, match="cannot resolve"):
        NatNetSource(server="no-such-host.invalid", data_port=0).open()


# -- the server as the benchmark uses it --------------------------------------------------------


@pytest.mark.exclusive  # times the server's rate
def test_server_streams_at_its_rate_and_drops_chosen_frames(server, source):
    source.open()
    first = read_frames(source, 1)[0].frame
    server.drop(range(first + 3, first + 6))
    start = time.perf_counter()
    frames = read_frames(source, 40)
    elapsed = time.perf_counter() - start
    numbers = [f.frame for f in frames]
    assert not set(range(first + 3, first + 6)) & set(numbers)
    assert server.dropped == 3
    assert 0.7 * 43 / RATE < elapsed < 3 * 43 / RATE
    kept = [k for k in range(first + 1, first + 44) if not first + 3 <= k <= first + 5]
    assert numbers == kept


def test_paused_server_sends_nothing_until_resumed(server, source):
    source.open()
    read_frames(source, 1)
    server.pause()
    time.sleep(0.05)
    while source.read(0.05) is not None:
        pass
    sent = server.sent
    assert source.read(0.2) is None and server.sent == sent
    server.resume()
    assert len(read_frames(source, 3)) == 3


def test_server_streams_a_capture_as_recorded():
    data = body_frames(frames=12)
    rot = roma.unitquat_to_rotmat(torch.from_numpy(data.quat)).numpy()
    capture = Capture(fps=RATE, names=list(NAMES), pos=data.pos, rot=rot, valid=data.valid)
    with NatNetServer(capture, RATE, version=(3, 0), up="z") as server:
        source = NatNetSource(command_port=server.command_port, data_port=0, up="z")
        source.open()
        try:
            frames = read_frames(source, 4)
        finally:
            source.close()
    for frame in frames:
        assert_matches(frame, data)


def test_body_frames_of_the_wrong_shape_are_refused():
    data = body_frames()
    with pytest.raises(FormatError, match=r"quat has shape \(40, 3, 3\), expected \(T, 3, 4\)"):
        BodyFrames(NAMES, data.pos, data.quat[..., :3], data.valid)


def multicast_on_loopback() -> bool:
    """Whether a datagram multicast out of 127.0.0.1 comes back to a member on 127.0.0.1."""
    port = free_port()
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx,
    ):
        try:
            rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            rx.bind((GROUP, port))
            member = socket.inet_aton(GROUP) + socket.inet_aton("127.0.0.1")
            rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, member)
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
            tx.sendto(b"probe", (GROUP, port))
            rx.settimeout(0.5)
            return rx.recv(16) == b"probe"
        except OSError:
            return False


def test_multicast_frames_arrive_on_the_group():
    if not multicast_on_loopback():
        pytest.skip("this machine does not loop multicast back on 127.0.0.1")
    data, port = body_frames(), free_port()
    with NatNetServer(data, RATE, multicast=GROUP, data_port=port) as server:
        source = NatNetSource(command_port=server.command_port, data_port=port, multicast=GROUP)
        source.open()
        try:
            assert source.server_info.multicast and source.server_info.data_port == port
            frames = read_frames(source, 5)
        finally:
            source.close()
    for frame in frames:
        assert frame.names == NAMES
        assert_matches(frame, data)


def test_the_numpy_quaternion_conversion_is_romas():
    import roma
    import torch

    from rbmcap.live.sources.natnet import unitquat_to_rotmat

    quat = roma.random_unitquat(64, dtype=torch.float64)
    expected = roma.unitquat_to_rotmat(quat).numpy()
    assert np.abs(unitquat_to_rotmat(quat.numpy()) - expected).max() < 1e-12


@pytest.mark.parametrize("broken", [False, True], ids=["all-valid", "some-invalid"])
def test_bodies_convert_as_roma_turns_their_normalised_quaternions(broken):
    """Quaternions of any length give the rotation of their unit quaternion (roma's), turned Y
    up to Z up; positions scale to metres; an untracked body, a zero or non-finite quaternion
    and a non-finite position are invalid, with a zero position and the identity."""
    from rbmcap.io.optitrack import Y_UP_TO_Z_UP

    rng = np.random.default_rng(3)
    n = 9
    quat = rng.normal(size=(n, 4)) * rng.uniform(0.2, 5.0, (n, 1))
    pos = rng.normal(size=(n, 3)) * 1000.0
    tracked = np.ones(n, bool)
    bad = []
    if broken:
        tracked[1] = False
        quat[3] = 0.0
        quat[5, 2] = np.inf
        pos[7, 0] = np.nan
        bad = [1, 3, 5, 7]
    frame = nn.FrameOfData(
        1,
        0.0,
        np.arange(n, dtype=np.int32),
        pos.astype(np.float32),
        quat.astype(np.float32),
        tracked,
        np.zeros(n, np.float32),
    )
    got_pos, got_rot, valid = convert_bodies(frame, "y", scale=0.001)
    assert got_pos.dtype == np.float32 and got_rot.dtype == np.float32
    assert valid.tolist() == [i not in bad for i in range(n)]
    good = [i for i in range(n) if i not in bad]
    q = torch.as_tensor(quat[good].astype(np.float32), dtype=torch.float64)
    expected = Y_UP_TO_Z_UP @ roma.unitquat_to_rotmat(q / q.norm(dim=-1, keepdim=True)).numpy()
    np.testing.assert_allclose(got_rot[good], expected, atol=2e-6)
    np.testing.assert_allclose(got_pos[good], pos[good] @ Y_UP_TO_Z_UP.T * 0.001, rtol=1e-5)
    np.testing.assert_array_equal(got_rot[bad], np.broadcast_to(np.eye(3), (len(bad), 3, 3)))
    np.testing.assert_array_equal(got_pos[bad], np.zeros((len(bad), 3)))
