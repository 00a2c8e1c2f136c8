"""Test-side NatNet server: what OptiTrack Motive sends, written from the published protocol.

An implementation of the NatNet bitstream separate from :mod:`rbmcap.live`'s decoder, so that a
misreading of the protocol there cannot be hidden by the same misreading here. It follows
OptiTrack's published NatNet SDK samples: ``NatNetClient.py`` (SDK 4.1 Python sample),
``PacketClient.cpp`` (SDK 4.0 and 4.1) and ``NatNetTypes.h`` (``sSender_Server``).

Wire format (little-endian; ``[4.1]`` marks what NatNet 4.1 adds):

- every message: ``uint16`` message id, ``uint16`` payload size in bytes, the payload;
- ``NAT_SERVERINFO`` payload (``sSender_Server``, packed, 279 bytes): ``char[256]`` application
  name, ``uint8[4]`` application version, ``uint8[4]`` NatNet version, ``uint64``
  high-resolution clock frequency (ticks/s), ``uint16`` data port, ``uint8`` multicast flag,
  ``uint8[4]`` multicast group;
- ``NAT_MODELDEF`` payload: ``int32`` description count, then per description ``int32`` type
  (0 marker set, 1 rigid body), ``[4.1] int32`` size of this description in bytes, the
  description. A marker set: name, ``int32`` count, that many names. A rigid body: name,
  ``int32`` id, ``int32`` parent id, 3 ``float32`` offset, ``int32`` marker count M, M × 3
  ``float32`` marker offsets, M ``int32`` active labels, (4.0+) M marker names;
- ``NAT_FRAMEOFDATA`` payload: ``int32`` frame number; then sections, each an ``int32`` count,
  ``[4.1] int32`` size in bytes of the section's items, the items: marker sets (name, ``int32``
  count, count × 3 ``float32``), legacy unlabeled markers (3 ``float32`` each), rigid bodies
  (``int32`` id, 3 ``float32`` position, 4 ``float32`` quaternion x y z w, ``float32`` mean
  marker error, ``int16`` params, bit 0x01 = tracked), skeletons, ``[4.1]`` assets, labeled
  markers (``int32`` id, 3 ``float32`` position, ``float32`` size, ``int16`` params, ``float32``
  residual), force plates, devices; then the suffix: ``uint32`` timecode, ``uint32`` timecode
  subframe, ``float64`` timestamp (seconds), 3 ``uint64`` stamps in clock ticks (camera
  mid-exposure, data received, transmit), ``[4.1]`` ``uint32`` precision timestamp seconds and
  fraction, ``int16`` frame params, ``int32`` end-of-data tag 0.

Strings are NUL-terminated UTF-8. Positions are metres in Motive's Y-up world.

Where frames go: in unicast, to the address the client's ``NAT_CONNECT`` came from (its command
socket: both published clients bind their unicast data socket to an ephemeral port they never
tell the server, and handle ``NAT_FRAMEOFDATA`` on the command socket), sent from the sender's
data socket (``data_port``); in multicast, to ``(group, data_port)``.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import roma
import torch

from rbmcap.errors import ConfigError, DataError
from rbmcap.io.capture import Capture
from rbmcap.io.optitrack import Y_UP_TO_Z_UP

NAT_CONNECT = 0
NAT_SERVERINFO = 1
NAT_REQUEST = 2
NAT_RESPONSE = 3
NAT_REQUEST_MODELDEF = 4
NAT_MODELDEF = 5
NAT_REQUEST_FRAMEOFDATA = 6
NAT_FRAMEOFDATA = 7
NAT_MESSAGESTRING = 8
NAT_DISCONNECT = 9
NAT_KEEPALIVE = 10
NAT_UNRECOGNIZED_REQUEST = 100

VERSIONS = ((3, 0), (3, 1), (4, 0), (4, 1))
"""NatNet bitstream versions the sender writes."""
CLOCK_HZ = 10_000_000
"""High-resolution clock frequency the sender states; its stamps are perf_counter × CLOCK_HZ."""
LOOPBACK = "127.0.0.1"
MAX_CATCH_UP = 0.25
"""Seconds of late frames the stream sends at once before it restarts its schedule instead."""

MARKER_OFFSETS = np.array([[0.04, 0.0, 0.0], [0.0, 0.04, 0.0], [0.0, 0.0, 0.04]])
"""(3, 3) each rigid body's markers in its own frame, metres."""
LEGACY_MARKERS = np.array([[0.5, 0.01, 0.5], [-0.5, 0.01, -0.5]])
"""(2, 3) unlabeled markers sent in every frame, metres, Y up."""
MARKER_ERROR = 0.0002
"""Mean marker error of a tracked rigid body, metres."""

