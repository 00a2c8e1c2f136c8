"""``NatNetServer``: recorded rigid bodies streamed as a NatNet server, for benchmarks and demos.

The server plays Motive's part of NatNet (:mod:`~rbmcap.bench.natnet_encoder`) on loopback (or the
interface ``address``). On its command socket it answers

- ``NAT_CONNECT`` with ``NAT_SERVERINFO`` (registering the sender as a unicast client),
- ``NAT_REQUEST_MODELDEF`` with the rigid bodies' descriptions (ids 1..N in ``names`` order),
- ``NAT_REQUEST_FRAMEOFDATA`` with the current frame, ``NAT_KEEPALIVE`` silently,
  ``NAT_DISCONNECT`` by forgetting the client, anything else with ``NAT_UNRECOGNIZED_REQUEST``;

and one background thread streams ``NAT_FRAMEOFDATA`` at ``fps``: unicast from the command socket
to every connected client (a client silent for :data:`CLIENT_TIMEOUT_S` is forgotten), or
multicast to ``group:data_port`` with TTL 1 out of the ``address`` interface. Frame k of a run is
due at ``start + k / fps`` on ``time.perf_counter``: the thread sleeps (serving commands) until
:data:`SPIN_S` before it and spins the rest. Frame numbers count from ``first_frame`` and
timestamps from 0 s at every :meth:`~NatNetServer.start` (a restarted server's numbers go back);
:meth:`~NatNetServer.pause` and :meth:`~NatNetServer.resume` stop and restart sending without
closing anything, :meth:`~NatNetServer.drop` skips chosen frame numbers (lost packets).
"""

from __future__ import annotations

import ipaddress
import select
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.bench import natnet_encoder as enc
from rbmcap.errors import ConfigError, FormatError
from rbmcap.io.capture import Capture
from rbmcap.io.optitrack import Y_UP_TO_Z_UP
from rbmcap.live.sources import natnet_decoder as nn
from rbmcap.live.sources.base import LOOPBACK

SPIN_S = 0.0005
"""How long before a frame is due the streaming thread stops sleeping and spins."""

CLIENT_TIMEOUT_S = 5.0
"""A unicast client that sent nothing (keep-alives included) for this long is forgotten."""

_IDLE_S = 0.05


@dataclass(eq=False)
class BodyFrames:
    """Rigid bodies over time in rbmcap's conventions, as a server streams them.

    Attributes:
        names: (N,) rigid-body names.
        pos: (T, N, 3) positions, metres, world Z up.
        quat: (T, N, 4) world-from-body quaternions, xyzw.
        valid: (T, N) bool: tracked (an invalid body streams as untracked).
    """

    names: tuple[str, ...]
    pos: np.ndarray
    quat: np.ndarray
    valid: np.ndarray

    def __post_init__(self) -> None:
        self.names = tuple(str(n) for n in self.names)
        self.pos = np.asarray(self.pos, np.float64)
        self.quat = np.asarray(self.quat, np.float64)
        self.valid = np.asarray(self.valid, bool)
        n = len(self.names)
        t = self.valid.shape[0] if self.valid.ndim == 2 else 0
        for what, array, tail in (
            ("pos", self.pos, (n, 3)),
            ("quat", self.quat, (n, 4)),
            ("valid", self.valid, (n,)),
        ):
            if t < 1 or array.shape != (t, *tail):
                raise FormatError(
                    f"body frames: {what} has shape {array.shape}, expected "
                    f"(T, {', '.join(map(str, tail))}) for T >= 1 frames of {n} bodies"
                )

    @classmethod
    def from_capture(cls, capture: Capture) -> BodyFrames:
        """A capture's plates (rotations turned into quaternions)."""
        rot = torch.from_numpy(np.asarray(capture.rot, np.float64))
        quat = roma.rotmat_to_unitquat(rot).numpy()
        return cls(tuple(capture.names), capture.pos, quat, capture.valid)


