"""NatNet, the streaming protocol of OptiTrack Motive, as a client speaks it (no sockets): the
server's packets decoded, the client's own requests encoded. The server's side (encoding frames and
descriptions) is :mod:`rbmcap.bench.natnet_encoder`.

Every NatNet message is one UDP datagram, little-endian throughout: ``uint16`` message id,
``uint16`` payload size in bytes, then the payload. The layouts below are those of NatNet 3.0 to
4.x (Motive 2.0 and later), as the NatNet SDK's sample clients read them; ``[4.1+]`` marks a
field only that version and later carry.

- ``NAT_SERVERINFO``: ``char[256]`` application name, ``uint8[4]`` its version, ``uint8[4]`` the
  NatNet version it streams; then ``uint64`` clock frequency (ticks/s), ``uint16`` data port,
  ``uint8`` multicast flag, ``uint8[4]`` multicast group.
- ``NAT_MODELDEF``: ``int32`` count, then per description ``int32`` kind (0 marker set, 1 rigid
  body, 2 skeleton, 3 force plate, 4 device, 5 camera, 6 asset), ``[4.1+] int32`` its size in
  bytes, and the description. A rigid body's: name, ``int32`` id, ``int32`` parent id,
  ``float32[3]`` offset, ``[4.2+] float32[4]`` orientation, ``int32`` marker count M, ``float32
  [M][3]`` marker offsets, ``int32[M]`` active labels, ``[4.0+]`` M marker names.
- ``NAT_FRAMEOFDATA``: ``int32`` frame number; sections of marker sets, legacy unlabeled markers,
  rigid bodies, skeletons, ``[4.1+]`` assets, labeled markers, force plates and devices, each
  opening with ``int32`` count and ``[4.1+] int32`` size in bytes; then the suffix: ``uint32``
  timecode and subframe, ``float64`` timestamp (seconds), ``uint64[3]`` high-resolution stamps,
  ``[4.1+] uint32[2]`` precision timestamp, ``int16`` params (0x01 recording, 0x02 tracked models
  changed) and an ``int32`` end-of-data tag. A rigid body is 38 bytes: ``int32`` id,
  ``float32[3]`` position, ``float32[4]`` quaternion x y z w, ``float32`` mean marker error,
  ``int16`` params (0x01: tracked in this frame).

Strings are NUL-terminated UTF-8. Positions are in the server's units (Motive: metres) and axes
(Motive: Y up by default); the conversion to rbmcap's conventions is the source's
(:mod:`rbmcap.live.sources.natnet`). A malformed or truncated packet raises :class:`~rbmcap.errors.
FormatError` with one line naming the byte offset and what was expected there.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from rbmcap.errors import DataError, FormatError

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

Version = tuple[int, int]
"""A NatNet version as (major, minor)."""

MIN_VERSION: Version = (3, 0)
"""The oldest NatNet version decoded (Motive 2.0)."""

DESCRIPTION_KINDS = {
    0: "marker set",
    1: "rigid body",
    2: "skeleton",
    3: "force plate",
    4: "device",
    5: "camera",
    6: "asset",
}

BODY = np.dtype(
    [
        ("id", "<i4"),
        ("pos", "<f4", (3,)),
        ("quat", "<f4", (4,)),
        ("error", "<f4"),
        ("params", "<i2"),
    ]
)
"""One rigid body of a frame (NatNet 3.0+), 38 bytes packed."""

MAX_PAYLOAD = 65503
"""The largest payload one IPv4 UDP datagram carries after NatNet's 4-byte header."""

# The layouts both sides share (the module docstring gives them in words).
HEADER = struct.Struct("<HH")
I32 = struct.Struct("<i")
_II = struct.Struct("<ii")
QUAT = struct.Struct("<4f")
SENDER = struct.Struct("<256s4B4B")
SERVER_TAIL = struct.Struct("<QHB4B")
RB_DESC_HEAD = struct.Struct("<ii3f")
SUFFIX = struct.Struct("<IId3Q")
PRECISION = struct.Struct("<II")
PARAMS = struct.Struct("<h")
LABELED_MARKER_BYTES = 26  # int32 id, float32[3], float32 size, int16 params, float32 residual
FORCE_PLATE_FLOATS = 2 + 3 + 144 + 12  # dimensions, origin, calibration matrix, corners


