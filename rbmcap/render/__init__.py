"""Headless comparison renders for reports and papers (matplotlib, no display).

One panel per method (the truth first, then the network, the baseline, the hybrid...), side by
side at one scale under one camera, bodies as shaded meshes with their skeletons (the subject's
left blue, right red), the observed plates as small coordinate frames, each panel titled with
its MPJPE against the truth in that frame. Written as an animated GIF, an MP4 (imageio-ffmpeg) or
a PNG still of one frame.

- :func:`render` with :class:`RenderOptions`: what ``rbmcap render`` does.
- :func:`load_comparison`: an evaluation folder's sequence or motion files → :class:`Comparison`.
- :func:`render_comparison`, :func:`render_still`: a comparison → a file.
- :func:`render_worst`: the clip ``rbmcap eval --render-worst`` adds beside its report.

Submodules load matplotlib; import them where they are used.
"""

from __future__ import annotations

from rbmcap.render.render_options import RenderOptions

__all__ = [
    "Comparison",
    "RenderOptions",
    "load_comparison",
    "render",
    "render_comparison",
    "render_still",
    "render_worst",
]

_LAZY = {
    "Comparison": "rbmcap.render.comparison",
    "load_comparison": "rbmcap.render.sources",
    "render": "rbmcap.render.clip",
    "render_comparison": "rbmcap.render.clip",
    "render_still": "rbmcap.render.clip",
    "render_worst": "rbmcap.render.worst",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rbmcap.render' has no attribute {name!r}")
