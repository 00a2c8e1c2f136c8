"""``natnet://``: OptiTrack Motive's rigid bodies over NatNet
(:mod:`~rbmcap.live.sources.natnet_decoder`).

The connection follows the NatNet SDK's sample client. A command socket, bound to ``local`` on a
port the OS chooses, sends ``NAT_CONNECT`` to ``server:command_port``; the reply
``NAT_SERVERINFO`` names the NatNet version the server streams, and ``NAT_REQUEST_MODELDEF``
brings the rigid bodies' names by id. Frames (``NAT_FRAMEOFDATA``) arrive

- multicast (``multicast`` a group): at ``group:data_port``, on a data socket that joins the group
  on the ``local`` interface;
- unicast (``multicast=None``): at the address the client's requests come from, the command
  socket; the client keeps itself registered with ``NAT_KEEPALIVE`` once a second and says
  ``NAT_DISCONNECT`` when it closes. A data socket on ``local:data_port`` also listens (frames are
  taken from either socket).

Frames become :class:`~rbmcap.live.frames.RigidBodyFrame` s in rbmcap's conventions
(:func:`convert_bodies`): Motive's world is right-handed and Y up by default, and ``up="y"``
turns it Z up with :data:`~rbmcap.io.optitrack.Y_UP_TO_Z_UP` ``A``, +90° about X, as the CSV
importer does: positions ``A p``, rotations ``A R`` (the world turns, each rigid body keeps its
own axes); ``up="z"`` (Motive's Up Axis set to Z) takes both as they come (docs/live.md, "Motive's
up axis", gives OptiTrack's documentation and what it leaves open); lengths are multiplied by
``scale`` (metres per server unit; Motive streams metres), quaternions become world-from-body
rotation matrices, and a body not tracked in a frame is invalid with a zero position and an
identity rotation. A frame naming a rigid body the model definitions do not know asks for them
again (at most once a second) and calls it ``id:N`` meanwhile. NatNet frames carry no rate:
``fps`` is measured from the timestamps of the first two consecutive frames.

No thread is started: :meth:`NatNetSource.read` receives, decodes and converts on the caller's
thread.
"""

from __future__ import annotations

import functools
import ipaddress
import select
import socket
import struct
import sys
import time

import numpy as np

from rbmcap.errors import ConfigError, FormatError, first_line
from rbmcap.io.optitrack import Y_UP_TO_Z_UP
from rbmcap.live.frames import RigidBodyFrame
from rbmcap.live.sources import natnet_decoder as nn
from rbmcap.live.sources.base import LOOPBACK, SourceLost

UP_AXES = ("y", "z")
"""Server world up axes a source converts from (to rbmcap's Z up)."""

KEEPALIVE_S = 1.0
"""Unicast: seconds between keep-alives."""

RETRY_S = 1.0
"""Seconds between repeated requests for the model definitions (ids without names)."""

CONNECT_RETRY_S = 0.5
"""Seconds without frames after which ``NAT_CONNECT`` is sent again (and again after as long),
so a restarted server learns of the client."""

MALFORMED_LIMIT = 10
"""Malformed frame packets in a row that end the connection (an isolated one is skipped)."""

RECV_BYTES = 1 << 16
RECV_BUFFER = 1 << 20

SO_TIMESTAMPNS = 35
"""Linux's socket option (not in Python's ``socket``) that attaches the kernel's receive time to
each datagram, so a frame's latency starts when its packet arrived, not when it was read."""