def natnet_version(version: Sequence[int]) -> Version:
    """(major, minor) of a NatNet version given as 2 to 4 numbers.

    Raises:
        FormatError: a version older than :data:`MIN_VERSION`.
    """
    major, minor = int(version[0]), int(version[1])
    if (major, minor) < MIN_VERSION:
        raise FormatError(
            f"NatNet {major}.{minor} is not supported: rbmcap reads NatNet 3.0 and later "
            "(Motive 2.0 and later)"
        )
    return major, minor


# ---------------------------------------------------------------------------------------------
# What packets hold


@dataclass(frozen=True)
class ServerInfo:
    """A server's ``NAT_SERVERINFO``: who it is and which NatNet version it streams.

    Attributes:
        app_name: the application (e.g. ``"Motive"``); app_version: its version, 4 numbers.
        natnet_version: the NatNet bitstream version it sends, 4 numbers.
        clock_frequency: its high-resolution clock, ticks per second.
        data_port: the port it sends frames to; multicast: whether it multicasts, to
            ``multicast_group``.
    """

    app_name: str
    app_version: tuple[int, int, int, int]
    natnet_version: tuple[int, int, int, int]
    clock_frequency: int = 0
    data_port: int = 0
    multicast: bool = False
    multicast_group: str = "0.0.0.0"

    @property
    def version(self) -> Version:
        return self.natnet_version[0], self.natnet_version[1]


@dataclass(frozen=True)
class RigidBodyDescription:
    """A rigid body of ``NAT_MODELDEF``.

    Attributes:
        name, id: as Motive names and numbers it; parent_id: -1 for none.
        offset: (3,) pivot offset from the parent, server units; rotation: (4,) xyzw (NatNet
            4.2+; identity before).
        marker_offsets: (M,) marker positions in the body, each (x, y, z); marker_labels: (M,)
            active labels; marker_names: (M,) names (NatNet 4.0+; empty before).
    """

    name: str
    id: int
    parent_id: int = -1
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)
    marker_offsets: tuple[tuple[float, float, float], ...] = ()
    marker_labels: tuple[int, ...] = ()
    marker_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelDefinitions:
    """A decoded ``NAT_MODELDEF``.

    Attributes:
        rigid_bodies: the top-level rigid-body descriptions, in packet order.
        kinds: the kind of every description in the packet, in order (keys of
            :data:`DESCRIPTION_KINDS`).
    """

    rigid_bodies: tuple[RigidBodyDescription, ...]
    kinds: tuple[int, ...]

    def names_by_id(self) -> dict[int, str]:
        return {body.id: body.name for body in self.rigid_bodies}


@dataclass(eq=False, slots=True)
class FrameOfData:
    """The rigid bodies of one ``NAT_FRAMEOFDATA``, in the server's units and axes.

    Attributes:
        frame: the server's frame number; timestamp: seconds since its clock started.
        ids: (N,) int32 rigid-body ids; pos: (N, 3) float32; quat: (N, 4) float32 xyzw.
        tracked: (N,) bool, the body's params bit 0x01; error: (N,) float32 mean marker error.
        params: the frame's flags (0x01 recording, 0x02 tracked models changed).
    """

    frame: int
    timestamp: float
    ids: np.ndarray
    pos: np.ndarray
    quat: np.ndarray
    tracked: np.ndarray
    error: np.ndarray
    params: int = 0

    @property
    def models_changed(self) -> bool:
        return bool(self.params & 0x02)


# ---------------------------------------------------------------------------------------------
# Reading


