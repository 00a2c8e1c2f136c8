"""Test-side QTM real-time server: enough of the QTM RT protocol (the little-endian TCP port) for
``qtm_rt`` to connect, read the General and 6D parameters and stream 6D frames.

Written from the published protocol (Qualisys' "QTM Real-time Server Protocol Documentation"):

- every packet is ``size`` (uint32, the whole packet, header included) and ``type`` (uint32:
  0 error, 1 command / command response, 2 XML, 3 data, 4 no more data) then the data; strings
  (errors, responses, XML) are NUL-terminated; all little-endian, floats IEEE 754 single;
- on connect the server says ``QTM RT Interface connected``; commands are case-insensitive
  words separated by spaces: ``Version n.n`` → ``Version set to n.n``, ``QTMVersion``,
  ``ByteOrder``, ``GetParameters General 6D`` → one XML packet ``<QTM_Parameters_Ver_n.n>``
  holding a ``General`` (``Frequency``) and a ``The_6D`` (``Bodies``, ``Body/Name``) block,
  ``StreamFrames (AllFrames | Frequency:n | FrequencyDivisor:n) 6D`` (no reply: the data packets
  are the answer), ``StreamFrames Stop`` (no reply), ``GetCurrentFrame 6D``, ``Disconnect``; an
  unknown command gets the error ``Parse error``;
- a data packet is: header (type 3), timestamp (int64, microseconds), frame number (uint32),
  component count (uint32), then per component its size (uint32, header included) and type
  (uint32, 5 = 6D); the 6D component holds the body count (int32), the 2D drop rate and the 2D
  out-of-sync rate (int16 each), then per body x, y, z (float32, mm) and its rotation matrix as
  9 float32 in column-major order; an untracked body is all NaN.

The server runs on threads: one accepting, one per connection reading commands, one per stream
sending frames on a ``perf_counter`` schedule at the capture frequency (or the rate asked for).
"""

from __future__ import annotations

import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from xml.sax.saxutils import escape

import numpy as np

PACKET_ERROR, PACKET_COMMAND, PACKET_XML, PACKET_DATA, PACKET_NO_MORE_DATA = 0, 1, 2, 3, 4
COMPONENT_6D = 5
WELCOME = "QTM RT Interface connected"
QTM_VERSION = "QTM Version is 2024.2 (build 12345)"

Poses = Callable[[int], tuple[np.ndarray, np.ndarray]]
"""frame number → (N, 3) positions in mm, (N, 3, 3) world-from-body rotations (QTM's world)."""


def packet(kind: int, payload: bytes) -> bytes:
    """A QTM RT packet: size (header included) and type, then ``payload``."""
    return struct.pack("<II", 8 + len(payload), kind) + payload


def string_packet(kind: int, text: str) -> bytes:
    """A command response, error or XML packet: the NUL-terminated string."""
    return packet(kind, text.encode() + b"\0")


def sixd_component(pos_mm: np.ndarray, rot: np.ndarray, drop: int = 0, sync: int = 0) -> bytes:
    """The 6D component of (N, 3) positions (mm) and (N, 3, 3) rotations, field by field."""
    body = bytearray()
    for p, r in zip(np.asarray(pos_mm, np.float64), np.asarray(rot, np.float64), strict=True):
        body += struct.pack("<3f", *p)
        body += struct.pack("<9f", *(r[i, j] for j in range(3) for i in range(3)))
    head = struct.pack("<IIihh", 8 + 8 + len(body), COMPONENT_6D, len(pos_mm), drop, sync)
    return head + bytes(body)


def data_packet(timestamp_us: int, frame: int, components: Sequence[bytes]) -> bytes:
    """A data packet: timestamp (µs), frame number, component count, the components."""
    head = struct.pack("<qII", timestamp_us, frame, len(components))
    return packet(PACKET_DATA, head + b"".join(components))


def general_xml(frequency: float) -> str:
    return (
        f"<General><Frequency>{frequency:g}</Frequency><Capture_Time>10</Capture_Time>"
        "<Start_On_External_Trigger>False</Start_On_External_Trigger></General>"
    )


def sixd_xml(names: Sequence[str]) -> str:
    """A ``The_6D`` block in the layout QTM sends (protocol 1.21 and later), one point each."""
    bodies = "".join(
        f"<Body><Name>{escape(n)}</Name><Enabled>true</Enabled>"
        '<Color R="255" G="0" B="0"/><MaxResidual>10</MaxResidual><MinMarkers>3</MinMarkers>'
        "<BoneLengthTolerance>5</BoneLengthTolerance><Points>"
        f'<Point X="0" Y="0" Z="0" Virtual="0" PhysicalId="0" Name="{escape(n)} - 1"/>'
        "</Points></Body>"
        for n in names
    )
    euler = "<Euler><First>Roll</First><Second>Pitch</Second><Third>Yaw</Third></Euler>"
    return f"<The_6D><Bodies>{len(names)}</Bodies>{bodies}{euler}</The_6D>"


