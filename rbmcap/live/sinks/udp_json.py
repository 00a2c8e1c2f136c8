"""UDP/JSON: one UTF-8 JSON object per pose, for tools that read neither OSC nor VMC.

Each datagram is one subject's pose of one frame, in rbmcap's own conventions (world Z up,
metres; SMPL local joint rotations, parent-from-child, joint 0 the global orientation; the world
pelvis is J_0(betas) + trans, docs/conventions.md)::

    {"subject": "alice", "frame": 1234, "timestamp": 10.2833, "index": 57,
     "joints": ["pelvis", ..., "right_hand"],
     "rotation_format": "quat_xyzw",
     "rotations": [[x, y, z, w], ...],
     "trans": [x, y, z], "betas": [b0, ...]}

``rotations`` holds one entry per joint in ``joints``' order: unit quaternions ``[x, y, z, w]``
(``rotation_format`` "quat_xyzw", roma's order, w ≥ 0) or row-major 3 × 3 matrices as 9 numbers
(``"rotmat"``: the local rotation matrix, parent-from-joint). Numbers are rounded to
:data:`DECIMALS` places. Every subject goes to the same port; ``subject`` tells them apart. A
datagram stays under :data:`MAX_DATAGRAM` bytes (under 2 kB with quaternions, 3 kB with
matrices, for 16 betas).
"""

from __future__ import annotations

import json
import logging
import socket

import numpy as np

from rbmcap.errors import ConfigError, DataError
from rbmcap.live.frames import LivePose, LiveStats
from rbmcap.live.sinks.base import SubjectInfo
from rbmcap.live.sinks.vmc import RateLimit, rotmat_to_quat_xyzw
from rbmcap.live.sources.base import LOOPBACK
from rbmcap.skeleton import SMPL_JOINT_NAMES

log = logging.getLogger("rbmcap.live")

JSON_PORT = 39570
"""The sink's default UDP port."""
ROTATION_FORMATS = ("quat_xyzw", "rotmat")
DECIMALS = 7
"""Decimal places of every number sent (float32 poses carry about seven significant digits)."""
MAX_DATAGRAM = 65507
"""The largest UDP payload over IPv4, bytes."""


class UDPJSONSink:
    """Sends each pose as one JSON datagram (module docstring).

    Args:
        host: the receiver's address (a name or IPv4); resolved once by ``open``.
        port: its UDP port (every subject goes there).
        rotations: "quat_xyzw" (4 numbers a joint) or "rotmat" (9, row-major).
        rate: at most this many poses a second per subject, by source time
            (:class:`~rbmcap.live.sinks.vmc.RateLimit`); None sends every pose.

    Attributes:
        sent: datagrams sent; skipped: poses left out by ``rate``; send_errors: sends the
            operating system refused (logged once; a missing receiver never stops a session).
    """

    inline = True

    def __init__(
        self,
        host: str = LOOPBACK,
        port: int = JSON_PORT,
        rotations: str = "quat_xyzw",
        rate: float | None = None,
    ) -> None:
        if not isinstance(port, int) or not 1 <= port <= 65535:
            raise ConfigError(f"UDP/JSON port {port!r}: expected an integer in 1..65535")
        if rotations not in ROTATION_FORMATS:
            raise ConfigError(
                f"UDP/JSON rotations {rotations!r}: expected one of {', '.join(ROTATION_FORMATS)}"
            )
        self._rate = RateLimit(rate, "UDP/JSON")
        self.host, self.port, self.rotations, self.rate = str(host), port, rotations, rate
        self.name = f"udp+json://{self.host}:{port}"
        self.sent = self.skipped = self.send_errors = 0
        self._joints = list(SMPL_JOINT_NAMES)
        self._address: tuple[str, int] | None = None
        self._sock: socket.socket | None = None

    def open(self, subjects: list[SubjectInfo], stats: LiveStats) -> None:
        try:
            infos = socket.getaddrinfo(self.host, self.port, socket.AF_INET, socket.SOCK_DGRAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ConfigError(f"{self.name}: cannot resolve {self.host!r} ({exc})") from None
        self._address = (infos[0][4][0], self.port)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    def encode(self, pose: LivePose) -> bytes:
        """The pose's datagram: UTF-8 JSON (module docstring). DataError when it would not fit
        in one datagram."""
        rot = np.asarray(pose.rotmats, dtype=np.float64)
        values = rotmat_to_quat_xyzw(rot) if self.rotations == "quat_xyzw" else rot.reshape(-1, 9)
        message = {
            "subject": pose.subject,
            "frame": int(pose.frame),
            "timestamp": float(pose.timestamp),
            "index": int(pose.index),
            "joints": self._joints,
            "rotation_format": self.rotations,
            "rotations": np.round(values, DECIMALS).tolist(),
            "trans": np.round(np.asarray(pose.trans, dtype=np.float64), DECIMALS).tolist(),
            "betas": np.round(np.asarray(pose.betas, dtype=np.float64), DECIMALS).tolist(),
        }
        try:
            data = json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8")
        except ValueError:
            raise DataError(
                f"{self.name}: subject {pose.subject!r}, frame {pose.frame}: the pose holds NaN "
                f"or infinite values"
            ) from None
        if len(data) > MAX_DATAGRAM:
            raise DataError(
                f"{self.name}: a pose of {len(data)} bytes exceeds one UDP datagram "
                f"({MAX_DATAGRAM} bytes; {len(message['betas'])} betas)"
            )
        return data

    def send(self, pose: LivePose) -> None:
        if not self._rate.admit(pose.subject, float(pose.timestamp)):
            self.skipped += 1
            return
        try:
            self._sock.sendto(self.encode(pose), self._address)
        except OSError as exc:
            self.send_errors += 1
            if self.send_errors == 1:
                log.warning("%s: cannot send (%s)", self.name, exc)
            return
        self.sent += 1

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