class PacketReader:
    """A position in one packet of message id ``message``, raising FormatError with the byte
    offset where data ends."""

    __slots__ = ("data", "end", "kind", "pos")

    def __init__(self, packet: bytes, kind: str, message: int) -> None:
        self.data, self.kind, self.pos, self.end = bytes(packet), kind, 0, len(packet)
        if self.end < 4:
            self.fail(f"truncated at byte 0: {self.end} bytes, a header needs 4")
        got, size = HEADER.unpack_from(self.data, 0)
        if got != message:
            self.fail(f"message id {got} at byte 0, expected {message}")
        if size > self.end - 4:
            self.fail(f"truncated at byte {self.end}: the header declares {size} payload bytes")
        self.pos = 4

    def fail(self, text: str) -> NoReturn:
        raise FormatError(f"NatNet {self.kind} packet: {text}")

    def take(self, n: int, what: str) -> int:
        """Skip ``n`` bytes of ``what``; the offset they start at."""
        start = self.pos
        if n > self.end - start:
            self.fail(f"truncated at byte {start} ({what}: {n} bytes, {self.end - start} left)")
        self.pos = start + n
        return start

    def unpack(self, fmt: struct.Struct, what: str) -> tuple:
        return fmt.unpack_from(self.data, self.take(fmt.size, what))

    def i32(self, what: str) -> int:
        return I32.unpack_from(self.data, self.take(4, what))[0]

    def count(self, what: str) -> int:
        start = self.pos
        n = self.i32(f"{what} count")
        if n < 0:
            self.fail(f"negative {what} count {n} at byte {start}")
        return n

    def size(self, what: str) -> int:
        """A byte size that must fit in what is left of the packet."""
        start = self.pos
        n = self.i32(f"{what} byte size")
        if not 0 <= n <= self.end - self.pos:
            self.fail(f"{what} byte size {n} at byte {start}, {self.end - self.pos} bytes left")
        return n

    def string(self, what: str) -> str:
        start = self.pos
        stop = self.data.find(b"\0", start, self.end)
        if stop < 0:
            self.fail(f"truncated at byte {start} ({what}: no terminating NUL)")
        self.pos = stop + 1
        return self.data[start:stop].decode("utf-8", errors="replace")


def message_id(packet: bytes) -> int:
    """The message id of a NatNet packet (its first two bytes).

    Raises:
        FormatError: fewer than 4 bytes (no complete header).
    """
    if len(packet) < 4:
        raise FormatError(
            f"NatNet packet: truncated at byte 0: {len(packet)} bytes, a header needs 4"
        )
    return HEADER.unpack_from(packet, 0)[0]


def decode_server_info(packet: bytes) -> ServerInfo:
    """The :class:`ServerInfo` of a ``NAT_SERVERINFO`` packet (the reply to ``NAT_CONNECT``)."""
    r = PacketReader(packet, "server info", NAT_SERVERINFO)
    name, *versions = r.unpack(SENDER, "application name and versions")
    info = ServerInfo(
        app_name=name.split(b"\0", 1)[0].decode("utf-8", errors="replace"),
        app_version=tuple(versions[:4]),
        natnet_version=tuple(versions[4:]),
    )
    if r.end - r.pos < SERVER_TAIL.size:
        return info
    clock, port, multicast, *group = r.unpack(SERVER_TAIL, "connection info")
    return ServerInfo(
        info.app_name,
        info.app_version,
        info.natnet_version,
        clock,
        port,
        bool(multicast),
        ".".join(map(str, group)),
    )


def decode_model_definitions(packet: bytes, version: Sequence[int]) -> ModelDefinitions:
    """The rigid-body descriptions of a ``NAT_MODELDEF`` packet streamed as NatNet ``version``;
    descriptions of other kinds are skipped (by their sizes from NatNet 4.1, by their layouts
    before)."""
    v = natnet_version(version)
    r = PacketReader(packet, "model definitions", NAT_MODELDEF)
    n = r.count("description")
    bodies, kinds = [], []
    for i in range(n):
        what = f"description {i + 1} of {n}"
        start = r.pos
        kind = r.i32(f"{what}: kind")
        kinds.append(kind)
        if v >= (4, 1):
            stop = r.size(what) + r.pos
            end, r.end = r.end, stop
            if kind == 1:
                bodies.append(_rigid_body_description(r, v, what))
            r.pos, r.end = stop, end
            continue
        if kind not in _DESCRIPTION_READERS:
            r.fail(f"unknown description kind {kind} at byte {start} ({what})")
        description = _DESCRIPTION_READERS[kind](r, v, f"{what}, {DESCRIPTION_KINDS[kind]}")
        if kind == 1:
            bodies.append(description)
    return ModelDefinitions(tuple(bodies), tuple(kinds))