Poses = tuple[np.ndarray, np.ndarray, np.ndarray]
PoseSource = Callable[[int], Poses] | Sequence[np.ndarray]


def message(msg_id: int, payload: bytes) -> bytes:
    """One NatNet message: ``uint16`` id, ``uint16`` payload size, payload."""
    if len(payload) > 0xFFFF:
        raise DataError(f"NatNet payload of {len(payload)} bytes exceeds 65535")
    return struct.pack("<HH", msg_id, len(payload)) + payload


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def server_info_payload(
    app_version: Sequence[int],
    version: Sequence[int],
    data_port: int,
    multicast: str | None,
) -> bytes:
    """``sSender_Server``: name "Motive" padded to 256 bytes, versions, clock, connection info."""
    name = b"Motive".ljust(256, b"\0")
    app = bytes([*app_version, 0, 0, 0, 0][:4])
    nat = bytes([*version, 0, 0, 0, 0][:4])
    group = socket.inet_aton(multicast) if multicast else bytes(4)
    tail = struct.pack("<QHB", CLOCK_HZ, data_port, 1 if multicast else 0)
    return name + app + nat + tail + group


def _marker_set_description(name: str, markers: Sequence[str]) -> bytes:
    return _cstr(name) + struct.pack("<i", len(markers)) + b"".join(map(_cstr, markers))


def _rigid_body_description(name: str, body_id: int, version: tuple[int, int]) -> bytes:
    """Name, id, parent -1, zero offset, then (3.0+) the markers as three parallel arrays."""
    out = _cstr(name) + struct.pack("<ii3f", body_id, -1, 0.0, 0.0, 0.0)
    m = len(MARKER_OFFSETS)
    out += struct.pack("<i", m) + MARKER_OFFSETS.astype("<f4").tobytes()
    out += struct.pack(f"<{m}i", *([0] * m))
    if version >= (4, 0):
        out += b"".join(_cstr(f"Marker{j + 1}") for j in range(m))
    return out


def marker_names(bodies: Sequence[str]) -> list[str]:
    """Names of the markers in the "all" marker set: ``BODY_1 .. BODY_3`` per body."""
    return [f"{b}_{j + 1}" for b in bodies for j in range(len(MARKER_OFFSETS))]


def model_def_payload(bodies: Sequence[str], version: tuple[int, int]) -> bytes:
    """``NAT_MODELDEF``: the marker set "all", then one rigid body per body (id = index + 1)."""
    descriptions = [(0, _marker_set_description("all", marker_names(bodies)))]
    descriptions += [(1, _rigid_body_description(b, k + 1, version)) for k, b in enumerate(bodies)]
    out = struct.pack("<i", len(descriptions))
    for kind, body in descriptions:
        out += struct.pack("<i", kind)
        if version >= (4, 1):
            out += struct.pack("<i", len(body))
        out += body
    return out


def _section(count: int, items: bytes, version: tuple[int, int]) -> bytes:
    """A frame section: count, ``[4.1]`` byte size of the items, the items."""
    size = struct.pack("<i", len(items)) if version >= (4, 1) else b""
    return struct.pack("<i", count) + size + items


def _rotate(quat: np.ndarray, v: np.ndarray) -> np.ndarray:
    """(N, M, 3) the vectors v (M, 3) rotated by each unit quaternion (N, 4) xyzw."""
    q, w = quat[:, None, :3], quat[:, None, 3:]
    t = 2.0 * np.cross(q, v[None])
    return v[None] + w * t + np.cross(q, t)


