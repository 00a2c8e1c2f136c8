"""NatNet as a server speaks it (no sockets): frames, descriptions and server info encoded as
Motive sends them, and a client's requests decoded; for :class:`~rbmcap.bench.natnet_server.
NatNetServer`, the stand-in for Motive that benchmarks and tests stream from.

The layouts are those :mod:`rbmcap.live.sources.natnet_decoder` reads (its docstring gives them);
the description kinds besides rigid bodies and the frame sections besides rigid bodies, which the
decoder skips, are written here with filler values of the right sizes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rbmcap.live.sources.natnet_decoder import (
    BODY,
    FORCE_PLATE_FLOATS,
    HEADER,
    I32,
    LABELED_MARKER_BYTES,
    NAT_FRAMEOFDATA,
    NAT_MODELDEF,
    NAT_SERVERINFO,
    PARAMS,
    PRECISION,
    QUAT,
    RB_DESC_HEAD,
    SENDER,
    SERVER_TAIL,
    SUFFIX,
    FrameOfData,
    PacketReader,
    RigidBodyDescription,
    ServerInfo,
    Version,
    cstr,
    message_id,
    natnet_version,
    with_header,
)

VEC3 = struct.Struct("<3f")
ASSET_MARKER_BYTES = 26


# ---------------------------------------------------------------------------------------------
# What packets hold besides rigid bodies


@dataclass(frozen=True)
class MarkerSetDescription:
    """A marker set of ``NAT_MODELDEF`` (encoded for tests and demos; decoding skips it)."""

    name: str
    marker_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkeletonDescription:
    """A skeleton: its bones are rigid-body descriptions (decoding skips it)."""

    name: str
    id: int
    bones: tuple[RigidBodyDescription, ...] = ()


@dataclass(frozen=True)
class ForcePlateDescription:
    """A force plate (geometry and calibration encoded as zeros; decoding skips it)."""

    id: int
    serial: str
    channel_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceDescription:
    """An analog device such as an EMG or a NIDAQ (decoding skips it)."""

    id: int
    name: str
    serial: str = ""
    channel_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class CameraDescription:
    """A camera: position (3,) and orientation (4,) xyzw (decoding skips it)."""

    name: str
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)
    orientation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)


@dataclass(frozen=True)
class AssetDescription:
    """A trained markerset asset (NatNet 4.1+): bones and named markers (decoding skips it)."""

    name: str
    id: int
    bones: tuple[RigidBodyDescription, ...] = ()
    marker_names: tuple[str, ...] = ()


Description = (
    RigidBodyDescription
    | MarkerSetDescription
    | SkeletonDescription
    | ForcePlateDescription
    | DeviceDescription
    | CameraDescription
    | AssetDescription
)


@dataclass(frozen=True)
class FrameExtras:
    """Frame sections besides rigid bodies, for encoding (decoding skips them): their sizes
    matter, their values are fillers.

    Attributes:
        marker_sets: (name, marker count) each; other_markers: legacy unlabeled marker count.
        skeletons: (id, bone count) each; assets (NatNet 4.1+): (id, bone count, marker count).
        labeled_markers: count; force_plates, devices: (id, samples per channel) each.
    """

    marker_sets: tuple[tuple[str, int], ...] = ()
    other_markers: int = 0
    skeletons: tuple[tuple[int, int], ...] = ()
    assets: tuple[tuple[int, int, int], ...] = ()
    labeled_markers: int = 0
    force_plates: tuple[tuple[int, tuple[int, ...]], ...] = ()
    devices: tuple[tuple[int, tuple[int, ...]], ...] = ()


# ---------------------------------------------------------------------------------------------
# Writing


def decode_request(packet: bytes) -> tuple[int, str]:
    """(message id, text) of a client's packet; the text is empty where there is none."""
    r = PacketReader(packet, "request", message_id(packet))
    text = r.data[r.pos : r.end].split(b"\0", 1)[0]
    return HEADER.unpack_from(r.data, 0)[0], text.decode("utf-8", errors="replace")