def _rigid_body_description(r: PacketReader, v: Version, what: str) -> RigidBodyDescription:
    name = r.string(f"{what}: name")
    body_id, parent, *offset = r.unpack(RB_DESC_HEAD, f"{what}: id, parent and offset")
    rotation = r.unpack(QUAT, f"{what}: rotation") if v >= (4, 2) else (0.0, 0.0, 0.0, 1.0)
    m = r.count(f"{what}: marker")
    start = r.take(16 * m, f"{what}: {m} marker offsets and labels")
    xyz = struct.unpack_from(f"<{3 * m}f", r.data, start)
    labels = struct.unpack_from(f"<{m}i", r.data, start + 12 * m)
    names = ()
    if v >= (4, 0):
        names = tuple(r.string(f"{what}: marker name {k + 1} of {m}") for k in range(m))
    return RigidBodyDescription(
        name,
        body_id,
        parent,
        tuple(offset),
        tuple(rotation),
        tuple(tuple(xyz[3 * k : 3 * k + 3]) for k in range(m)),
        labels,
        names,
    )


def _strings(r: PacketReader, what: str) -> None:
    n = r.count(what)
    for k in range(n):
        r.string(f"{what} {k + 1} of {n}")


def _skip_marker_set(r: PacketReader, v: Version, what: str) -> None:
    r.string(f"{what}: name")
    _strings(r, f"{what}: marker name")


def _skip_skeleton(r: PacketReader, v: Version, what: str) -> None:
    r.string(f"{what}: name")
    r.take(4, f"{what}: id")
    n = r.count(f"{what}: bone")
    for k in range(n):
        _rigid_body_description(r, v, f"{what}, bone {k + 1} of {n}")


def _skip_force_plate(r: PacketReader, v: Version, what: str) -> None:
    r.take(4, f"{what}: id")
    r.string(f"{what}: serial number")
    r.take(4 * FORCE_PLATE_FLOATS + 8, f"{what}: geometry, calibration and types")
    _strings(r, f"{what}: channel name")


def _skip_device(r: PacketReader, v: Version, what: str) -> None:
    r.take(4, f"{what}: id")
    r.string(f"{what}: name")
    r.string(f"{what}: serial number")
    r.take(8, f"{what}: device and channel types")
    _strings(r, f"{what}: channel name")


def _skip_camera(r: PacketReader, v: Version, what: str) -> None:
    r.string(f"{what}: name")
    r.take(28, f"{what}: position and orientation")


def _skip_asset(r: PacketReader, v: Version, what: str) -> None:
    r.string(f"{what}: name")
    r.take(8, f"{what}: type and id")
    n = r.count(f"{what}: bone")
    for k in range(n):
        _rigid_body_description(r, v, f"{what}, bone {k + 1} of {n}")
    m = r.count(f"{what}: marker")
    for k in range(m):
        r.string(f"{what}: marker {k + 1} of {m} name")
        r.take(22, f"{what}: marker {k + 1} of {m}: id, position, size and params")


_DESCRIPTION_READERS = {
    0: _skip_marker_set,
    1: _rigid_body_description,
    2: _skip_skeleton,
    3: _skip_force_plate,
    4: _skip_device,
    5: _skip_camera,
    6: _skip_asset,
}


def decode_frame(packet: bytes, version: Sequence[int]) -> FrameOfData:
    """The rigid bodies, frame number, timestamp and flags of a ``NAT_FRAMEOFDATA`` packet
    streamed as NatNet ``version``; the other sections are skipped.

    A fast pass reads a well-formed packet; a packet it cannot read is read again field by
    field, which names the byte where it went wrong.
    """
    v = natnet_version(version)
    try:
        frame = _fast_frame(packet, v)
    except (struct.error, ValueError):
        frame = None
    return frame if frame is not None else _checked_frame(packet, v)


def _fast_frame(data: bytes, v: Version) -> FrameOfData | None:
    """The frame of a well-formed packet; None (or struct.error, ValueError) for any other."""
    end = len(data)
    message, declared = HEADER.unpack_from(data, 0)
    if message != NAT_FRAMEOFDATA or declared > end - 4:
        return None
    (frame,) = I32.unpack_from(data, 4)
    if v >= (4, 1):
        off, n_bodies, start = _fast_sections(data)
    else:
        off, n_bodies, start = _fast_walk(data)
    if off < 0:
        return None
    bodies = np.frombuffer(data, BODY, count=n_bodies, offset=start)
    timestamp = SUFFIX.unpack_from(data, off)[2]
    off += SUFFIX.size
    left = end - off
    if left in (10, 14) or (left not in (2, 6) and v >= (4, 1)):
        off += PRECISION.size
    (params,) = PARAMS.unpack_from(data, off)
    return _frame_of_data(frame, timestamp, bodies, params)