def convert_bodies(
    frame: nn.FrameOfData, up: str = "y", scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A NatNet frame's rigid bodies in rbmcap's conventions.

    Args:
        frame: the decoded frame (positions and xyzw quaternions in the server's axes and units).
        up: the server's world up axis: "y" (Motive's default; turned Z up, ``A p`` and ``A R``
            for :data:`~rbmcap.io.optitrack.Y_UP_TO_Z_UP` ``A``) or "z" (taken as they come).
        scale: metres per server length unit.

    Returns:
        pos (N, 3) float32 metres, world Z up; rot (N, 3, 3) float32 world-from-body; valid (N,)
        bool: tracked, with a finite position and a non-zero quaternion (invalid: zeros and
        identities).
    """
    quat = frame.quat.astype(np.float32)
    n = len(quat)
    products, to_metres = _conversion(up, scale)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):  # bad bodies: invalid
        # Per body, in one product: its rotation matrix times |q|² (9 columns) and |q|² (10th).
        scaled = (quat[:, :, None] * quat[:, None, :]).reshape(n, 16) @ products
        norm2 = scaled[:, 9]
        pos = frame.pos.astype(np.float32, copy=False) @ to_metres
        finite = np.isfinite(scaled.sum() + pos.sum())
        if n and frame.tracked.all() and norm2.min() > 1e-12 and finite:
            rot = (scaled[:, :9] / norm2[:, None]).reshape(n, 3, 3)
            return pos, rot, np.ones(n, dtype=bool)
        valid = frame.tracked & (norm2 > 1e-12) & np.isfinite(norm2)
        valid &= np.isfinite(frame.pos).all(1)
        rot = scaled[:, :9] / np.where(valid, norm2, 1.0)[:, None]
    rot = np.where(valid[:, None], rot, _EYE_FLAT).reshape(n, 3, 3)
    pos = np.where(valid[:, None], pos, 0).astype(np.float32)
    return pos, rot.astype(np.float32), valid


def unitquat_to_rotmat(quat: np.ndarray) -> np.ndarray:
    """(N, 4) unit quaternions (x, y, z, w) → (N, 3, 3) rotation matrices, in numpy.

    roma's ``unitquat_to_rotmat`` computes the same products; on the receiving path of a live
    frame its dozen torch calls on a few quaternions cost several times the frame's decoding,
    which one product matrix here does not (``tests/live/test_natnet_source.py`` checks the
    two agree)."""
    return _rotmat(np.asarray(quat), _QUAT_PRODUCTS)


def _quat_products() -> np.ndarray:
    """(16, 9): a rotation matrix's entries (row-major) as sums of a unit quaternion's pairwise
    products q_i q_j (row 4 i + j), x, y, z, w order."""
    x, y, z, w = range(4)
    terms = {
        (0, 0): [(1, x, x), (-1, y, y), (-1, z, z), (1, w, w)],
        (0, 1): [(2, x, y), (-2, w, z)],
        (0, 2): [(2, x, z), (2, w, y)],
        (1, 0): [(2, x, y), (2, w, z)],
        (1, 1): [(-1, x, x), (1, y, y), (-1, z, z), (1, w, w)],
        (1, 2): [(2, y, z), (-2, w, x)],
        (2, 0): [(2, x, z), (-2, w, y)],
        (2, 1): [(2, y, z), (2, w, x)],
        (2, 2): [(-1, x, x), (-1, y, y), (1, z, z), (1, w, w)],
    }
    m = np.zeros((16, 9), np.float32)
    for (r, c), products in terms.items():
        for k, i, j in products:
            m[4 * i + j, 3 * r + c] += k
    return m


def _rotmat(quat: np.ndarray, products: np.ndarray) -> np.ndarray:
    outer = (quat[:, :, None] * quat[:, None, :]).reshape(len(quat), 16)
    return (outer @ products).reshape(-1, 3, 3)


_Y_UP = Y_UP_TO_Z_UP.astype(np.float32)
_Z_UP = np.eye(3, dtype=np.float32)
_QUAT_PRODUCTS = _quat_products()
_QUAT_PRODUCTS_Y_UP = np.einsum("ar,krc->kac", _Y_UP, _QUAT_PRODUCTS.reshape(16, 3, 3)).reshape(
    16, 9
)
"""The products turned Y up to Z up: entry (a, c) of ``Y_UP @ R``."""

_EYE_FLAT = np.eye(3, dtype=np.float32).reshape(1, 9)


@functools.cache
def _conversion(up: str, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(16, 10) quaternion products to a world-Z-up rotation matrix (9) and the squared norm, and
    (3, 3) server position → metres, Z up (row vectors), for one server's axes and units."""
    axes = _Y_UP if up == "y" else _Z_UP
    rotation = _QUAT_PRODUCTS_Y_UP if up == "y" else _QUAT_PRODUCTS
    norm = np.eye(4, dtype=np.float32).reshape(16, 1)  # q_x² + q_y² + q_z² + q_w²
    return np.concatenate([rotation, norm], axis=1), np.float32(scale) * axes.T


class NatNetSource:
    """Rigid bodies streamed by a NatNet server such as Motive (see the module docstring).

    Args:
        server: the server's host name or address; command_port: its command port.
        data_port: the port frames are multicast to (unicast: a port also listened on).
        multicast: the multicast group frames go to, or None for unicast.
        local: the address of the interface to bind and receive on.
        up: the server's world up axis, "y" (Motive's default) or "z".
        scale: metres per server length unit (Motive streams metres: 1).
        timeout: seconds ``open`` waits for the server's reply (and for its model definitions).

    Attributes:
        name: ``natnet://server:command_port``; fps: measured from the first two consecutive
            frames (None before); server_info: the server's last ``NAT_SERVERINFO``;
            names_by_id: rigid-body names from its model definitions; malformed: frame packets
            that could not be decoded and were skipped.
    """

    finite = False

    def __init__(
        self,
        server: str = LOOPBACK,
        command_port: int = 1510,
        data_port: int = 1511,
        multicast: str | None = None,
        local: str = LOOPBACK,
        up: str = "y",
        scale: float = 1.0,
        timeout: float = 2.0,
    ):
        if up not in UP_AXES:
            raise ConfigError(f"natnet up axis {up!r}: expected one of {', '.join(UP_AXES)}")
        for what, port in (("command port", command_port), ("data port", data_port)):
            if not isinstance(port, int) or not 0 <= port < 65536:
                raise ConfigError(f"natnet {what} {port!r}: expected a number in 0..65535")
        if not (np.isfinite(scale) and scale > 0):
            raise ConfigError(f"natnet scale {scale!r}: expected a positive number")
        self.local = _ipv4(local, "local interface")
        if (
            multicast is not None
            and not ipaddress.IPv4Address(_ipv4(multicast, "multicast group")).is_multicast
        ):
            raise ConfigError(f"natnet multicast group {multicast!r}: not a multicast address")
        if not str(server):
            raise ConfigError("natnet server: expected a host name or address")
        self.server, self.command_port, self.data_port = str(server), command_port, data_port
        self.multicast, self.up, self.scale = multicast, up, float(scale)
        self.timeout = float(timeout)
        self.name = f"natnet://{self.server}:{command_port}"
        self.fps: float | None = None
        self.server_info: nn.ServerInfo | None = None
        self.names_by_id: dict[int, str] = {}
        self.malformed = 0
        self._command: socket.socket | None = None
        self._data: socket.socket | None = None
        self._address: tuple[str, int] | None = None
        self._reset()

    def _reset(self) -> None:
        self._stamped = False
        self._version: nn.Version | None = None
        self._names_key: bytes | None = None
        self._names: tuple[str, ...] = ()
        self._unknown = False
        self._previous: tuple[int, float] | None = None
        self._malformed_run = 0
        self._last_frame = self._sent_keepalive = self._sent_models = self._sent_connect = -1e9

    # -- lifetime ---------------------------------------------------------------------------

    def open(self) -> None:
        """Bind, connect, learn the NatNet version and the rigid bodies' names.

        Raises:
            SourceLost: no ``NAT_SERVERINFO`` within ``timeout`` (or a socket error).
            ConfigError: the server does not resolve, or ``local`` cannot be bound.
            FormatError: the server streams a NatNet version older than 3.0.
        """
        self.close()
        self._reset()
        self.fps = self.server_info = None
        self.names_by_id = {}
        self._address = self._resolve()
        self._command, self._data = self._bind()
        try:
            self._handshake()
        except BaseException:
            self.close()
            raise

    def ready(self) -> None:
        """Nothing to hold back: Motive streams live, frames come as they are captured."""

    def close(self) -> None:
        """Say ``NAT_DISCONNECT`` (unicast) and close the sockets; safe to call twice."""
        if self._command is not None and self.multicast is None and self._address is not None:
            try:
                self._command.sendto(nn.encode_request(nn.NAT_DISCONNECT), self._address)
            except OSError:
                pass
        for sock in (self._command, self._data):
            if sock is not None:
                sock.close()
        self._command = self._data = None

    def _resolve(self) -> tuple[str, int]:
        try:
            infos = socket.getaddrinfo(
                self.server, self.command_port, socket.AF_INET, socket.SOCK_DGRAM
            )
        except (socket.gaierror, UnicodeError) as exc:
            raise ConfigError(f"{self.name}: cannot resolve {self.server!r} ({exc})") from None
        return infos[0][4][0], self.command_port

    def _bind(self) -> tuple[socket.socket, socket.socket]:
        command = data = None
        try:
            command = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            command.bind((self.local, 0))
            data = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            if self.multicast is None:
                _bind_or_any_port(data, self.local, self.data_port)
            else:
                data.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                # Linux delivers a group's datagrams to sockets bound to the group (or to any
                # address), Windows to sockets bound to the interface.
                host = self.local if sys.platform == "win32" else self.multicast
                data.bind((host, self.data_port))
                group = socket.inet_aton(self.multicast) + socket.inet_aton(self.local)
                data.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, group)
            for sock in (command, data):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECV_BUFFER)
                sock.setblocking(False)
            self._stamped = _stamp_arrivals(command) and _stamp_arrivals(data)
        except OSError as exc:
            for sock in (command, data):
                if sock is not None:
                    sock.close()
            raise ConfigError(f"{self.name}: cannot listen on {self.local} ({exc})") from None
        return command, data

    def _handshake(self) -> None:
        """Connect until the server answers, then wait (briefly) for the model definitions."""
        deadline = time.perf_counter() + self.timeout
        while self._version is None:
            now = time.perf_counter()
            if now >= deadline:
                raise SourceLost(f"{self.name}: no reply to NAT_CONNECT within {self.timeout:g} s")
            if now - self._sent_connect >= 0.25:
                self._send(nn.encode_connect(), now, refused_ok=True)
                self._sent_connect = now
            self._poll(min(deadline, now + 0.25) - now, refused_ok=True)
        deadline = time.perf_counter() + self.timeout
        while not self.names_by_id and time.perf_counter() < deadline:
            self._poll(deadline - time.perf_counter(), refused_ok=True)

    # -- reading ----------------------------------------------------------------------------

    def read(self, timeout: float) -> RigidBodyFrame | None:
        """The next frame, or None when none arrived within ``timeout`` seconds.

        Raises:
            SourceLost: a socket error (the server's port closed), MALFORMED_LIMIT undecodable
                frames in a row, or the source is not open.
        """
        if self._command is None:
            raise SourceLost(f"{self.name}: not open")
        deadline = time.perf_counter() + timeout
        while True:
            now = time.perf_counter()
            self._housekeeping(now)
            frame = self._poll(max(deadline - now, 0.0))
            if frame is not None or time.perf_counter() >= deadline:
                return frame

    def _housekeeping(self, now: float) -> None:
        """Keep-alives, repeated connects while no frames come, model definitions for ids not
        yet named."""
        if self.multicast is None and now - self._sent_keepalive >= KEEPALIVE_S:
            self._send(nn.encode_request(nn.NAT_KEEPALIVE), now)
            self._sent_keepalive = now
        quiet = min(now - self._last_frame, now - self._sent_connect)
        if quiet >= CONNECT_RETRY_S:
            self._send(nn.encode_connect(), now)
            self._sent_connect = now
        if self._unknown:
            self._request_models(now)

    def _request_models(self, now: float) -> None:
        if now - self._sent_models >= RETRY_S:
            self._send(nn.encode_request(nn.NAT_REQUEST_MODELDEF), now)
            self._sent_models = now

    def _send(self, packet: bytes, now: float, refused_ok: bool = False) -> None:
        try:
            self._command.sendto(packet, self._address)
        except OSError as exc:
            if not (refused_ok and isinstance(exc, ConnectionRefusedError)):
                raise SourceLost(f"{self.name}: {first_line(exc)}") from None

    def _poll(self, timeout: float, refused_ok: bool = False) -> RigidBodyFrame | None:
        """Wait up to ``timeout`` s for one packet and handle it; the frame it held, if any."""
        sockets = [self._command, self._data]
        try:
            ready, _, _ = select.select(sockets, [], [], timeout)
            if not ready:
                return None
            packet, received = _receive(ready[0], self._stamped)
        except BlockingIOError:
            return None
        except OSError as exc:
            if refused_ok and isinstance(exc, ConnectionRefusedError):
                return None
            raise SourceLost(f"{self.name}: {first_line(exc)}") from None
        return self._handle(packet, received)

    def _handle(self, packet: bytes, received: float) -> RigidBodyFrame | None:
        if len(packet) < 4:
            return None
        kind = nn.message_id(packet)
        if kind == nn.NAT_FRAMEOFDATA and self._version is not None:
            return self._frame(packet, received)
        try:
            if kind == nn.NAT_SERVERINFO:
                self.server_info = nn.decode_server_info(packet)
                self._version = nn.natnet_version(self.server_info.natnet_version)
                self._request_models(received)
            elif kind == nn.NAT_MODELDEF and self._version is not None:
                models = nn.decode_model_definitions(packet, self._version)
                self.names_by_id = models.names_by_id()
                self._names_key, self._unknown = None, False
        except FormatError as exc:
            raise FormatError(f"{self.name}: {exc}") from None
        return None

    def _frame(self, packet: bytes, received: float) -> RigidBodyFrame | None:
        try:
            frame = nn.decode_frame(packet, self._version)
        except FormatError as exc:
            self.malformed += 1
            self._malformed_run += 1
            if self._malformed_run >= MALFORMED_LIMIT:
                raise SourceLost(
                    f"{self.name}: {self._malformed_run} malformed frames in a row ({exc})"
                ) from None
            return None
        self._malformed_run, self._last_frame = 0, received
        if frame.models_changed:
            self._request_models(received)
        pos, rot, valid = convert_bodies(frame, self.up, self.scale)
        self._measure_rate(frame)
        return RigidBodyFrame(
            frame=frame.frame,
            timestamp=frame.timestamp,
            received=received,
            names=self._names_of(frame.ids, received),
            pos=pos,
            rot=rot,
            valid=valid,
        )

    def _names_of(self, ids: np.ndarray, now: float) -> tuple[str, ...]:
        key = ids.tobytes()
        if key != self._names_key:
            known = self.names_by_id
            self._names = tuple(known.get(int(i), f"id:{int(i)}") for i in ids)
            self._names_key, self._unknown = key, any(int(i) not in known for i in ids)
            if self._unknown:
                self._request_models(now)
        return self._names

    def _measure_rate(self, frame: nn.FrameOfData) -> None:
        previous, self._previous = self._previous, (frame.frame, frame.timestamp)
        if self.fps is None and previous is not None and frame.frame == previous[0] + 1:
            step = frame.timestamp - previous[1]
            if step > 0:
                self.fps = round(1.0 / step, 3)


