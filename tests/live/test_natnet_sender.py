"""The test-side NatNet sender checked byte by byte against the published protocol.

A raw UDP client stands in for a NatNet client (it does what the SDK samples ``NatNetClient.py``
and ``PacketClient.cpp`` do: NAT_CONNECT and NAT_REQUEST_MODELDEF from one socket, frames read on
that same socket in unicast) and reads fields at the offsets the published client reads them;
nothing here uses rbmcap's own NatNet decoder.
"""

from __future__ import annotations

import socket
import struct
import time

import numpy as np
import pytest
import roma
import torch
from helpers.natnet_sender import (
    CLOCK_HZ,
    MARKER_ERROR,
    NAT_CONNECT,
    NAT_DISCONNECT,
    NAT_FRAMEOFDATA,
    NAT_KEEPALIVE,
    NAT_MODELDEF,
    NAT_REQUEST,
    NAT_REQUEST_MODELDEF,
    NAT_SERVERINFO,
    NAT_UNRECOGNIZED_REQUEST,
    VERSIONS,
    MotiveSender,
    frames_from_capture,
)

from rbmcap.io.capture import Capture
from rbmcap.io.optitrack import Y_UP_TO_Z_UP

LOOPBACK = "127.0.0.1"
GROUP = "239.255.42.99"
BODIES = ["pelvis", "left_wrist", "right_wrist"]


def moving_poses(i: int):
    """Poses for frame i: body k at (k, 1 + i/1000, -k) metres, rotated (i + k) mrad about Y."""
    n = len(BODIES)
    pos = np.stack([np.arange(n), 1 + np.full(n, i / 1000), -np.arange(n)], 1)
    half = (i + np.arange(n)) * 1e-3 / 2
    quat = np.stack([np.zeros(n), np.sin(half), np.zeros(n), np.cos(half)], 1)
    return pos, quat, np.ones(n, bool)


class Reader:
    """Little-endian reads from a payload, tracking the offset."""

    def __init__(self, data: bytes, offset: int = 0) -> None:
        self.data, self.offset = data, offset

    def read(self, fmt: str):
        values = struct.unpack_from("<" + fmt, self.data, self.offset)
        self.offset += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def cstr(self) -> str:
        end = self.data.index(b"\0", self.offset)
        text = self.data[self.offset : end].decode()
        self.offset = end + 1
        return text


