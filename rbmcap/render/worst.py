"""The evaluation's worst sequence as a clip beside its report (``rbmcap eval --render-worst``).

The clip is ``worst_<sequence>.gif`` in the evaluation's output folder; ``report.md`` gets a
short section pointing at it (replaced, not repeated, when the clip is rendered again).
"""

from __future__ import annotations

import re
from pathlib import Path

from rbmcap.atomic import write_text_atomic
from rbmcap.evaluation.saved import worst_sequence
from rbmcap.render.clip import render_comparison
from rbmcap.render.comparison import comparison_from_sequence
from rbmcap.render.sources import body_for, pick_sequence

SECTION = "## Worst sequence"
_MARK = "<!-- rbmcap render-worst -->"


def render_worst(
    folder: str | Path, *, method: str = "network", mesh: bool = True, max_frames: int = 90
) -> Path:
    """Render the sequence of ``folder`` (an ``rbmcap eval`` output) where ``method``'s MPJPE
    is largest, every method side by side with the plates; mention it in ``report.md``.

    Returns:
        The clip's path.
    """
    folder = Path(folder)
    name = worst_sequence(folder, method)
    seq = pick_sequence(folder, name)
    comparison = comparison_from_sequence(seq, body_for(seq.body, seq.gender))
    out = folder / f"worst_{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.gif"
    render_comparison(comparison, out, max_frames=max_frames, mesh=mesh)
    error = comparison.mpjpe_mm([p.key for p in comparison.panels].index(method)).mean()
    _mention(folder / "report.md", out, seq, error, method)
    return out


def _mention(report: Path, clip: Path, seq, error_mm: float, method: str) -> None:
    """Append (or replace) the report's section on the clip."""
    text = report.read_text(encoding="utf-8") if report.is_file() else ""
    text = text.split(_MARK)[0].rstrip("\n")
    labels = ", ".join(seq.labels.values())
    section = (
        f"\n\n{_MARK}\n{SECTION}\n\n"
        f"`{seq.name}`: the sequence where {seq.labels.get(method, method)} has its largest "
        f"MPJPE ({error_mm:.1f} mm, mean over {seq.frames} frames). "
        f"[{clip.name}]({clip.name}) shows {labels} side by side, with the plates "
        "the methods saw.\n\n"
        f"![worst sequence]({clip.name})\n"
    )
    write_text_atomic(report, text + section)