class NatNetServer:
    """A NatNet server streaming ``frames`` (see the module docstring).

    Args:
        frames: what to stream: :class:`BodyFrames` or a :class:`~rbmcap.io.capture.Capture`.
        fps: frames per second.
        version: the NatNet version to stream, (major, minor), 3.0 or later.
        command_port: the port to answer on (0: one the OS chooses; see ``command_port``).
        data_port: multicast: the port frames go to (also announced in ``NAT_SERVERINFO``).
        multicast: the group to multicast frames to, or None to send them to each client.
        address: the address to bind (and the multicast interface).
        up: the world up axis to stream, "y" (Motive's default) or "z".
        scale: metres per streamed length unit.
        loop: start again from the first frame after the last (else stop sending there).
        first_frame: the frame number of the first frame of each run.

    Attributes:
        command_port: the port actually bound (kept across ``stop`` and ``start``).
        sent: frames sent (to anyone) since the server was made; dropped: frames skipped by
            :meth:`drop`; clients: the unicast clients now registered; next_frame: the number
            of the next frame due.
    """

    def __init__(
        self,
        frames: BodyFrames | Capture,
        fps: float,
        version: tuple[int, int] = (4, 1),
        command_port: int = 0,
        data_port: int = 1511,
        multicast: str | None = None,
        address: str = LOOPBACK,
        up: str = "y",
        scale: float = 1.0,
        loop: bool = True,
        first_frame: int = 1,
    ):
        if isinstance(frames, Capture):
            frames = BodyFrames.from_capture(frames)
        if not (np.isfinite(fps) and fps > 0):
            raise ConfigError(f"natnet server fps {fps!r}: expected a positive number")
        if up not in ("y", "z"):
            raise ConfigError(f"natnet server up axis {up!r}: expected y or z")
        if multicast is not None and not _is_multicast(multicast):
            raise ConfigError(
                f"natnet server multicast group {multicast!r}: not a multicast address"
            )
        self.version = nn.natnet_version(version)
        self.names, self.fps, self.loop = frames.names, float(fps), loop
        self.command_port, self.data_port = int(command_port), int(data_port)
        self.multicast, self.address, self.first_frame = multicast, address, int(first_frame)
        self._pos, self._quat = _server_axes(frames, up, scale)
        self._valid = frames.valid
        self._ids = np.arange(1, len(self.names) + 1, dtype=np.int32)
        self.sent = self.dropped = 0
        self._clients: dict[tuple[str, int], float] = {}
        self._drop: set[int] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._streaming = True
        self._command: socket.socket | None = None
        self._data: socket.socket | None = None
        self._index = 0

    @property
    def clients(self) -> list[tuple[str, int]]:
        with self._lock:
            return list(self._clients)

    @property
    def next_frame(self) -> int:
        """The number of the next frame due (sent or dropped)."""
        return self.first_frame + self._index

    # -- control ----------------------------------------------------------------------------

    def start(self) -> NatNetServer:
        """Bind (the same command port again after a ``stop``) and start streaming."""
        if self._thread is not None:
            return self
        command = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            command.bind((self.address, self.command_port))
        except OSError as exc:
            command.close()
            raise ConfigError(
                f"natnet server: cannot bind {self.address}:{self.command_port} ({exc})"
            ) from None
        self._command, self.command_port = command, command.getsockname()[1]
        if self.multicast is not None:
            self._data = _multicast_sender(self.address)
        self._clients.clear()
        self._stopping, self._index = False, 0
        self._thread = threading.Thread(target=self._run, name="rbmcap-natnet-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and close the sockets; safe to call twice."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping = True
            thread.join()
        for sock in (self._command, self._data):
            if sock is not None:
                sock.close()
        self._command = self._data = None

    def pause(self) -> None:
        """Stop sending frames (commands are still answered)."""
        self._streaming = False

    def resume(self) -> None:
        """Send frames again, on a new schedule from now; numbers continue."""
        self._streaming = True

    def drop(self, frame_numbers: Iterable[int]) -> None:
        """Skip these frame numbers (counted in ``dropped``), as a network losing them."""
        with self._lock:
            self._drop.update(int(k) for k in frame_numbers)

    def __enter__(self) -> NatNetServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- the thread -------------------------------------------------------------------------

    def _run(self) -> None:
        period, k, start, streaming = 1.0 / self.fps, 0, time.perf_counter(), False
        while not self._stopping:
            if self._streaming and not streaming:
                k, start = 0, time.perf_counter()
            streaming = self._streaming and (self.loop or self._index < len(self._valid))
            due = start + k * period
            now = time.perf_counter()
            if streaming and now >= due - SPIN_S:
                while time.perf_counter() < due:
                    pass
                self._emit()
                k += 1
                if time.perf_counter() - (start + k * period) > 2 * period:
                    k, start = 0, time.perf_counter()  # far behind: a new schedule, no burst
                continue
            wait = min(due - SPIN_S - now, _IDLE_S) if streaming else _IDLE_S
            self._serve(max(wait, 0.0))

    def _emit(self) -> None:
        number = self.first_frame + self._index
        with self._lock:
            skip = number in self._drop
        if skip:
            self.dropped += 1
        else:
            self._send_frame(self._encode(self._index))
        self._index += 1

    def _encode(self, index: int) -> bytes:
        t = index % len(self._valid)
        frame = nn.FrameOfData(
            frame=self.first_frame + index,
            timestamp=index / self.fps,
            ids=self._ids,
            pos=self._pos[t],
            quat=self._quat[t],
            tracked=self._valid[t],
            error=np.zeros(len(self._ids), np.float32),
        )
        return enc.encode_frame(frame, self.version)

    def _send_frame(self, packet: bytes) -> None:
        if self.multicast is not None:
            targets, sock = [(self.multicast, self.data_port)], self._data
        else:
            now = time.perf_counter()
            with self._lock:
                for client, seen in list(self._clients.items()):
                    if now - seen > CLIENT_TIMEOUT_S:
                        del self._clients[client]
                targets, sock = list(self._clients), self._command
        for target in targets:
            try:
                sock.sendto(packet, target)
            except OSError:  # a client gone (ICMP refusals on loopback): its timeout forgets it
                continue
        if targets:
            self.sent += 1

    def _serve(self, timeout: float) -> None:
        """Answer the commands that arrive within ``timeout`` s."""
        try:
            ready, _, _ = select.select([self._command], [], [], timeout)
            if not ready:
                return
            packet, client = self._command.recvfrom(nn.MAX_PAYLOAD + 4)
        except OSError:  # refusals from clients gone, a closing socket
            return
        if len(packet) < 4:
            return
        reply = self._answer(nn.message_id(packet), client)
        if reply is not None:
            try:
                self._command.sendto(reply, client)
            except OSError:
                pass

    def _answer(self, message: int, client: tuple[str, int]) -> bytes | None:
        now = time.perf_counter()
        with self._lock:
            if message == nn.NAT_CONNECT or client in self._clients:
                self._clients[client] = now
            if message == nn.NAT_DISCONNECT:
                self._clients.pop(client, None)
        if message == nn.NAT_CONNECT:
            return enc.encode_server_info(self._info())
        if message == nn.NAT_REQUEST_MODELDEF:
            bodies = [nn.RigidBodyDescription(n, int(i)) for n, i in zip(self.names, self._ids)]
            return enc.encode_model_definitions(bodies, self.version)
        if message == nn.NAT_REQUEST_FRAMEOFDATA:
            return self._encode(max(self._index - 1, 0))
        if message in (nn.NAT_KEEPALIVE, nn.NAT_DISCONNECT):
            return None
        return nn.encode_request(nn.NAT_UNRECOGNIZED_REQUEST)

    def _info(self) -> nn.ServerInfo:
        return nn.ServerInfo(
            app_name="rbmcap NatNetServer",
            app_version=(1, 0, 0, 0),
            natnet_version=(*self.version, 0, 0),
            clock_frequency=1_000_000_000,
            data_port=self.data_port,
            multicast=self.multicast is not None,
            multicast_group=self.multicast or "0.0.0.0",
        )


def _server_axes(frames: BodyFrames, up: str, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Positions (T, N, 3) and quaternions (T, N, 4) float32 in the streamed axes and units:
    the inverse of :func:`~rbmcap.live.sources.natnet.convert_bodies`; invalid bodies as zeros and
    identities."""
    pos, quat, valid = frames.pos / scale, frames.quat, frames.valid
    if up == "y":
        pos = pos @ Y_UP_TO_Z_UP  # rows: p_y = Aᵀ p_z
        z_to_y = roma.rotmat_to_unitquat(torch.from_numpy(Y_UP_TO_Z_UP.T.copy()))
        quat = roma.quat_product(z_to_y.expand(quat.shape), torch.from_numpy(quat)).numpy()
    pos = np.where(valid[..., None], pos, 0.0)
    quat = np.where(valid[..., None], quat, [0.0, 0.0, 0.0, 1.0])
    return pos.astype(np.float32), quat.astype(np.float32)


def _multicast_sender(address: str) -> socket.socket:
    """A socket multicasting out of the interface ``address``, TTL 1, looped back locally."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind((address, 0))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(address))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"natnet server: cannot multicast from {address} ({exc})") from None
    return sock


def _is_multicast(address: str) -> bool:
    try:
        return ipaddress.IPv4Address(address).is_multicast
    except ValueError:
        return False
