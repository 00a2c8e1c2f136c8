"""Render a comparison: an animation of its frames, or a still of one frame; :func:`render` loads
the comparison :class:`~rbmcap.render.render_options.RenderOptions` names and writes it.

Frames are thinned as ``rbmcap motion render`` thins them
(:func:`rbmcap.motion.skeleton_animation.frame_indices`): about ``out_fps`` pictures per second of
motion, at most ``max_frames`` pictures, playing in real time however thinned.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rbmcap.io.exports.meshes import iter_vertices
from rbmcap.motion.skeleton_animation import frame_indices
from rbmcap.render.comparison import Comparison
from rbmcap.render.figure import ComparisonFigure
from rbmcap.render.render_options import RenderOptions
from rbmcap.render.sources import load_comparison
from rbmcap.render.writers import check_output, write_animation, write_png


def render(opts: RenderOptions) -> Path:
    """Load what ``opts`` names and write its animation or still; returns the written path."""
    check_output(opts.out, opts.still)  # a wrong suffix fails before any loading
    comparison = load_comparison(
        opts.inputs, sequence=opts.sequence, methods=opts.methods, body=opts.body
    )
    if opts.still:
        return render_still(comparison, opts.out, opts.frame or 0, mesh=opts.mesh)
    return render_comparison(
        comparison, opts.out, out_fps=opts.fps, max_frames=opts.max_frames, mesh=opts.mesh
    )


def render_comparison(
    comparison: Comparison,
    out: str | Path,
    *,
    out_fps: float = 15.0,
    max_frames: int = 150,
    mesh: bool = True,
) -> Path:
    """Write ``comparison`` as an animated ``.gif`` or ``.mp4``; returns the path.

    Args:
        comparison: the panels and plates.
        out: the file; its suffix chooses the format.
        out_fps: about this many pictures per second of motion.
        max_frames: at most this many pictures (longer sequences are thinned further).
        mesh: draw each body's shaded mesh under its skeleton (slower); False draws skeletons
            only.
    """
    out = check_output(out, still=False)
    idx = frame_indices(comparison.frames, comparison.fps, out_fps, max_frames)
    step = int(idx[1] - idx[0]) if len(idx) > 1 else 1
    figure = ComparisonFigure(comparison, posed_vertices(comparison, idx) if mesh else None)
    try:
        write_animation((figure.image(int(i)) for i in idx), out, comparison.fps / step)
    finally:
        figure.close()
    return out


def render_still(
    comparison: Comparison, out: str | Path, frame: int = 0, *, mesh: bool = True
) -> Path:
    """Write frame ``frame`` of ``comparison`` as a ``.png``; returns the path."""
    out = check_output(out, still=True)
    frame = comparison.check_frame(frame)
    figure = ComparisonFigure(comparison, posed_vertices(comparison, [frame]) if mesh else None)
    try:
        write_png(figure.image(frame), out)
    finally:
        figure.close()
    return out


def posed_vertices(comparison: Comparison, frames) -> list[dict[int, np.ndarray]]:
    """Per panel, frame → (V, 3) posed vertices (metres, world frame) of ``frames``."""
    out = []
    for panel in comparison.panels:
        verts = {}
        for idx, chunk in iter_vertices(panel.motion, comparison.body, frames):
            verts.update(zip(idx.tolist(), chunk, strict=True))
        out.append(verts)
    return out
