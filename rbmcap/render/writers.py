"""Pictures to files: animated GIF (Pillow), MP4 (imageio-ffmpeg's ffmpeg) and PNG stills.

Every writer writes to a temporary file beside the target and renames it only once complete
(:func:`rbmcap.atomic.atomic_path`): a failure leaves no half-written file.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
from PIL import Image

from rbmcap.atomic import atomic_path
from rbmcap.errors import ConfigError

ANIMATIONS = (".gif", ".mp4")
STILLS = (".png",)


def check_output(out: str | Path, still: bool) -> Path:
    """``out`` as a Path if its suffix suits a still (``.png``) or an animation (``.gif`` or
    ``.mp4``); ConfigError otherwise (before any work is done)."""
    out = Path(out)
    allowed = STILLS if still else ANIMATIONS
    if out.suffix.lower() not in allowed:
        what = "a still" if still else "an animation"
        raise ConfigError(f"{out}: {what} is written as {' or '.join(allowed)}")
    if out.suffix.lower() == ".mp4":
        _ffmpeg()
    return out


def write_png(image: np.ndarray, out: str | Path) -> Path:
    """Write one (H, W, 3) uint8 picture."""
    with atomic_path(out) as tmp:
        Image.fromarray(image).save(tmp, format="PNG")
    return Path(out)


def write_animation(images: Iterable[np.ndarray], out: str | Path, fps: float) -> Path:
    """Write (H, W, 3) uint8 pictures as a ``.gif`` or ``.mp4`` playing at ``fps``."""
    out = check_output(out, still=False)
    with atomic_path(out) as tmp:
        if out.suffix.lower() == ".mp4":
            _write_mp4(images, tmp, fps)
        else:
            _write_gif(images, tmp, fps)
    return out


def _write_gif(images: Iterable[np.ndarray], path: Path, fps: float) -> None:
    # Each picture takes its own 256-colour palette as it comes, so only the small
    # palettised copies are held until the file is written.
    frames = [Image.fromarray(im).quantize(colors=255) for im in images]
    if not frames:
        raise ConfigError(f"{path}: no picture to write")
    frames[0].save(
        path,
        format="GIF",
        save_all=True,
        append_images=frames[1:],
        duration=max(20, round(1000 / fps)),
        loop=0,
        disposal=1,
    )


def _write_mp4(images: Iterable[np.ndarray], path: Path, fps: float) -> None:
    writer = None
    try:
        for im in images:
            if writer is None:
                size = (im.shape[1], im.shape[0])
                writer = _ffmpeg().write_frames(
                    str(path), size, fps=fps, codec="libx264", ffmpeg_log_level="error"
                )
                writer.send(None)
            writer.send(np.ascontiguousarray(im))
    finally:
        if writer is not None:
            writer.close()


def _ffmpeg():
    try:
        import imageio_ffmpeg  # only for .mp4: its absence is one error line
    except ImportError as exc:
        raise ConfigError(
            "an .mp4 needs imageio-ffmpeg (pip install imageio-ffmpeg); or write a .gif"
        ) from exc
    return imageio_ffmpeg