def _stamp_arrivals(sock: socket.socket) -> bool:
    """Ask the kernel to stamp each datagram's arrival on ``sock`` (Linux); False elsewhere."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def _receive(sock: socket.socket, stamped: bool) -> tuple[bytes, float]:
    """One datagram and when it arrived (``time.perf_counter`` seconds): the kernel's stamp
    where ``stamped`` and present, else now."""
    if not stamped:
        return sock.recv(RECV_BYTES), time.perf_counter()
    packet, ancillary, _, _ = sock.recvmsg(RECV_BYTES, 64)
    now, wall = time.perf_counter(), time.time()
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            seconds, nanoseconds = struct.unpack_from("=qq", data)
            return packet, now - max(wall - (seconds + 1e-9 * nanoseconds), 0.0)
    return packet, now


def _ipv4(text: str, what: str) -> str:
    try:
        return str(ipaddress.IPv4Address(str(text)))
    except ValueError:
        raise ConfigError(f"natnet {what} {text!r}: expected an IPv4 address") from None


def _bind_or_any_port(sock: socket.socket, host: str, port: int) -> None:
    """Bind to ``host:port``, or to an OS-chosen port where that one is taken (never sharing
    it: on Windows a reused port would take datagrams from the socket that holds it)."""
    try:
        sock.bind((host, port))
    except OSError:
        sock.bind((host, 0))