def encode_server_info(info: ServerInfo) -> bytes:
    """``NAT_SERVERINFO`` for ``info`` (with the connection info NatNet 3.0+ carries)."""
    payload = SENDER.pack(
        info.app_name.encode("utf-8")[:255], *info.app_version, *info.natnet_version
    )
    if tuple(info.natnet_version[:2]) >= (3, 0):
        group = [int(x) for x in info.multicast_group.split(".")]
        payload += SERVER_TAIL.pack(
            info.clock_frequency, info.data_port, int(info.multicast), *group
        )
    return with_header(NAT_SERVERINFO, payload)


def encode_model_definitions(descriptions: Sequence[Description], version: Sequence[int]) -> bytes:
    """``NAT_MODELDEF`` holding ``descriptions`` in NatNet ``version``'s layout."""
    v = natnet_version(version)
    parts = [I32.pack(len(descriptions))]
    for d in descriptions:
        kind, body = _DESCRIPTION_WRITERS[type(d)]
        data = body(d, v)
        parts.append(I32.pack(kind))
        if v >= (4, 1):
            parts.append(I32.pack(len(data)))
        parts.append(data)
    return with_header(NAT_MODELDEF, b"".join(parts))


def _rigid_body_description_bytes(d: RigidBodyDescription, v: Version) -> bytes:
    m = len(d.marker_offsets)
    parts = [cstr(d.name), RB_DESC_HEAD.pack(d.id, d.parent_id, *d.offset)]
    if v >= (4, 2):
        parts.append(QUAT.pack(*d.rotation))
    parts.append(I32.pack(m))
    parts.append(struct.pack(f"<{3 * m}f", *(x for xyz in d.marker_offsets for x in xyz)))
    labels = d.marker_labels or (0,) * m
    parts.append(struct.pack(f"<{m}i", *labels))
    if v >= (4, 0):
        names = d.marker_names or ("",) * m
        parts.extend(cstr(name) for name in names)
    return b"".join(parts)


def _strings_bytes(names: Sequence[str]) -> bytes:
    return I32.pack(len(names)) + b"".join(cstr(name) for name in names)


def _marker_set_bytes(d: MarkerSetDescription, v: Version) -> bytes:
    return cstr(d.name) + _strings_bytes(d.marker_names)


def _skeleton_bytes(d: SkeletonDescription, v: Version) -> bytes:
    bones = b"".join(_rigid_body_description_bytes(b, v) for b in d.bones)
    return cstr(d.name) + struct.pack("<ii", d.id, len(d.bones)) + bones


def _force_plate_bytes(d: ForcePlateDescription, v: Version) -> bytes:
    geometry = bytes(4 * FORCE_PLATE_FLOATS + 8)
    return I32.pack(d.id) + cstr(d.serial) + geometry + _strings_bytes(d.channel_names)


def _device_bytes(d: DeviceDescription, v: Version) -> bytes:
    head = I32.pack(d.id) + cstr(d.name) + cstr(d.serial) + bytes(8)
    return head + _strings_bytes(d.channel_names)


def _camera_bytes(d: CameraDescription, v: Version) -> bytes:
    return cstr(d.name) + VEC3.pack(*d.position) + QUAT.pack(*d.orientation)


def _asset_bytes(d: AssetDescription, v: Version) -> bytes:
    bones = b"".join(_rigid_body_description_bytes(b, v) for b in d.bones)
    markers = b"".join(
        cstr(name) + struct.pack("<i3ffh", k, 0.0, 0.0, 0.0, 0.01, 0)
        for k, name in enumerate(d.marker_names)
    )
    head = cstr(d.name) + struct.pack("<iii", 0, d.id, len(d.bones))
    return head + bones + I32.pack(len(d.marker_names)) + markers


_DESCRIPTION_WRITERS = {
    MarkerSetDescription: (0, _marker_set_bytes),
    RigidBodyDescription: (1, _rigid_body_description_bytes),
    SkeletonDescription: (2, _skeleton_bytes),
    ForcePlateDescription: (3, _force_plate_bytes),
    DeviceDescription: (4, _device_bytes),
    CameraDescription: (5, _camera_bytes),
    AssetDescription: (6, _asset_bytes),
}


