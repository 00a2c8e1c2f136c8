"""What flows through a live session: rigid-body frames in, SMPL poses out."""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)
class RigidBodyFrame:
    """One frame of rigid bodies as a source received it, in rbmcap's conventions.

    Attributes:
        frame: the source's frame number.
        timestamp: the source's time of the frame, seconds.
        received: ``time.perf_counter()`` when its packet arrived (the latency's start).
        names: (N,) rigid-body names as the source gives them.
        pos: (N, 3) float32 positions, metres, world Z up.
        rot: (N, 3, 3) float32 world-from-body rotations.
        valid: (N,) bool: tracked in this frame (untracked: zeros and identities).
    """

    frame: int
    timestamp: float
    received: float
    names: tuple[str, ...]
    pos: np.ndarray
    rot: np.ndarray
    valid: np.ndarray


@dataclass(eq=False)
class LivePose:
    """One subject's SMPL pose for one frame, as sinks receive it.

    Attributes:
        subject: the subject's name ("" when the stream has one unnamed subject).
        frame: the source's frame number; timestamp: its time, seconds.
        received: ``time.perf_counter()`` when the frame's packet arrived.
        rotmats: (24, 3, 3) float32 local joint rotations (joint 0 global), SMPL order.
        trans: (3,) float32 root translation, metres, world Z up.
        betas: (B,) float32 shape: the calibration's, else the stream's running estimate.
        plates_pos: (N, 3) float32 the subject's (calibrated) plates, metres; plates_rot
            (N, 3, 3); plates_valid (N,) bool, in the marker set's order.
        index: frames this subject has been posed for so far, this one included (1-based).
    """

    subject: str
    frame: int
    timestamp: float
    received: float
    rotmats: np.ndarray
    trans: np.ndarray
    betas: np.ndarray
    plates_pos: np.ndarray
    plates_rot: np.ndarray
    plates_valid: np.ndarray
    index: int = 0


@dataclass
class LiveStats:
    """Counters of a live session, updated as it runs (read by sinks such as the viewer).

    Attributes:
        received: frames the source delivered; processed: frames posed (all subjects);
        dropped: frames overwritten before the consumer took them (the consumer was slower);
        lost: gaps in the source's frame numbers (packets lost or late on the network);
        late: frames that arrived after a newer one (not posed; not counted lost);
        restarts: times the source's frame numbers went back (a restarted sender);
        reconnects: times the source was opened again after its connection broke;
        behind: the most frames the source was ahead of the frame being posed, when it was taken;
        latencies_ms: packet received → last inline sink returned, per processed frame (ms),
            the most recent ones (a bounded window).
    """

    received: int = 0
    processed: int = 0
    dropped: int = 0
    lost: int = 0
    late: int = 0
    restarts: int = 0
    reconnects: int = 0
    behind: int = 0
    latencies_ms: collections.deque = field(
        default_factory=lambda: collections.deque(maxlen=LATENCY_WINDOW)
    )

    def summary(self) -> dict:
        """The counters and latency p50/p99/max (ms) as a JSON-ready dict."""
        lat = np.asarray(self.latencies_ms, dtype=np.float64)
        pct = (lambda q: float(np.percentile(lat, q))) if len(lat) else (lambda q: None)
        keys = ("received", "processed", "dropped", "lost", "late", "restarts", "reconnects")
        out = {k: getattr(self, k) for k in (*keys, "behind")}
        return out | {
            "latency_p50_ms": pct(50),
            "latency_p99_ms": pct(99),
            "latency_max_ms": pct(100),
        }


LATENCY_WINDOW = 1_000_000
"""Latencies kept (the most recent): over an hour at 240 Hz."""
