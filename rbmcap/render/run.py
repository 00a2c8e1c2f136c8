"""``render``: :class:`~rbmcap.render.options.RenderOptions` to a written file."""

from __future__ import annotations

from pathlib import Path

from rbmcap.render.clip import render_comparison, render_still
from rbmcap.render.options import RenderOptions
from rbmcap.render.sources import load_comparison
from rbmcap.render.writers import check_output


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