class _Connection:
    """One client: its socket (sends serialised by a lock), reader thread and stream."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.lock = threading.Lock()
        self.stop_stream = threading.Event()
        self.stream: threading.Thread | None = None
        self.reader: threading.Thread | None = None

    def send(self, data: bytes) -> bool:
        try:
            with self.lock:
                self.sock.sendall(data)
        except OSError:
            return False
        return True

    def end_stream(self) -> None:
        self.stop_stream.set()
        if self.stream is not None and self.stream is not threading.current_thread():
            self.stream.join()
        self.stream = None

    def shutdown(self) -> None:
        self.stop_stream.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class QTMServer:
    """A QTM RT server on loopback streaming given 6D poses.

    Args:
        names: (N,) body names, in stream order.
        poses: ``(positions, rotations)`` arrays (T, N, 3) mm and (T, N, 3, 3) (frame ``f``
            sends index ``f % T``), or a callable frame number → ((N, 3), (N, 3, 3)).
        frequency: the capture frequency (General parameters) and the clock frames follow, Hz.
        version: the protocol version reported before a client sets one.

    Attributes:
        port: the port it listens on (OS-chosen, kept across :meth:`restart`).
        sent: data packets sent; send_times: frame number → ``perf_counter()`` after sending.
        commands: every command string received, in order.
    """

    def __init__(
        self,
        names: Sequence[str],
        poses: tuple[np.ndarray, np.ndarray] | Poses,
        frequency: float = 100.0,
        version: str = "1.25",
        host: str = "127.0.0.1",
    ):
        self.names = tuple(names)
        self.frequency = float(frequency)
        self.version = version
        self.host = host
        self._poses = poses if callable(poses) else _cycle(*poses)
        self._lock = threading.Lock()
        self._hidden: list[tuple[int, int, int]] = []
        self._drop, self._rng = 0.0, np.random.default_rng(0)
        self.sent = 0
        self.send_times: dict[int, float] = {}
        self.commands: list[str] = []
        self._t0 = time.perf_counter()
        self._connections: list[_Connection] = []
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None
        self.port = 0
        self._listen(0)

    def __enter__(self) -> QTMServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- controls -------------------------------------------------------------------------

    def drop(self, fraction: float, seed: int = 0) -> None:
        """From now on skip each frame with probability ``fraction`` (its number is used up)."""
        with self._lock:
            self._drop, self._rng = float(fraction), np.random.default_rng(seed)

    def hide(self, body: int | str, start: int = 0, stop: int | None = None) -> None:
        """Send ``body`` (index or name) as untracked (NaN) in frames ``start <= f < stop``."""
        k = self.names.index(body) if isinstance(body, str) else int(body)
        with self._lock:
            self._hidden.append((k, start, stop if stop is not None else 2**62))

    def restart(self) -> None:
        """Close the listening socket and every connection, then listen again on the port."""
        self._close_all()
        self._listen(self.port)

    def stop(self) -> None:
        """Close the listening socket and every connection (connecting is then refused)."""
        self._close_all()

    def pose(self, frame: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What frame ``frame`` carries: (N, 3) mm, (N, 3, 3) rotations, (N,) tracked."""
        pos, rot = self._poses(frame)
        tracked = np.ones(len(self.names), bool)
        with self._lock:
            for k, start, stop in self._hidden:
                tracked[k] &= not start <= frame < stop
        return np.asarray(pos, np.float64), np.asarray(rot, np.float64), tracked

    # --- sockets ----------------------------------------------------------------------------

    def _listen(self, port: int) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, port))
        listener.listen(8)
        listener.settimeout(0.05)
        self._listener, self.port = listener, listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._acceptor.start()

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(sock)
            with self._lock:
                self._connections.append(conn)
            conn.reader = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            conn.reader.start()

    def _close_all(self) -> None:
        listener, self._listener = self._listener, None
        if self._acceptor is not None:
            self._acceptor.join()
        if listener is not None:
            listener.close()
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.shutdown()
        for conn in connections:
            if conn.reader is not None:
                conn.reader.join()

    def _serve(self, conn: _Connection) -> None:
        """Read and answer one client's commands until it leaves or is closed."""
        buffer = b""
        if conn.send(string_packet(PACKET_COMMAND, WELCOME)):
            while True:
                try:
                    data = conn.sock.recv(65536)
                except OSError:
                    break
                if not data:
                    break
                buffer += data
                buffer, keep = self._handle_packets(conn, buffer)
                if not keep:
                    break
        conn.shutdown()
        conn.end_stream()
        conn.sock.close()

    def _handle_packets(self, conn: _Connection, buffer: bytes) -> tuple[bytes, bool]:
        """Answer each whole packet in ``buffer``; the rest, and False to close the client."""
        while len(buffer) >= 8:
            size, kind = struct.unpack_from("<II", buffer)
            if size < 8:
                return b"", False
            if len(buffer) < size:
                break
            payload, buffer = buffer[8:size], buffer[size:]
            if kind != PACKET_COMMAND:
                conn.send(string_packet(PACKET_ERROR, "Command not supported."))
            elif not self._command(conn, payload.rstrip(b"\0").decode(errors="replace")):
                return b"", False
        return buffer, True

    # --- commands ---------------------------------------------------------------------------

    def _command(self, conn: _Connection, text: str) -> bool:
        """Answer one command; False when the client asked to disconnect."""
        self.commands.append(text)
        words = text.split()
        name, args = (words[0].lower() if words else ""), [w.lower() for w in words[1:]]
        if name == "version":
            if args:
                self.version = words[1]
                return conn.send(string_packet(PACKET_COMMAND, f"Version set to {words[1]}"))
            return conn.send(string_packet(PACKET_COMMAND, f"Version is {self.version}"))
        if name == "qtmversion":
            return conn.send(string_packet(PACKET_COMMAND, QTM_VERSION))
        if name == "byteorder":
            return conn.send(string_packet(PACKET_COMMAND, "Byte order is little endian"))
        if name == "getparameters":
            return conn.send(self._parameters(args))
        if name == "getcurrentframe" and "6d" in args:
            return conn.send(self._frame_packet(self._frame_at(time.perf_counter())))
        if name == "streamframes":
            return self._stream_command(conn, args)
        if name == "disconnect":
            return False
        return conn.send(string_packet(PACKET_ERROR, "Parse error"))

    def _parameters(self, args: list[str]) -> bytes:
        wanted = set(args) if args and "all" not in args else {"general", "6d"}
        if not wanted <= {"general", "6d"}:
            return string_packet(PACKET_ERROR, "Parameters not available")
        blocks = (general_xml(self.frequency) if "general" in wanted else "") + (
            sixd_xml(self.names) if "6d" in wanted else ""
        )
        tag = f"QTM_Parameters_Ver_{self.version}"
        return string_packet(PACKET_XML, f"<{tag}>{blocks}</{tag}>")

    def _stream_command(self, conn: _Connection, args: list[str]) -> bool:
        conn.end_stream()
        if args[:1] == ["stop"]:
            return True
        rate = self._rate(args[0] if args else "")
        if rate is None or "6d" not in args[1:] or any(a.startswith("udp") for a in args):
            return conn.send(string_packet(PACKET_ERROR, "Parse error"))
        conn.stop_stream = threading.Event()
        conn.stream = threading.Thread(target=self._stream, args=(conn, rate), daemon=True)
        conn.stream.start()
        return True

    def _rate(self, spec: str) -> float | None:
        """Frames per second for ``AllFrames``, ``Frequency:n``, ``FrequencyDivisor:n``."""
        key, _, value = spec.partition(":")
        try:
            if key == "allframes" and not value:
                return self.frequency
            if key == "frequency":
                return min(float(value), self.frequency) if float(value) > 0 else None
            if key == "frequencydivisor":
                return self.frequency / int(value) if int(value) > 0 else None
        except ValueError:
            return None
        return None

    # --- frames -----------------------------------------------------------------------------

    def _frame_at(self, t: float) -> int:
        return round((t - self._t0) * self.frequency)

    def _frame_packet(self, frame: int) -> bytes:
        pos, rot, tracked = self.pose(frame)
        pos, rot = pos.copy(), rot.copy()
        pos[~tracked], rot[~tracked] = np.nan, np.nan
        timestamp = round(frame * 1e6 / self.frequency)
        return data_packet(timestamp, frame, [sixd_component(pos, rot)])

    def _stream(self, conn: _Connection, rate: float) -> None:
        """Send frames at ``rate`` Hz from the next capture frame on, on a perf_counter clock."""
        stop = conn.stop_stream
        start = self._t0 + math.ceil((time.perf_counter() - self._t0) * self.frequency) / (
            self.frequency
        )
        j = 0
        while not stop.is_set():
            due = start + j / rate
            j += 1
            delay = due - time.perf_counter()
            if delay > 0 and stop.wait(delay):
                return
            frame = self._frame_at(due)
            with self._lock:
                skip = self._drop > 0 and self._rng.random() < self._drop
            if skip:
                continue
            if not conn.send(self._frame_packet(frame)):
                return
            with self._lock:
                self.sent += 1
                self.send_times[frame] = time.perf_counter()


def _cycle(positions: np.ndarray, rotations: np.ndarray) -> Poses:
    positions, rotations = np.asarray(positions), np.asarray(rotations)
    return lambda frame: (positions[frame % len(positions)], rotations[frame % len(rotations)])