def _frame_of_data(frame: int, timestamp: float, bodies: np.ndarray, params: int) -> FrameOfData:
    """A decoded frame from its rigid-body records (a structured array of ``id``, ``pos``,
    ``quat``, ``error`` and ``params``, whose bit 0 says the body was tracked)."""
    return FrameOfData(
        frame,
        timestamp,
        bodies["id"],
        bodies["pos"],
        bodies["quat"],
        np.bitwise_and(bodies["params"], 1).astype(bool),
        bodies["error"],
        params,
    )


def _fast_sections(data: bytes) -> tuple[int, int, int]:
    """NatNet 4.1+: (suffix offset, body count, bodies offset), each section jumped over by its
    byte size; suffix offset -1 for a malformed section."""
    off = 8
    for _ in range(2):  # marker sets, legacy unlabeled markers
        n, size = _II.unpack_from(data, off)
        if n < 0 or size < 0:
            return -1, 0, 0
        off += 8 + size
    n_bodies, size = _II.unpack_from(data, off)
    if n_bodies < 0 or size != n_bodies * BODY.itemsize:
        return -1, 0, 0
    start = off + 8
    off = start + size
    for _ in range(5):  # skeletons, assets, labeled markers, force plates, devices
        n, size = _II.unpack_from(data, off)
        if n < 0 or size < 0:
            return -1, 0, 0
        off += 8 + size
    return off, n_bodies, start


def _fast_walk(data: bytes) -> tuple[int, int, int]:
    """NatNet 3.0 to 4.0: as :func:`_fast_sections`, walking each section's layout."""
    bad = (-1, 0, 0)
    (n,) = I32.unpack_from(data, 8)
    off = 12
    for _ in range(n):  # marker sets: name, count, points
        stop = data.index(b"\0", off)
        (m,) = I32.unpack_from(data, stop + 1)
        if m < 0:
            return bad
        off = stop + 5 + 12 * m
    (m,) = I32.unpack_from(data, off)  # legacy unlabeled markers
    (n_bodies,) = I32.unpack_from(data, off + 4 + 12 * m)
    if min(n, m, n_bodies) < 0:
        return bad
    start = off + 8 + 12 * m
    off = start + n_bodies * BODY.itemsize
    (k,) = I32.unpack_from(data, off)
    off += 4
    for _ in range(k):  # skeletons: id, bone count, bones
        bones = _II.unpack_from(data, off)[1]
        if bones < 0:
            return bad
        off += 8 + bones * BODY.itemsize
    (labeled,) = I32.unpack_from(data, off)
    if min(k, labeled) < 0:
        return bad
    off += 4 + labeled * LABELED_MARKER_BYTES
    for _ in range(2):  # force plates, devices: id, channels of samples
        (items,) = I32.unpack_from(data, off)
        off += 4
        for _ in range(items):
            channels = _II.unpack_from(data, off)[1]
            off += 8
            for _ in range(channels):
                (samples,) = I32.unpack_from(data, off)
                if samples < 0:
                    return bad
                off += 4 + 4 * samples
            if channels < 0:
                return bad
        if items < 0:
            return bad
    return off, n_bodies, start


def _checked_frame(packet: bytes, v: Version) -> FrameOfData:
    """:func:`decode_frame` field by field, raising FormatError where the packet breaks."""
    sized = v >= (4, 1)
    r = PacketReader(packet, "frame", NAT_FRAMEOFDATA)
    frame = r.i32("frame number")
    _skip_frame_marker_sets(r, sized)
    _skip_records(r, sized, "unlabeled marker", 12)
    bodies = _frame_bodies(r, sized)
    _skip_frame_skeletons(r, sized)
    if sized:
        _skip_frame_assets(r)
    _skip_records(r, sized, "labeled marker", LABELED_MARKER_BYTES)
    _skip_channels(r, sized, "force plate")
    _skip_channels(r, sized, "device")
    timestamp, params = _frame_suffix(r, v)
    return _frame_of_data(frame, timestamp, bodies, params)


def _frame_bodies(r: PacketReader, sized: bool) -> np.ndarray:
    """(N,) records of :data:`BODY`."""
    n = r.count("rigid body")
    if sized:
        start = r.pos
        size = r.size("rigid bodies")
        if size != n * BODY.itemsize:
            r.fail(
                f"rigid bodies byte size {size} at byte {start}, {n} bodies take "
                f"{n * BODY.itemsize}"
            )
    left = r.end - r.pos
    if n * BODY.itemsize > left:
        k = left // BODY.itemsize
        r.pos += k * BODY.itemsize
        r.take(BODY.itemsize, f"rigid body {k + 1} of {n}")
    start = r.take(n * BODY.itemsize, "rigid bodies")
    return np.frombuffer(r.data, BODY, count=n, offset=start)