def body_records(
    ids: np.ndarray,
    pos: np.ndarray,
    quat: np.ndarray,
    tracked: np.ndarray,
    error: np.ndarray | None = None,
) -> np.ndarray:
    """(N,) :data:`BODY` records from ids (N,), positions (N, 3), quaternions xyzw (N, 4),
    tracked (N,) bool and mean marker errors (N,) (zeros when None)."""
    records = np.zeros(len(ids), BODY)
    records["id"], records["pos"], records["quat"] = ids, pos, quat
    records["params"] = np.asarray(tracked, bool).astype(np.int16)
    if error is not None:
        records["error"] = error
    return records


def encode_frame(
    frame: FrameOfData, version: Sequence[int], extras: FrameExtras | None = None
) -> bytes:
    """``NAT_FRAMEOFDATA`` for ``frame`` in NatNet ``version``'s layout, with the other sections
    ``extras`` describes (empty when None) and the end-of-data tag Motive appends."""
    v = natnet_version(version)
    sized = v >= (4, 1)
    x = extras or FrameExtras()
    bodies = body_records(frame.ids, frame.pos, frame.quat, frame.tracked, frame.error)
    marker_sets = b"".join(
        cstr(name) + I32.pack(m) + _fillers(3 * m, "f") for name, m in x.marker_sets
    )
    parts = [
        I32.pack(frame.frame),
        _section(len(x.marker_sets), marker_sets, sized),
        _section(x.other_markers, _fillers(3 * x.other_markers, "f"), sized),
        _section(len(bodies), bodies.tobytes(), sized),
        _section(len(x.skeletons), _skeletons_bytes(x.skeletons), sized),
    ]
    if sized:
        parts.append(_section(len(x.assets), _assets_bytes(x.assets), sized))
    labeled = _fillers(x.labeled_markers * LABELED_MARKER_BYTES, "B")
    parts.append(_section(x.labeled_markers, labeled, sized))
    parts.append(_section(len(x.force_plates), _channels_bytes(x.force_plates), sized))
    parts.append(_section(len(x.devices), _channels_bytes(x.devices), sized))
    parts.append(SUFFIX.pack(0, 0, frame.timestamp, 0, 0, 0))
    if sized:
        parts.append(PRECISION.pack(0, 0))
    parts.append(PARAMS.pack(frame.params) + I32.pack(0))
    return with_header(NAT_FRAMEOFDATA, b"".join(parts))


def _section(count: int, data: bytes, sized: bool) -> bytes:
    return I32.pack(count) + (I32.pack(len(data)) if sized else b"") + data


def _fillers(n: int, code: str) -> bytes:
    """``n`` distinct little-endian values (floats or bytes) standing in for real data."""
    if code == "B":
        return bytes(k % 251 for k in range(n))
    return struct.pack(f"<{n}f", *(0.001 * k for k in range(n)))


def _skeletons_bytes(skeletons: Sequence[tuple[int, int]]) -> bytes:
    parts = []
    for skeleton_id, bones in skeletons:
        k = np.arange(bones)
        records = body_records(
            k + 1, np.zeros((bones, 3)), np.tile([0, 0, 0, 1], (bones, 1)), np.ones(bones, bool)
        )
        parts.append(struct.pack("<ii", skeleton_id, bones) + records.tobytes())
    return b"".join(parts)


def _assets_bytes(assets: Sequence[tuple[int, int, int]]) -> bytes:
    parts = []
    for asset_id, bones, markers in assets:
        records = body_records(
            np.arange(bones),
            np.zeros((bones, 3)),
            np.tile([0, 0, 0, 1], (bones, 1)),
            np.ones(bones, bool),
        )
        parts.append(struct.pack("<ii", asset_id, bones) + records.tobytes())
        parts.append(I32.pack(markers) + _fillers(markers * ASSET_MARKER_BYTES, "B"))
    return b"".join(parts)


def _channels_bytes(items: Sequence[tuple[int, tuple[int, ...]]]) -> bytes:
    parts = []
    for item_id, channels in items:
        parts.append(struct.pack("<ii", item_id, len(channels)))
        parts.extend(I32.pack(n) + _fillers(n, "f") for n in channels)
    return b"".join(parts)