class RawClient:
    """One UDP socket on 127.0.0.1 that talks to the sender's command port."""

    def __init__(self, sender: MotiveSender) -> None:
        self.sender = sender
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((LOOPBACK, 0))

    def send(self, msg_id: int, payload: bytes = b"") -> None:
        packet = struct.pack("<HH", msg_id, len(payload)) + payload
        self.sock.sendto(packet, (LOOPBACK, self.sender.command_port))

    def connect(self, version=(4, 1)) -> bytes:
        """NAT_CONNECT as the SDK 4.1 Python client sends it ("Ping", version at 265)."""
        body = bytearray(270)
        body[0:4] = b"Ping"
        body[265:269] = bytes([*version, 0, 0])
        self.send(NAT_CONNECT, bytes(body) + b"\0")
        return self.receive(NAT_SERVERINFO)[0]

    def receive(self, msg_id: int, timeout: float = 2.0):
        """(packet, sender address) of the next message with ``msg_id`` (others skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            self.sock.settimeout(max(deadline - time.monotonic(), 1e-3))
            data, addr = self.sock.recvfrom(65536)
            if struct.unpack_from("<H", data)[0] == msg_id:
                return data, addr

    def frames(self, seconds: float) -> list[bytes]:
        """Every frame packet arriving within ``seconds``."""
        out, deadline = [], time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data, _ = self.sock.recvfrom(65536)
            except TimeoutError:
                break
            if struct.unpack_from("<H", data)[0] == NAT_FRAMEOFDATA:
                out.append(data)
        return out

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def open_sender():
    """Make senders (and raw clients) that are stopped (closed) after the test."""
    made = []

    def make(version=(4, 1), fps=240.0, poses=moving_poses, **kw):
        sender = MotiveSender(BODIES, poses, fps, version=version, **kw)
        client = RawClient(sender)
        made.append((sender, client))
        return sender, client

    yield make
    for sender, client in made:
        sender.stop()
        client.close()


def walk_frame(packet: bytes, version) -> dict:
    """Read a frame packet in the published client's order, checking every 4.1 section size
    against the bytes its items took; the reader must end exactly at the payload's end."""
    v41 = version >= (4, 1)
    r = Reader(packet)
    msg_id, size = r.read("HH")
    out = {"msg_id": msg_id, "size": size, "number": r.read("i")}

    def section(read_item):
        count = r.read("i")
        stated = r.read("i") if v41 else None
        start = r.offset
        items = [read_item() for _ in range(count)]
        if v41:
            assert stated == r.offset - start
        return items

    out["marker_sets"] = section(lambda: (r.cstr(), [r.read("3f") for _ in range(r.read("i"))]))
    out["legacy"] = section(lambda: r.read("3f"))
    out["rb_offset"] = r.offset + (8 if v41 else 4)
    out["bodies"] = section(lambda: r.read("i3f4ffh"))
    assert section(lambda: None) == []  # skeletons
    if v41:
        assert section(lambda: None) == []  # assets
    out["labeled"] = section(lambda: r.read("i3ffhf"))
    assert section(lambda: None) == []  # force plates
    assert section(lambda: None) == []  # devices
    out["timestamp_offset"] = r.offset + 8
    out["timecode"], out["timestamp"] = r.read("II"), r.read("d")
    out["stamps"] = r.read("3Q")
    if v41:
        out["precision"] = r.read("II")
    out["params"], eod = r.read("hi")
    assert (eod, r.offset) == (0, len(packet))
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_connect_is_answered_with_the_published_server_description(open_sender, version):
    sender, client = open_sender(version, app_version=(3, 0, 2, 0))
    packet = client.connect()
    r = Reader(packet)
    assert r.read("HH") == (NAT_SERVERINFO, len(packet) - 4) == (NAT_SERVERINFO, 279)
    assert packet[4:260].rstrip(b"\0") == b"Motive"
    r.offset = 260
    assert r.read("4B") == (3, 0, 2, 0)
    assert r.read("4B") == (*version, 0, 0)
    assert r.read("QHB") == (CLOCK_HZ, sender.data_port, 0)
    assert packet[279:283] == bytes(4)
    assert sender.clients() == {client.sock.getsockname()}


@pytest.mark.parametrize("version", VERSIONS)
def test_model_definition_describes_a_marker_set_then_each_rigid_body(open_sender, version):
    _, client = open_sender(version)
    client.send(NAT_REQUEST_MODELDEF)
    packet, _ = client.receive(NAT_MODELDEF)
    r = Reader(packet)
    assert r.read("HH") == (NAT_MODELDEF, len(packet) - 4)
    assert r.read("i") == 1 + len(BODIES)
    kinds, bodies = [], []
    for _ in range(1 + len(BODIES)):
        kinds.append(r.read("i"))
        stated = r.read("i") if version >= (4, 1) else None
        start = r.offset
        if kinds[-1] == 0:
            assert r.cstr() == "all"
            assert len([r.cstr() for _ in range(r.read("i"))]) == 3 * len(BODIES)
        else:
            name, (body_id, parent), offset, m = r.cstr(), r.read("ii"), r.read("3f"), r.read("i")
            r.read(f"{3 * m}f")
            assert r.read(f"{m}i") == (0,) * m
            names = [r.cstr() for _ in range(m)] if version >= (4, 0) else []
            bodies.append((name, body_id, parent, offset, m, len(names)))
        if stated is not None:
            assert stated == r.offset - start
    assert r.offset == len(packet)
    assert kinds == [0, 1, 1, 1]
    m_names = 3 if version >= (4, 0) else 0
    assert bodies == [(b, k + 1, -1, (0.0, 0.0, 0.0), 3, m_names) for k, b in enumerate(BODIES)]