def _skip_frame_marker_sets(r: PacketReader, sized: bool) -> None:
    n = r.count("marker set")
    if sized:
        r.take(r.size("marker sets"), f"{n} marker sets")
        return
    for k in range(n):
        what = f"marker set {k + 1} of {n}"
        r.string(f"{what}: name")
        m = r.count(f"{what}: marker")
        r.take(12 * m, f"{what}: {m} markers")


def _skip_records(r: PacketReader, sized: bool, what: str, record_bytes: int) -> None:
    n = r.count(what)
    size = r.size(f"{what}s") if sized else n * record_bytes
    r.take(size, f"{n} {what}s")


def _skip_frame_skeletons(r: PacketReader, sized: bool) -> None:
    n = r.count("skeleton")
    if sized:
        r.take(r.size("skeletons"), f"{n} skeletons")
        return
    for k in range(n):
        what = f"skeleton {k + 1} of {n}"
        r.take(4, f"{what}: id")
        bones = r.count(f"{what}: bone")
        r.take(bones * BODY.itemsize, f"{what}: {bones} bones")


def _skip_frame_assets(r: PacketReader) -> None:
    n = r.count("asset")
    r.take(r.size("assets"), f"{n} assets")


def _skip_channels(r: PacketReader, sized: bool, what: str) -> None:
    """Force plates and devices: per item an id and channels of samples."""
    n = r.count(what)
    if sized:
        r.take(r.size(f"{what}s"), f"{n} {what}s")
        return
    for k in range(n):
        item = f"{what} {k + 1} of {n}"
        r.take(4, f"{item}: id")
        channels = r.count(f"{item}: channel")
        for c in range(channels):
            samples = r.count(f"{item}, channel {c + 1}: sample")
            r.take(4 * samples, f"{item}, channel {c + 1}: {samples} samples")


def _frame_suffix(r: PacketReader, v: Version) -> tuple[float, int]:
    """Timestamp (s) and frame params. The params follow the precision timestamp from NatNet
    4.1 on; what is left (params, optional precision timestamp, optional end tag) decides."""
    _, _, timestamp, *_ = r.unpack(SUFFIX, "frame suffix: timecode and timestamps")
    left = r.end - r.pos
    precision = left in (10, 14) or (left not in (2, 6) and v >= (4, 1))
    if precision:
        r.take(PRECISION.size, "frame suffix: precision timestamp")
    (params,) = r.unpack(PARAMS, "frame suffix: params")
    return timestamp, params


# ---------------------------------------------------------------------------------------------
# The client's requests


def with_header(message: int, payload: bytes) -> bytes:
    """``payload`` behind the NatNet header for ``message``.

    Raises:
        DataError: a payload larger than one datagram carries (:data:`MAX_PAYLOAD`).
    """
    if len(payload) > MAX_PAYLOAD:
        raise DataError(
            f"NatNet packet of {len(payload)} bytes exceeds one datagram ({MAX_PAYLOAD})"
        )
    return HEADER.pack(message, len(payload)) + payload


def cstr(text: str) -> bytes:
    """``text`` as a NUL-terminated UTF-8 string."""
    return text.encode("utf-8") + b"\0"


def encode_request(message: int, text: str = "") -> bytes:
    """A client request: ``NAT_REQUEST_MODELDEF``, ``NAT_KEEPALIVE``, ``NAT_DISCONNECT`` (no
    payload) or ``NAT_REQUEST`` (a command string)."""
    return with_header(message, cstr(text) if text else b"")


def encode_connect(requested: Sequence[int] = (4, 1, 0, 0)) -> bytes:
    """``NAT_CONNECT`` as the SDK's client sends it: a sender block named ``Ping``, then the
    connection options (subscribed data only: no; the bitstream version ``requested``)."""
    sender = SENDER.pack(b"Ping", 0, 0, 0, 0, 0, 0, 0, 0)
    options = struct.pack("<B4BB", 0, *(int(x) for x in requested), 0)
    return with_header(NAT_CONNECT, sender + options + b"\0")
