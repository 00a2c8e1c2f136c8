"""``RenderOptions``: what ``rbmcap render`` draws, its defaults and their checks, in one place.

The CLI builds its argument defaults from these fields; Python callers construct the same
dataclass and get the same :class:`~rbmcap.errors.ConfigError` for a bad value.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rbmcap.errors import ConfigError


@dataclass
class RenderOptions:
    """What ``rbmcap render`` does.

    Attributes:
        inputs: one ``rbmcap eval`` output folder, or motion ``.npz`` files.
        out: ``.gif`` or ``.mp4`` (an animation) or ``.png`` (a still of ``frame``).
        sequence: the evaluation's sequence (exact name or glob matching one; None: the one
            where the network's MPJPE is largest).
        methods: method keys to show after the truth (None: every method the sequence has).
        frame: the frame of a still (None: 0); only with a ``.png``.
        fps: about this many pictures per second of motion in an animation.
        max_frames: at most this many pictures in an animation.
        mesh: draw each body's shaded mesh under its skeleton (slower).
        body: body model path or 'standin' (None: the evaluation's body, or the stand-in).
    """

    inputs: list[str | Path]
    out: str | Path
    sequence: str | None = None
    methods: list[str] | None = None
    frame: int | None = None
    fps: float = 15.0
    max_frames: int = 150
    mesh: bool = True
    body: str | None = None

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        if isinstance(self.methods, str):
            self.methods = [m for m in self.methods.split(",") if m]
        self.validate()

    @property
    def still(self) -> bool:
        """Whether ``out`` is a still picture."""
        return self.out.suffix.lower() == ".png"

    def validate(self) -> None:
        """Check every value; raises :class:`ConfigError` naming the option."""
        if not self.inputs:
            raise ConfigError("render: nothing to render (give an eval folder or motion files)")
        if self.frame is not None and not self.still:
            raise ConfigError(
                f"render option frame = {self.frame}: a still needs a .png out "
                f"(got {self.out.name})"
            )
        if not self.fps > 0:
            raise ConfigError(f"render option fps = {self.fps}: must be positive")
        if (
            isinstance(self.max_frames, bool)
            or int(self.max_frames) != self.max_frames
            or self.max_frames < 1
        ):
            raise ConfigError(f"render option max_frames = {self.max_frames}: must be ≥ 1")


def defaults() -> dict[str, Any]:
    """Each optional field's default (what the CLI's arguments default to)."""
    return {
        f.name: f.default
        for f in dataclasses.fields(RenderOptions)
        if f.default is not dataclasses.MISSING
    }
