"""What a sink is: something each subject's :class:`~rbmcap.live.frames.LivePose` is handed to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from rbmcap.live.frames import LivePose, LiveStats


@dataclass(eq=False)
class SubjectInfo:
    """What a sink learns about a subject when the session opens it.

    Attributes:
        name: the subject's name ("" for the one unnamed subject of a stream).
        body: the checkpoint's body model (:class:`~rbmcap.body.model.BodyModel`) with the
            subject's joint correction (its calibration's ``joint_offsets``), for sinks that
            pose a mesh or need the rest skeleton (viewer, VMC, BVH).
        gender: the body model's gender.
        betas: (B,) float32 the calibration's shape, or None (then each pose carries the
            stream's running estimate).
        marker_names: (N,) the marker set's plate names, the order of a pose's plate arrays.
        fps: the rate poses arrive at, Hz (the source's).
    """

    name: str
    body: object
    gender: str
    betas: np.ndarray | None
    marker_names: tuple[str, ...]
    fps: float


@runtime_checkable
class Sink(Protocol):
    """A consumer of live poses.

    ``open`` once before the first pose, ``send`` for each subject's pose of each frame, on the
    session's consumer thread, and ``close`` once at the end, also when the session is
    interrupted (Ctrl-C, SIGTERM) or fails: a recording sink writes its files there.

    Attributes:
        name: what it is, for messages (e.g. ``vmc://127.0.0.1:39539``).
        inline: True: ``send`` runs on the consumer thread and must return quickly (a network
            send, an append); False: the session gives the sink its own thread fed with only the
            newest pose per subject (a slow sink such as the viewer then skips poses instead of
            holding up the stream).
        max_rate: (optional, threaded sinks) the most poses a second the sink is fed.
    """

    name: str
    inline: bool

    def open(self, subjects: list[SubjectInfo], stats: LiveStats) -> None: ...

    def send(self, pose: LivePose) -> None: ...

    def close(self) -> None: ...
