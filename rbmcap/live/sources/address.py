"""Sources named by an address: ``natnet://host``, ``qtm://host:port``, ``replay:take.npz``."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from rbmcap.errors import ConfigError
from rbmcap.live.sources.base import LOOPBACK, Source
from rbmcap.live.sources.natnet import NatNetSource
from rbmcap.live.sources.replay import ReplaySource

NATNET_COMMAND_PORT = 1510
QTM_PORT = 22223
SOURCE_FORMS = "natnet://HOST[:PORT], qtm://HOST[:PORT] or replay:FILE"


@dataclass
class SourceOptions:
    """Source settings the address does not carry.

    Attributes:
        multicast: NatNet multicast group (None: unicast); local: the interface to receive on.
        data_port: NatNet data port; up: the source's up axis ('y' or 'z'; None: the system's
            default: Motive Y, QTM Z); rate: a replay's rate (None: its own); loop: replay again
            and again; plates: plate definitions for a replayed file of labelled points.
    """

    multicast: str | None = None
    local: str = LOOPBACK
    data_port: int = 1511
    up: str | None = None
    rate: float | None = None
    loop: bool = False
    plates: str | None = None


def open_source(spec: str, options: SourceOptions | None = None) -> Source:
    """The source named by ``spec`` (not yet opened).

    Raises:
        ConfigError: ``spec`` is none of :data:`SOURCE_FORMS`, or a port is not a number.
    """
    opts = options or SourceOptions()
    if spec.startswith("replay:"):
        path = spec[len("replay:") :]
        if not path:
            raise ConfigError(f"source {spec!r}: expected replay:FILE")
        return ReplaySource(path, rate=opts.rate, loop=opts.loop, plates=opts.plates)
    parts = urlsplit(spec)
    if parts.scheme == "natnet":
        host, port = _host_port(spec, parts, NATNET_COMMAND_PORT)
        return NatNetSource(
            server=host,
            command_port=port,
            data_port=opts.data_port,
            multicast=opts.multicast,
            local=opts.local,
            up=opts.up or "y",
        )
    if parts.scheme == "qtm":
        from rbmcap.live.sources.qualisys import QualisysSource  # optional extra: qtm-rt

        host, port = _host_port(spec, parts, QTM_PORT)
        return QualisysSource(host=host, port=port, up=opts.up or "z")
    raise ConfigError(f"source {spec!r}: expected {SOURCE_FORMS}")


def _host_port(spec: str, parts, default: int) -> tuple[str, int]:
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(f"source {spec!r}: the port is not a number") from None
    return parts.hostname or LOOPBACK, port or default
