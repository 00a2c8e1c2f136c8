"""The session report: one HTML page with its plots, written beside the outputs.

- **Trials**: per trial its status (a failed trial's one line), frames, what the capture lost
  (the least-seen plate's share of frames, gaps), how well the answer fits the plates, and where
  the capture carries its own joint centres or angles the comparison with them.
- **Subjects**: per subject the gait-cycle curves of every walk on one figure (hip, knee and
  ankle in the sagittal plane, each side's cycles from foot strike to foot strike, mean ± SD),
  as a gait report draws them.
"""

from __future__ import annotations

import csv
import html
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed; must precede pyplot

import matplotlib.pyplot as plt
import numpy as np

from rbmcap.atomic import atomic_path, write_text_atomic
from rbmcap.evaluation.gait_cycles import POINTS, SIDE_COLOURS, cycle_curves

REPORT = "report.html"
CURVES = (
    ("HipAngles", "hip flexion"),
    ("KneeAngles", "knee flexion"),
    ("AnkleAngles", "ankle dorsiflexion"),
)


def read_sagittal(angles_csv: Path) -> dict[str, np.ndarray]:
    """``{"LKneeAngles": (T,) degrees, …}``: each angle set's first (sagittal) column."""
    with open(angles_csv, newline="") as f:
        rows = list(csv.reader(f))
    header, values = rows[0], np.array(rows[1:], dtype=object)
    out = {}
    for k, name in enumerate(header):
        base, _, _ = name.partition(".")
        if base.endswith("Angles") and base not in out:
            out[base] = np.array([float(v) if v else np.nan for v in values[:, k]])
    return out