@pytest.mark.parametrize("version", VERSIONS)
def test_frames_carry_the_poses_at_the_published_offsets(open_sender, version):
    sender, client = open_sender(version)
    client.connect()
    packet, addr = client.receive(NAT_FRAMEOFDATA)
    assert addr == (LOOPBACK, sender.data_port)
    frame = walk_frame(packet, version)
    assert frame["size"] == len(packet) - 4
    i = frame["number"]
    v41 = 4 if version >= (4, 1) else 0
    # header 4, frame number 4, marker sets: count (+size), "all\0", count, 3N markers; legacy:
    # count (+size), 2 markers; rigid bodies: count (+size)
    rb = 4 + 4 + 4 + v41 + 4 + 4 + 36 * len(BODIES) + 4 + v41 + 24 + 4 + v41
    assert frame["rb_offset"] == rb
    body_id, *pose = struct.unpack_from("<i3f4f", packet, rb)
    error, params = struct.unpack_from("<fh", packet, rb + 32)
    pos, quat, _ = moving_poses(i)
    assert body_id == 1
    np.testing.assert_allclose(pose, [*pos[0], *quat[0]], atol=1e-6)
    assert (error, params & 0x01) == (pytest.approx(MARKER_ERROR), 1)
    (timestamp,) = struct.unpack_from("<d", packet, frame["timestamp_offset"])
    assert timestamp == frame["timestamp"] == pytest.approx(i / sender.fps)
    assert len(frame["marker_sets"][0][1]) == 3 * len(BODIES)
    assert len(frame["legacy"]) == 2 and len(frame["labeled"]) == 3 * len(BODIES)
    mid, received, transmit = frame["stamps"]
    assert mid < received < transmit


def test_frames_arrive_at_the_stated_rate(open_sender):
    _, client = open_sender(fps=120.0)
    client.connect()
    client.receive(NAT_FRAMEOFDATA)
    frames = client.frames(1.0)
    assert len(frames) == pytest.approx(120, rel=0.05)
    numbers = [walk_frame(p, (4, 1))["number"] for p in frames]
    assert np.all(np.diff(numbers) == 1)


def test_drop_skips_about_that_fraction_and_counts_only_what_was_sent(open_sender):
    sender, client = open_sender(fps=500.0)
    sender.drop(0.25, seed=3)
    client.connect()
    received = client.frames(0.4)
    sender.stop()
    received += client.frames(0.05)
    numbers = np.array([walk_frame(p, (4, 1))["number"] for p in received])
    span = numbers[-1] - numbers[0] + 1
    assert 1 - len(numbers) / span == pytest.approx(0.25, abs=0.1)
    assert sender.sent == len(numbers) and sender.frame == numbers[-1]
    assert [i for i, _ in sender.sends] == numbers.tolist()


def test_hidden_body_is_sent_untracked_in_exactly_those_frames(open_sender):
    sender, client = open_sender(fps=250.0)
    client.connect()
    first = walk_frame(client.receive(NAT_FRAMEOFDATA)[0], (4, 1))["number"]
    start, stop = first + 25, first + 35
    sender.hide("left_wrist", start, stop)
    frames = [walk_frame(p, (4, 1)) for p in client.frames(0.25)]
    seen = set()
    for f in frames:
        hidden = start <= f["number"] < stop
        seen.add(hidden)
        tracked = [b[-1] & 0x01 for b in f["bodies"]]
        assert tracked == [1, 0 if hidden else 1, 1]
        if hidden:
            assert f["bodies"][1][1:9] == (0.0,) * 8
            assert len(f["labeled"]) == 3 * (len(BODIES) - 1)
    assert seen == {True, False}


def test_pause_stops_the_stream_and_resume_continues_with_the_next_frame(open_sender):
    sender, client = open_sender(fps=250.0)
    client.connect()
    received = [client.receive(NAT_FRAMEOFDATA)[0]]
    sender.pause()
    received += client.frames(0.05)
    last = walk_frame(received[-1], (4, 1))["number"]
    assert client.frames(0.1) == []
    sender.resume()
    assert walk_frame(client.receive(NAT_FRAMEOFDATA)[0], (4, 1))["number"] == last + 1


