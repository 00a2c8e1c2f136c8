"""``qtm://``: Qualisys Track Manager's 6D rigid bodies over the QTM real-time (RT) protocol.

The connection is made by Qualisys' client library ``qtm_rt`` (asyncio) on a private event loop
that runs on the reader's thread, only while it waits in :meth:`QualisysSource.open`,
:meth:`~QualisysSource.read` and :meth:`~QualisysSource.close` (no thread of its own: a second
thread would take the interpreter lock from the session's step at every packet): connect and
negotiate the protocol version, read the General (capture frequency) and 6D (body names, in
stream order) parameters, then ``StreamFrames`` of the ``6D`` component.

Each data packet's 6D component carries, per body, its position (x, y, z float32, millimetres)
and its 3 x 3 world-from-body rotation matrix as 9 float32 in column-major order (``R[i, j]`` is
element ``3 j + i``: QTM's ``P_global = R P_local + P_origin``); a body QTM did not track in that
frame comes as NaN.

Frames are converted to rbmcap's conventions (metres, world Z up: QTM's default; ``up="y"`` for a
QTM calibrated Y up turns its world with :data:`~rbmcap.io.optitrack.Y_UP_TO_Z_UP`), untracked
bodies get ``valid`` False with a zero position and an identity rotation, and are handed to
:meth:`QualisysSource.read` in order (one read of the socket can bring several packets; at most
:data:`QUEUE_FRAMES` wait, a reader that far behind loses the oldest, counted in
``overwritten``). A frame's arrival (``received``) is when its packet was read from the socket:
``qtm_rt``'s transport gives no kernel receive time, so a packet that waited while the reader
was busy carries less than its wait.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket
import time
import xml.etree.ElementTree as ET

import numpy as np
import qtm_rt
from qtm_rt.packet import QRTComponentType, RT6DComponent
from qtm_rt.protocol import QTMProtocol
from qtm_rt.qrt import QRTConnection

from rbmcap.errors import ConfigError, FormatError, first_line
from rbmcap.io.optitrack import Y_UP_TO_Z_UP
from rbmcap.live.frames import RigidBodyFrame
from rbmcap.live.handoff import FrameQueue
from rbmcap.live.sources.base import LOOPBACK, SourceLost

QUEUE_FRAMES = 64
"""Frames the source holds for its reader at most (a quarter of a second at 240 Hz)."""
UP_AXES = ("z", "y")
"""QTM world up axes a source converts from (to rbmcap's Z up)."""

MM = 0.001
"""Metres per millimetre: QTM sends lengths in mm."""

CLOSE_TIMEOUT_S = 2.0
"""How long ``close`` waits for the stream stop to be sent and the connection to end."""

DEFAULT_VERSION: str = inspect.signature(qtm_rt.connect).parameters["version"].default
"""The RT protocol version ``qtm_rt`` asks for by default."""

_QTM_LOG = logging.getLogger("qtm_rt")


def quiet_qtm_logging() -> None:
    """Keep ``qtm_rt``'s own log records (connection notes, unsolicited-error warnings) off the
    application's handlers: the source reports every failure itself as one line. A level set by
    the user (``QTM_LOGGING=debug``) is left as it is."""
    if _QTM_LOG.level == logging.NOTSET:
        _QTM_LOG.setLevel(logging.CRITICAL)


def body_names(root: ET.Element) -> tuple[str, ...]:
    """The 6D bodies' names, in the order the 6D component sends them, from a parameters XML
    tree holding a ``The_6D`` block (``<Body><Name>…</Name>…</Body>`` per body)."""
    block = root.find(".//The_6D")
    if block is None:
        raise FormatError("QTM parameters: expected a The_6D block (6DOF bodies)")
    return tuple((body.findtext("Name") or "").strip() for body in block.findall("Body"))


def capture_frequency(root: ET.Element) -> float | None:
    """The General block's capture ``Frequency`` (Hz), or None where it is missing or not a
    positive number."""
    text = root.findtext(".//General/Frequency")
    try:
        value = float(text) if text is not None else float("nan")
    except ValueError:
        return None
    return value if value > 0 else None


def convert_6d(raw: np.ndarray, up: str = "z") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """QTM 6D bodies in rbmcap's conventions.

    Args:
        raw: (N, 12) per body x, y, z (mm) then the rotation matrix's 9 elements in QTM's
            column-major order; NaN for a body not tracked.
        up: QTM's world up axis, "z" (QTM's default, rbmcap's) or "y".

    Returns:
        pos (N, 3) float32 metres, rot (N, 3, 3) float32 world-from-body, valid (N,) bool;
        invalid bodies have zeros and identities.
    """
    raw = np.asarray(raw, dtype=np.float64).reshape(-1, 12)
    valid = np.isfinite(raw).all(axis=1)
    pos, rot = raw[:, :3] * MM, raw[:, 3:].reshape(-1, 3, 3).transpose(0, 2, 1)
    if up == "y":
        pos, rot = pos @ Y_UP_TO_Z_UP.T, Y_UP_TO_Z_UP @ rot
    pos, rot = pos.astype(np.float32), rot.astype(np.float32)
    if not valid.all():
        pos[~valid], rot[~valid] = 0.0, np.eye(3, dtype=np.float32)
    return pos, rot, valid


def packet_6d(packet: qtm_rt.QRTPacket) -> np.ndarray | None:
    """(N, 12) float32 bodies of a data packet's 6D component as they lie on the wire (see
    :func:`convert_6d`), or None when the packet has none. The component header is read with
    ``qtm_rt``'s own format (body count, 2D drop and out-of-sync rates); the bodies, 12 float32
    each, are read in one go."""
    start = packet.components.get(QRTComponentType.Component6d)
    if start is None:
        return None
    body_count = RT6DComponent.format.unpack_from(packet.data, start)[0]
    offset = start + RT6DComponent.format.size
    return np.frombuffer(packet.data, "<f4", count=12 * body_count, offset=offset).reshape(-1, 12)


class QualisysSource:
    """Rigid bodies streamed by QTM's RT server (see the module docstring).

    Args:
        host, port: the QTM RT server (its little-endian port, 22223 by default).
        version: the RT protocol version to ask for (None: ``qtm_rt``'s default).
        up: QTM's world up axis, "z" (default) or "y".
        frequency: ask QTM for about this many frames per second (``Frequency:n``); None: every
            frame it processes (``AllFrames``).
        timeout: seconds to wait for the connection and each reply while opening.

    Attributes:
        name: ``qtm://host:port``; fps: the General parameters' capture frequency, or
            ``frequency`` when given (known after ``open``); overwritten: frames replaced by a
            newer one before ``read`` took them (over every open so far).
    """

    finite = False

    def __init__(
        self,
        host: str = LOOPBACK,
        port: int = 22223,
        version: str | None = None,
        up: str = "z",
        frequency: float | None = None,
        timeout: float = 5.0,
    ):
        if up not in UP_AXES:
            raise ConfigError(f"qtm up axis {up!r}: expected one of {', '.join(UP_AXES)}")
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"qtm port {port!r}: expected a number in 1..65535")
        if frequency is not None and not frequency > 0:
            raise ConfigError(f"qtm frequency {frequency!r}: expected a positive number of Hz")
        if not str(host):
            raise ConfigError("qtm host: expected a host name or address")
        self.host, self.port, self.version, self.up = str(host), port, version, up
        self.frequency = float(frequency) if frequency is not None else None
        self.timeout = float(timeout)
        self.name = f"qtm://{self.host}:{port}"
        self.fps: float | None = self.frequency
        self.names: tuple[str, ...] = ()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future | None = None
        self._connection = None
        self._slot: FrameQueue[RigidBodyFrame] = FrameQueue(QUEUE_FRAMES)
        self._overwritten_before = 0
        self._lost: str | None = None
        self._closing = False
        self._ended: asyncio.Event | None = None
        self._opening: asyncio.Task | None = None

    @property
    def overwritten(self) -> int:
        return self._overwritten_before + self._slot.overwritten

    def open(self) -> None:
        """Connect, read the parameters and start streaming.

        Raises:
            SourceLost: QTM cannot be reached (refused, no answer), refused the protocol
                version or the stream, has no 6D parameters, or the connection broke.
            FormatError: the parameters QTM sent are not XML or hold no 6D block.
            ConfigError: the host name does not resolve.
        """
        self.close()
        self._resolve()
        quiet_qtm_logging()
        self._overwritten_before += self._slot.overwritten
        self._slot, self._lost, self._closing = FrameQueue(QUEUE_FRAMES), None, False
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(self._on_loop_error)
        self._loop = loop
        try:
            self._call(self._start(), 4 * self.timeout + 1.0)
        except BaseException:
            self.close()
            raise

    def read(self, timeout: float) -> RigidBodyFrame | None:
        """The newest frame not yet read, waiting up to ``timeout`` s (None when none came).

        Raises:
            SourceLost: the connection ended or broke (or the source is not open).
        """
        if self._loop is None:
            raise SourceLost(f"{self.name}: not open")
        frame = self._slot.get(0.0)
        if frame is None and self._lost is None:
            self._run(timeout)
            frame = self._slot.get(0.0)
        if frame is None and self._lost is not None:
            raise SourceLost(self._lost)
        return frame

    def _run(self, timeout: float) -> None:
        """Run the loop until a packet arrives or ``timeout`` s pass (with 0: one look at the
        socket, handling what is already there)."""
        loop = self._loop
        if timeout <= 0:
            loop.run_until_complete(asyncio.sleep(0))
            return
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _settle, waiter)
        try:
            loop.run_until_complete(waiter)
        finally:
            timer.cancel()
            self._waiter = None

    def ready(self) -> None:
        """Nothing to hold back: QTM streams live, frames come as they are captured."""

    def close(self) -> None:
        """Stop streaming, disconnect and close the loop; safe to call twice."""
        loop = self._loop
        if loop is None:
            return
        self._closing = True
        if self._connection is not None and not loop.is_running():
            try:
                self._call(self._stop(), CLOSE_TIMEOUT_S + 0.5)
            except SourceLost:
                pass
        _finish_loop(loop)
        self._loop, self._connection = None, None
        self._ended = self._opening = None
        self._slot.close()

    def _resolve(self) -> None:
        try:
            socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ConfigError(f"{self.name}: cannot resolve {self.host!r} ({exc})") from None

    def _call(self, coroutine, timeout: float):
        """Run ``coroutine`` on the source's loop and return its result; SourceLost when it
        fails or outlasts ``timeout`` s."""
        try:
            return self._loop.run_until_complete(asyncio.wait_for(coroutine, timeout))
        except (SourceLost, ConfigError, FormatError):
            raise
        except (TimeoutError, asyncio.CancelledError):
            why = f"no answer within {self.timeout:g} s"
        except qtm_rt.QRTCommandException as exc:
            why = f"QTM answered {_text(exc.value)!r}"
        except (OSError, EOFError) as exc:
            why = first_line(exc)
        # a connection that broke meanwhile is the cause of whatever failed after it
        raise SourceLost(self._lost or f"{self.name}: {why}")

    async def _start(self) -> None:
        """Connect, read the General and 6D parameters, start the 6D stream."""
        self._ended, self._opening = asyncio.Event(), asyncio.current_task()
        connection = await self._connect()
        xml = await connection.get_parameters(["general", "6d"])
        try:
            root = ET.fromstring(xml)
        except ET.ParseError as exc:
            raise FormatError(f"{self.name}: QTM parameters are not XML ({exc})") from None
        self.names = body_names(root)
        self.fps = self.frequency or capture_frequency(root)
        frames = "allframes" if self.frequency is None else f"frequency:{self.frequency:g}"
        await connection.stream_frames(frames=frames, components=["6d"], on_packet=self._on_packet)

    async def _connect(self) -> QRTConnection:
        """``qtm_rt.connect``'s steps (its protocol, the ``Version`` command, its connection
        object) with the causes kept for the message and the connection held from the start,
        so that a version negotiation that times out still gets its transport closed."""
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(
                    lambda: QTMProtocol(loop=loop, on_disconnect=self._on_disconnect),
                    self.host,
                    self.port,
                ),
                self.timeout,
            )
        except OSError as exc:
            why = "refused" if isinstance(exc, ConnectionRefusedError) else first_line(exc)
            raise SourceLost(f"{self.name}: cannot connect ({why})") from None
        self._connection = QRTConnection(protocol, timeout=self.timeout)
        await asyncio.wait_for(protocol.set_version(self.version or DEFAULT_VERSION), self.timeout)
        return self._connection

    async def _stop(self) -> None:
        """Stop the stream and disconnect, waiting for the connection to end."""
        connection, ended = self._connection, self._ended
        if connection.has_transport():
            await connection.stream_frames_stop()
            connection.disconnect()
            if ended is not None:
                try:
                    await asyncio.wait_for(ended.wait(), CLOSE_TIMEOUT_S)
                except TimeoutError:
                    pass

    def _on_packet(self, packet) -> None:
        """One data packet (while the loop runs): convert its 6D component, offer the frame."""
        received = time.perf_counter()
        try:
            raw = packet_6d(packet)
            if raw is None:
                return
            if len(raw) != len(self.names):
                self._lose(
                    f"{self.name}: {len(raw)} 6D bodies streamed but {len(self.names)}"
                    " in the parameters (bodies changed in QTM)"
                )
                return
            pos, rot, valid = convert_6d(raw, self.up)
        except Exception as exc:  # a malformed packet must not escape into asyncio's transport
            self._lose(f"{self.name}: malformed 6D packet ({first_line(exc)})")
            return
        frame = RigidBodyFrame(
            frame=int(packet.framenumber),
            timestamp=packet.timestamp * 1e-6,
            received=received,
            names=self.names,
            pos=pos,
            rot=rot,
            valid=valid,
        )
        self._slot.put(frame)
        _settle(self._waiter)

    def _on_disconnect(self, exc: BaseException | None) -> None:
        if self._ended is not None:
            self._ended.set()
        if self._opening is not None and not self._opening.done():
            self._opening.cancel()
        if not self._closing:
            why = first_line(exc) if exc is not None else "QTM closed the connection"
            self._lose(f"{self.name}: connection lost ({why})")

    def _on_loop_error(self, loop, context: dict) -> None:
        """asyncio's unhandled errors (a packet qtm_rt cannot parse, a transport failure) end the
        connection as a lost source instead of being printed."""
        exc, message = context.get("exception"), str(context.get("message"))
        if exc is not None and "data_received" in message:
            message = f"unreadable data from QTM ({first_line(exc)})"
        elif exc is not None:
            message = first_line(exc)
        if not self._closing:
            self._lose(f"{self.name}: {message}")

    def _lose(self, message: str) -> None:
        if self._lost is None:
            self._lost = message
        self._slot.close()
        _settle(self._waiter)
        if self._connection is not None and self._connection.has_transport():
            self._connection.disconnect()


def _settle(waiter: asyncio.Future | None) -> None:
    """End a wait in :meth:`QualisysSource._run` (a packet, a lost connection, the timeout)."""
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _finish_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on a stopped loop, let it unwind, close the loop."""
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