def read_strikes(events_csv: Path) -> dict[str, list[int]]:
    """Foot-strike frames per side letter from an events CSV."""
    strikes: dict[str, list[int]] = {"L": [], "R": []}
    with open(events_csv, newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "Foot Strike":
                strikes[row["side"][0]].append(int(row["frame"]))
    return {s: sorted(v) for s, v in strikes.items()}


def plot_subject_cycles(trials: list[tuple[Path, Path]], path: Path, title: str) -> int:
    """Draw the gait cycles of every walk ``(angles.csv, events.csv)`` of a subject to ``path``
    (PNG); returns the cycles drawn per side, summed."""
    fig, axes = plt.subplots(1, len(CURVES), figsize=(12, 3.6), dpi=80)
    x = np.linspace(0, 100, POINTS)
    drawn = 0
    for ax, (base, label) in zip(axes, CURVES, strict=True):
        for side, colour in SIDE_COLOURS.items():
            curves = [
                cycle_curves(read_sagittal(a)[side + base], read_strikes(e)[side])
                for a, e in trials
            ]
            curves = np.concatenate([c for c in curves if len(c)] or [np.zeros((0, POINTS))])
            if not len(curves):
                continue
            drawn += len(curves) if base == CURVES[0][0] else 0
            mean, sd = curves.mean(0), curves.std(0)
            ax.fill_between(x, mean - sd, mean + sd, color=colour, alpha=0.2, lw=0)
            ax.plot(x, mean, color=colour, label=f"{side} ({len(curves)} cycles)")
        ax.set_title(label)
        ax.set_xlabel("gait cycle (%)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("degrees")
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return drawn


def write_report(result, out: Path) -> Path:
    """The report of a :class:`rbmcap.session.run.SessionResult` as ``out/report.html``."""
    rows = []
    for t in result.trials:
        rows.append(_row(t, out))
    figures = []
    for subject in dict.fromkeys(t.subject for t in result.trials):
        walks = [
            (t.outputs["angles"], t.outputs["events"])
            for t in result.trials
            if t.subject == subject and t.status == "done" and "angles" in t.outputs
        ]
        if not walks:
            continue
        png = out / "subjects" / subject / "cycles.png"
        png.parent.mkdir(parents=True, exist_ok=True)
        plot_subject_cycles(walks, png, f"{subject}: {len(walks)} walks, mean ± SD")
        rel = png.relative_to(out).as_posix()
        figures.append(f"<h3>{html.escape(subject)}</h3><img src='{rel}' alt='gait cycles'>")
    failed = len(result.failed)
    status = (
        f"{len(result.trials) - failed} trials done, {failed} failed"
        if failed
        else (f"{len(result.trials)} trials done")
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>rbmcap session</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 4px 8px; text-align: right; }}
th {{ background: #f0f0f0; }} td.name, td.err {{ text-align: left; }}
tr.failed td {{ background: #fde8e8; }}
</style></head><body>
<h1>Session {html.escape(str(result.out.parent.name))}</h1>
<p>{status} in {result.seconds:.1f} s. Outputs in <code>{html.escape(str(out))}</code>.</p>
<h2>Trials</h2>
<table>
<tr><th>trial</th><th>subject</th><th>status</th><th>frames</th><th>least-seen plate</th>
<th>gaps</th><th>plate fit (mm)</th><th>to the capture's joint centres (mm)</th>
<th>sagittal angles RMS vs the capture's (°)</th></tr>
{"".join(rows)}
</table>
{_opensim_table(result)}<h2>Gait cycles</h2>
{"".join(figures) or "<p>No walk processed.</p>"}
</body></html>
"""
    return write_text_atomic(out / REPORT, page)


OPENSIM_BODIES = ("pelvis", "femur_r", "femur_l", "tibia_r", "tibia_l", "calcn_r", "torso")
"""The scale factors the report shows (the model's; Gait 2392's names)."""


def _opensim_table(result) -> str:
    """Per trial with an OpenSim export: the static's and the trial's marker errors on the
    scaled model and the bodies' scale factors (their mean over x, y, z)."""
    rows = []
    for t in result.trials:
        o = t.summary.get("opensim") if t.status == "done" else None
        if not o:
            continue
        factors = o.get("scale_factors", {})
        cells = "".join(
            f"<td>{np.mean(factors[b]):.3f}</td>" if b in factors else "<td>–</td>"
            for b in OPENSIM_BODIES
        )
        rows.append(
            f"<tr><td class='name'>{html.escape(t.name)}</td><td>{o['mass_kg']:.1f}</td>"
            f"<td>{o['static_marker_rms_mm']:.1f}</td><td>{o['marker_rms_mm']:.1f}</td>"
            f"<td>{o['marker_max_mm']:.1f}</td>{cells}</tr>"
        )
    if not rows:
        return ""
    heads = "".join(f"<th>{b}</th>" for b in OPENSIM_BODIES)
    return (
        "<h2>OpenSim, scaled to each subject's static</h2>\n<table>\n<tr><th>trial</th>"
        "<th>mass (kg)</th><th>static marker RMS (mm)</th><th>IK marker RMS (mm)</th>"
        f"<th>IK marker max (mm)</th>{heads}</tr>\n" + "\n".join(rows) + "\n</table>\n"
    )


def _row(t, out: Path) -> str:
    name = html.escape(t.name) + (" (static)" if t.static else "")
    if t.status == "failed":
        return (
            f"<tr class='failed'><td class='name'>{name}</td><td>{html.escape(t.subject)}</td>"
            f"<td class='err' colspan='7'>failed: {html.escape(t.error or '')}</td></tr>"
        )
    s = t.summary
    if not s:  # a static: imported and calibrated with
        return (
            f"<tr><td class='name'>{name}</td><td>{html.escape(t.subject)}</td><td>done</td>"
            + "<td></td>" * 6
            + "</tr>"
        )
    lost = s["lost"]
    worst = min(lost, key=lambda n: lost[n]["seen"]) if lost else ""
    seen = f"{worst} {100 * lost[worst]['seen']:.0f}%" if worst else ""
    gaps = sum(v["gaps"] for v in lost.values())
    ref = s.get("reference")
    ref_text = f"{ref['mean_mm']:.1f}" if ref else "–"
    angles = s.get("angles")
    ang_text = "–"
    if angles:
        sag = [r["rms"] for r in angles["angles"] if r["component"] in ("flexion", "dorsiflexion")]
        ang_text = f"{np.mean(sag):.1f}" if sag else "–"
    motion = Path(t.outputs["motion"]).relative_to(out).as_posix()
    return (
        f"<tr><td class='name'><a href='{motion}'>{name}</a></td><td>{html.escape(t.subject)}</td>"
        f"<td>done</td><td>{s['frames']}</td><td>{html.escape(seen)}</td><td>{gaps}</td>"
        f"<td>{s['plate_fit_mm']:.1f}</td><td>{ref_text}</td><td>{ang_text}</td></tr>"
    )