def test_restart_forgets_clients_rebinds_the_port_and_numbers_frames_from_zero(open_sender):
    sender, client = open_sender(fps=250.0)
    port = sender.command_port
    client.connect()
    client.frames(0.1)
    sender.restart()
    client.frames(0.02)
    assert client.frames(0.1) == [] and sender.clients() == set()
    assert sender.command_port == port
    sender.pause()
    sender.restart()
    assert sender.frame == -1
    client.connect()
    sender.resume()
    assert walk_frame(client.receive(NAT_FRAMEOFDATA)[0], (4, 1))["number"] == 0


def test_disconnect_forgets_the_client_and_keepalive_is_not_answered(open_sender):
    sender, client = open_sender(fps=250.0)
    client.connect()
    client.send(NAT_KEEPALIVE)
    client.send(NAT_REQUEST, b"Bitstream\0")
    client.receive(NAT_UNRECOGNIZED_REQUEST)
    replies, deadline = [], time.monotonic() + 0.1
    while (left := deadline - time.monotonic()) > 0:
        client.sock.settimeout(left)
        try:
            replies.append(struct.unpack_from("<H", client.sock.recvfrom(65536)[0])[0])
        except TimeoutError:
            break
    assert set(replies) <= {NAT_FRAMEOFDATA}
    client.send(NAT_DISCONNECT)
    client.frames(0.05)
    assert client.frames(0.1) == [] and sender.clients() == set()


def multicast_works_on_loopback() -> bool:
    """Whether a socket can join GROUP on 127.0.0.1 and receive its own TTL-0 datagram."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rx.bind((GROUP, 0))
        try:
            mreq = socket.inet_aton(GROUP) + socket.inet_aton(LOOPBACK)
            rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        except OSError:
            return False
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(LOOPBACK))
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            tx.sendto(b"probe", (GROUP, rx.getsockname()[1]))
        rx.settimeout(0.5)
        try:
            return rx.recv(16) == b"probe"
        except TimeoutError:
            return False


def test_multicast_streams_frames_to_the_group_on_the_data_port(open_sender):
    if not multicast_works_on_loopback():
        pytest.skip("multicast to 239.255.42.99 is not delivered on the loopback interface here")
    sender, client = open_sender(version=(3, 1), multicast=GROUP)
    info = client.connect()
    assert struct.unpack_from("<HB", info, 276) == (sender.data_port, 1)
    assert info[279:283] == socket.inet_aton(GROUP)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rx.bind((GROUP, sender.data_port))
        mreq = socket.inet_aton(GROUP) + socket.inet_aton(LOOPBACK)
        rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        rx.settimeout(2.0)
        packet = rx.recv(65536)
    assert walk_frame(packet, (3, 1))["msg_id"] == NAT_FRAMEOFDATA


def test_capture_poses_are_sent_in_motives_y_up_world(open_sender):
    t, n = 4, len(BODIES)
    rot = roma.random_rotmat((t, n), generator=torch.Generator().manual_seed(0)).numpy()
    pos = np.random.default_rng(0).normal(size=(t, n, 3)).astype(np.float32)
    capture = Capture(fps=100.0, names=BODIES, pos=pos, rot=rot, valid=np.ones((t, n), bool))
    pos_y, quat_y, tracked = frames_from_capture(capture)
    rot_y = roma.unitquat_to_rotmat(torch.from_numpy(quat_y)).numpy()
    np.testing.assert_allclose(Y_UP_TO_Z_UP @ rot_y, rot, atol=1e-5)
    np.testing.assert_allclose(pos_y @ Y_UP_TO_Z_UP.T, pos, atol=1e-6)
    assert tracked.all()
    _, client = open_sender(poses=(pos_y, quat_y, tracked))
    client.connect()
    frame = walk_frame(client.receive(NAT_FRAMEOFDATA)[0], (4, 1))
    k = frame["number"] % t
    _, *sent_pos, qx, qy, qz, qw, _, _ = frame["bodies"][2]
    np.testing.assert_allclose(Y_UP_TO_Z_UP @ np.array(sent_pos), pos[k, 2], atol=1e-5)
    r = roma.unitquat_to_rotmat(torch.tensor([qx, qy, qz, qw], dtype=torch.float64)).numpy()
    np.testing.assert_allclose(Y_UP_TO_Z_UP @ r, rot[k, 2], atol=1e-5)