def frame_payload(
    number: int,
    poses: Poses,
    timestamp: float,
    stamps: tuple[int, int, int],
    version: tuple[int, int],
) -> bytes:
    """``NAT_FRAMEOFDATA`` payload of one frame (see the module docstring for the layout).

    Args:
        number: frame number. poses: pos (N, 3) metres Y up, quat (N, 4) xyzw, tracked (N,).
            An untracked body is sent with zero position, an all-zero quaternion, error 0 and
            params 0; its markers are zeros in the marker set and absent from labeled markers.
        timestamp: seconds. stamps: mid-exposure, data-received and transmit clock ticks.
    """
    pos, quat, tracked = poses
    n = len(pos)
    pos = np.where(tracked[:, None], pos, 0.0)
    quat = np.where(tracked[:, None], quat, 0.0)
    markers = (pos[:, None] + _rotate(quat, MARKER_OFFSETS)) * tracked[:, None, None]
    marker_set = _cstr("all") + struct.pack("<i", markers.size // 3)
    marker_set += markers.astype("<f4").tobytes()
    bodies = b"".join(
        struct.pack(
            "<i3f4ffh", k + 1, *pos[k], *quat[k], MARKER_ERROR * tracked[k], int(tracked[k])
        )
        for k in range(n)
    )
    labeled = [
        struct.pack("<i3ffhf", ((k + 1) << 16) | (j + 1), *markers[k, j], 0.012, 0x0C, 0.0001)
        for k in range(n)
        if tracked[k]
        for j in range(len(MARKER_OFFSETS))
    ]
    out = struct.pack("<i", number)
    out += _section(1, marker_set, version)
    out += _section(len(LEGACY_MARKERS), LEGACY_MARKERS.astype("<f4").tobytes(), version)
    out += _section(n, bodies, version)
    out += _section(0, b"", version)  # skeletons
    if version >= (4, 1):
        out += _section(0, b"", version)  # assets
    out += _section(len(labeled), b"".join(labeled), version)
    out += _section(0, b"", version)  # force plates
    out += _section(0, b"", version)  # devices
    out += struct.pack("<IId3Q", 0, 0, timestamp, *stamps)
    if version >= (4, 1):
        out += struct.pack("<II", 0, 0)  # precision timestamp: none (no PTP clock)
    return out + struct.pack("<hi", 0, 0)


def _pose_function(poses: PoseSource, n: int) -> Callable[[int], Poses]:
    """``poses(i)`` as a function checked for shapes; arrays (T, N, ...) repeat with period T."""
    if callable(poses):
        source = poses
    else:
        arrays = [np.asarray(a) for a in poses]
        if len(arrays) != 3 or any(len(a) != len(arrays[0]) for a in arrays):
            raise DataError("poses must be (pos (T,N,3), quat (T,N,4), tracked (T,N))")

        def source(i: int) -> Poses:
            k = i % len(arrays[0])
            return arrays[0][k], arrays[1][k], arrays[2][k]

    def checked(i: int) -> Poses:
        pos, quat, tracked = source(i)
        pos, quat = np.asarray(pos, np.float64), np.asarray(quat, np.float64)
        tracked = np.asarray(tracked, bool)
        if pos.shape != (n, 3) or quat.shape != (n, 4) or tracked.shape != (n,):
            raise DataError(
                f"frame {i}: poses gave shapes {pos.shape}, {quat.shape}, {tracked.shape}; "
                f"expected ({n}, 3), ({n}, 4), ({n},)"
            )
        return pos, quat, tracked

    checked(0)
    return checked


def frames_from_capture(capture: Capture, up: str = "y") -> Poses:
    """A capture's plates as the sender's poses, in the world Motive streams with its Up Axis
    set to ``up``: "y" (Motive's default), the world turned back by the inverse of
    :data:`~rbmcap.io.optitrack.Y_UP_TO_Z_UP` (``p_y = Aᵀ p_z``, ``R_y = Aᵀ R_z``: each rigid
    body keeps its own axes); "z", rbmcap's Z-up world as it is.

    Returns:
        pos (T, N, 3) float64 metres, quat (T, N, 4) float64 xyzw, tracked (T, N) bool.
    """
    if up not in ("y", "z"):
        raise ConfigError(f"up axis {up!r}: expected y or z")
    a = Y_UP_TO_Z_UP if up == "y" else np.eye(3)
    pos = capture.pos.astype(np.float64) @ a
    rot = np.einsum("ji,tnjk->tnik", a, capture.rot.astype(np.float64))
    quat = roma.rotmat_to_unitquat(torch.from_numpy(rot)).numpy()
    return pos, quat, capture.valid.copy()


def _wait_until(t: float, halt: threading.Event) -> bool:
    """Sleep until ~0.5 ms before ``t`` (perf_counter seconds), then spin; False when halted."""
    remaining = t - time.perf_counter()
    if remaining > 0.0005 and halt.wait(remaining - 0.0005):
        return False
    while time.perf_counter() < t:
        pass
    return not halt.is_set()


class MotiveSender:
    """A NatNet server on 127.0.0.1 streaming rigid bodies as Motive does (starts at once).

    Args:
        bodies: (N,) rigid-body names; body k has id k + 1.
        poses: ``poses(i) -> (pos (N, 3) metres Y up, quat (N, 4) xyzw, tracked (N,) bool)`` for
            frame index i, or the arrays ``(pos (T, N, 3), quat (T, N, 4), tracked (T, N))``,
            which repeat with period T (:func:`frames_from_capture` gives them; Z up with
            ``up="z"``).
        fps: frame rate, Hz; frame i is due ``i / fps`` seconds after streaming began and carries
            frame number i and timestamp ``i / fps``.
        version: the NatNet bitstream version written, one of :data:`VERSIONS`.
        multicast: a multicast group (e.g. ``"239.255.42.99"``) to stream to, sent with
            ``IP_MULTICAST_IF`` 127.0.0.1 and TTL 0; None streams unicast to connected clients.
        app_version: the application version NAT_SERVERINFO states.

    Commands on ``command_port``: NAT_CONNECT is answered with NAT_SERVERINFO and registers the
    sending address as a unicast client; NAT_REQUEST_MODELDEF with NAT_MODELDEF; NAT_KEEPALIVE
    silently; NAT_DISCONNECT forgets the client; anything else gets NAT_UNRECOGNIZED_REQUEST.

    Attributes:
        command_port, data_port: the bound UDP ports (both on 127.0.0.1).
        sent: frames sent (to at least one destination); frame: the last frame index sent
            (-1 before any); sends: (frame index, perf_counter just before sending) per frame.
    """

    def __init__(
        self,
        bodies: Sequence[str],
        poses: PoseSource,
        fps: float,
        version: tuple[int, int] = (4, 1),
        multicast: str | None = None,
        app_version: tuple[int, ...] = (3, 1, 0, 0),
    ) -> None:
        if tuple(version) not in VERSIONS:
            raise ConfigError(f"NatNet version {version} is not one of {VERSIONS}")
        if not fps > 0:
            raise ConfigError(f"fps must be positive, got {fps}")
        self.bodies = [str(b) for b in bodies]
        self.fps = float(fps)
        self.version = tuple(version)
        self.multicast = multicast
        self.app_version = tuple(app_version)
        self._poses = _pose_function(poses, len(self.bodies))
        self._lock = threading.Lock()
        self._clients: set[tuple[str, int]] = set()
        self._next = 0
        self._paused = False
        self._drop: tuple[float, np.random.Generator] | None = None
        self._hidden: list[tuple[int, int, int]] = []
        self.sent, self.frame = 0, -1
        self.sends: list[tuple[int, float]] = []
        self._threads: list[threading.Thread] = []
        self._open(0, 0)
        self._start()

    # -- controls ---------------------------------------------------------------------------

    def drop(self, fraction: float, seed: int = 0) -> None:
        """From now on, skip sending each frame with probability ``fraction`` (its number is
        used up: the receiver sees a gap)."""
        with self._lock:
            self._drop = (float(fraction), np.random.default_rng(seed)) if fraction > 0 else None

    def hide(self, body: str | int, start_frame: int, stop_frame: int) -> None:
        """Send ``body`` (name or index) untracked in frame indices [start_frame, stop_frame)."""
        k = self.bodies.index(body) if isinstance(body, str) else int(body)
        with self._lock:
            self._hidden.append((k, int(start_frame), int(stop_frame)))

    def pause(self) -> None:
        """Stop streaming; frame indices do not advance while paused."""
        self._paused = True

    def resume(self) -> None:
        """Stream again from the next frame index, on a schedule starting now."""
        self._paused = False

    def restart(self) -> None:
        """Close both sockets and forget every client, bind the same ports again and stream
        from frame index 0 (clients must send NAT_CONNECT again)."""
        ports = (self.command_port, self.data_port)
        self._shutdown()
        with self._lock:
            self._clients.clear()
            self._next, self.frame = 0, -1
        self._open(*ports)
        self._start()

    def stop(self) -> None:
        """Stop streaming and close the sockets (safe to call twice)."""
        self._shutdown()

    def clients(self) -> set[tuple[str, int]]:
        """The unicast clients' addresses."""
        with self._lock:
            return set(self._clients)

    def __enter__(self) -> MotiveSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- sockets and threads ----------------------------------------------------------------

    def _open(self, command_port: int, data_port: int) -> None:
        """Bind the command and data sockets on 127.0.0.1 (port 0: the OS picks)."""
        cmd = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        cmd.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        cmd.bind((LOOPBACK, command_port))
        cmd.settimeout(0.05)
        data = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        data.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        data.bind((LOOPBACK, data_port))
        if self.multicast:
            data.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(LOOPBACK))
            data.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 0)
            data.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        self._cmd, self._data = cmd, data
        self.command_port = cmd.getsockname()[1]
        self.data_port = data.getsockname()[1]

    def _start(self) -> None:
        self._halt = threading.Event()
        self._threads = [
            threading.Thread(target=self._serve, args=(self._halt,), daemon=True),
            threading.Thread(target=self._stream, args=(self._halt,), daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _shutdown(self) -> None:
        if not self._threads:
            return
        self._halt.set()
        for t in self._threads:
            t.join()
        self._threads = []
        self._cmd.close()
        self._data.close()

    # -- commands ---------------------------------------------------------------------------

    def _serve(self, halt: threading.Event) -> None:
        while not halt.is_set():
            try:
                data, addr = self._cmd.recvfrom(65536)
            except (TimeoutError, OSError):
                continue
            if len(data) >= 4:
                self._answer(struct.unpack_from("<H", data)[0], addr)

    def _answer(self, msg_id: int, addr: tuple[str, int]) -> None:
        """Reply to one command message from ``addr``."""
        reply = None
        if msg_id == NAT_CONNECT:
            with self._lock:
                self._clients.add(addr)
            payload = server_info_payload(
                self.app_version, self.version, self.data_port, self.multicast
            )
            reply = message(NAT_SERVERINFO, payload)
        elif msg_id == NAT_REQUEST_MODELDEF:
            reply = message(NAT_MODELDEF, model_def_payload(self.bodies, self.version))
        elif msg_id == NAT_DISCONNECT:
            with self._lock:
                self._clients.discard(addr)
        elif msg_id != NAT_KEEPALIVE:
            reply = message(NAT_UNRECOGNIZED_REQUEST, b"")
        if reply is not None:
            self._cmd.sendto(reply, addr)

    # -- frames -----------------------------------------------------------------------------

    def _stream(self, halt: threading.Event) -> None:
        """Emit frames on a schedule of 1/fps. Frames that fell behind it (the thread was not
        scheduled) are sent at once, so the rate holds on a loaded machine; after a stall
        longer than :data:`MAX_CATCH_UP` seconds, or a pause, the schedule restarts from now."""
        period = 1.0 / self.fps
        due = time.perf_counter()
        while _wait_until(due, halt):
            if self._paused:
                halt.wait(0.002)
                due = time.perf_counter()
                continue
            self._emit()
            due += period
            if time.perf_counter() - due > MAX_CATCH_UP:
                due = time.perf_counter()

    def _emit(self) -> None:
        """Build and send the next frame to its destinations (unless dropped)."""
        with self._lock:
            i = self._next
            self._next += 1
            dropped = self._drop is not None and self._drop[1].random() < self._drop[0]
            hidden = [k for k, a, b in self._hidden if a <= i < b]
            targets = [(self.multicast, self.data_port)] if self.multicast else list(self._clients)
        if dropped or not targets:
            return
        pos, quat, tracked = self._poses(i)
        tracked = tracked.copy()
        tracked[hidden] = False
        now = time.perf_counter()
        tick = int(now * CLOCK_HZ)
        stamps = (tick - CLOCK_HZ // 500, tick - CLOCK_HZ // 1000, tick)
        payload = frame_payload(i, (pos, quat, tracked), i / self.fps, stamps, self.version)
        packet = message(NAT_FRAMEOFDATA, payload)
        sent_at = time.perf_counter()
        for addr in targets:
            try:
                self._data.sendto(packet, addr)
            except OSError:
                continue
        with self._lock:
            self.sent += 1
            self.frame = i
            self.sends.append((i, sent_at))
