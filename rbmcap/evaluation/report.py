"""Writing an evaluation: ``report.md``, ``metrics.json``, ``per_sequence.csv``, plots and each
sequence's answers (``sequences/``, :mod:`rbmcap.evaluation.saved`)."""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import textwrap
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from rbmcap.evaluation.angles import angles_markdown
from rbmcap.evaluation.methods import ORACLE_PREFIX
from rbmcap.evaluation.occlusion_report import (
    occlusion_claims,
    occlusion_markdown,
    occlusions_json,
)
from rbmcap.evaluation.options import HYBRID_CLAIM_FRACTION, EvalOptions
from rbmcap.evaluation.results import MethodResult, methods_json
from rbmcap.evaluation.saved import save_evaluation
from rbmcap.evaluation.wording import share_of
from rbmcap.skeleton import SMPL_JOINT_NAMES

TABLE = (
    ("mpjpe_mm", "MPJPE mm"),
    ("root_aligned_mpjpe_mm", "root-aligned mm"),
    ("pa_mpjpe_mm", "PA-MPJPE mm"),
    ("mpjpe20_mm", "MPJPE₂₀ mm"),
    ("pa_mpjpe20_mm", "PA-MPJPE₂₀ mm"),
    ("mpjae20_deg", "MPJAE₂₀ deg"),
    ("joint_rotation_deg", "joint rot. deg"),
    ("global_orientation_deg", "global orient. deg"),
    ("legacy_mpjre_deg", "legacy MPJRE deg"),
    ("v2v_mm", "V2V mm"),
    ("mpjve_mm_s", "MPJVE mm/s"),
    ("jitter_pred_m_s3", "jitter m/s³"),
    ("upper_body_mm", "upper mm"),
    ("lower_body_mm", "lower mm"),
    ("hands_mm", "hands mm"),
    ("root_mm", "root mm"),
    ("betas_error", "betas err."),
    ("ms_per_frame", "ms/frame"),
)

_DEFINITIONS = """\
- **MPJPE**: mean Euclidean distance over the 24 SMPL joints, no alignment (mm).
- **root-aligned MPJPE**: the same after subtracting each skeleton's pelvis position (mm).
- **PA-MPJPE**: the same after a per-frame rigid Procrustes alignment, no scale (mm).
- **joint rot.**: mean geodesic angle of the local rotations of body joints 1–23 (deg);
  **global orient.**: the same for joint 0, the global orientation.
- **legacy MPJRE**: mean absolute difference of axis-angle components, root excluded (deg), as
  in the sparse-tracker literature.
- **V2V**: mean vertex distance over the whole mesh (mm).
- **MPJVE**: mean joint velocity error (mm/s); **jitter**: mean norm of the third finite
  difference of joint positions × fps³ (m/s³), prediction (ground truth in metrics.json).
- **upper / lower / hands / root**: MPJPE over those joint groups (mm); **betas err.**: mean
  absolute betas difference.
- **ms/frame**: wall time per frame in this process. The network's is its whole-sequence
  prediction. A baseline solves each sequence until it converged by the solver's own rule
  ({converged}); its time is the whole solve. The
  hybrid's is its full solver budget plus the network pass that starts it, and so are the
  times of its convergence table; so are refinement's (``refine``: the network's answer, then
  a fixed number of sweeps). Each method's one-off start-up (the network's first call,
  a solver's first solve) is paid before timing, untimed.
  {hybrid_budget}
- **20-joint MPJPE / PA-MPJPE, MPJAE** (``mpjpe20_mm``, ``pa_mpjpe20_mm``, ``mpjae20_deg``): the
  RBM paper's protocol, over the 20 joints from the pelvis to the wrists (no feet, no hands):
  MPJPE, PA-MPJPE and the mean geodesic angle of the global joint rotations (deg).
- **oracle start** (``--hybrid-start-error F``): the hybrid with the same budget from the truth
  moved F of the way to the network's answer (geodesically per joint): a network with F times
  this one's error. A study of what network the hybrid claim needs, not a method.
- Averages are over frames (every frame counts once); per-sequence values are in
  per_sequence.csv."""


def definitions(options: dict) -> str:
    """The report's definitions, the hybrid's budget worded from the ``options`` it ran with
    (:meth:`EvalOptions.as_dict`; a missing option reads as its default)."""
    fraction = options.get("hybrid_fraction")
    if fraction:
        margin = options.get("hybrid_margin", EvalOptions.hybrid_margin)
        share = share_of(fraction, "the baseline's converged time")
        budget = (
            f"With the baseline run too, the hybrid gets the iterations that fit in {share} "
            f"({100 * margin:g} % of it planned for), at its own cost per iteration measured "
            "on the split's first sequences before its timed solves."
        )
    else:
        budget = "The hybrid runs its solver config's iterations."
    converged = (
        "a sweep that lowers the objective by less than the configuration's tolerance per frame"
    )
    budget = textwrap.fill(budget, width=96, subsequent_indent="  ")
    return _DEFINITIONS.format(hybrid_budget=budget, converged=converged)


def write_report(result: dict, out: str | os.PathLike) -> dict:
    """Write every output file into ``out``; returns the JSON-ready metrics object."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    methods: dict[str, MethodResult] = result["methods"]
    metrics = {
        "dataset": result["dataset"],
        "options": result["options"],
        "machine": {"cpu_count": os.cpu_count(), "processor": platform.machine()},
        "methods": methods_json(methods),
    }
    averages = {k: m["metrics"] for k, m in metrics["methods"].items()}
    occlusions = result.get("occlusions", [])
    metrics["occlusions"] = occlusions_json(occlusions, methods)
    curves = {k: m.convergence[0] for k, m in methods.items() if m.convergence}
    metrics["claims"] = claims(averages, curves) + occlusion_claims(metrics["occlusions"])
    _atomic_text(out / "metrics.json", json.dumps(_finite(metrics), indent=2))
    _write_csv(_conditions(methods, occlusions), out / "per_sequence.csv")
    plots = _plots(methods, averages, out, float(result["dataset"]["fps"]))
    _atomic_text(out / "report.md", _markdown(metrics, methods, averages, plots))
    save_evaluation(out, result)
    return metrics


HYBRID_TIME_FRACTION = HYBRID_CLAIM_FRACTION
"""The hybrid claim: at most the 6-DoF baseline's MPJPE in at most this fraction of its time."""

SPEEDUP_CLAIM = 10.0
"""The method's claim: the network is at least this many times faster than each baseline."""


def claims(averages: dict[str, dict], curves: dict[str, dict] | None = None) -> list[dict]:
    """The method's claims checked on these averages: the network's speed against each baseline,
    the hybrid against the 6-DoF baseline, and the network's accuracy against the point-marker
    baseline (reported, not judged: parity depends on the training budget).

    With the hybrid's convergence curve in ``curves`` (a ``ConvergenceRecord`` dict by method
    key, its times including the network pass that starts it), also when it reached the
    baseline's MPJPE: the first recorded iteration count at or below it, its time as a fraction
    of the baseline's converged time."""
    net = averages["network"]
    out = []
    for key in ("baseline_6dof", "baseline_points"):
        if key in averages and net["ms_per_frame"]:
            ratio = averages[key]["ms_per_frame"] / net["ms_per_frame"]
            out.append(
                {
                    "claim": f"network ≥ {SPEEDUP_CLAIM:g}× faster than {key}",
                    "value": ratio,
                    "holds": ratio >= SPEEDUP_CLAIM,
                }
            )
    if "hybrid" in averages and "baseline_6dof" in averages:
        curve = (curves or {}).get("hybrid")
        out += _hybrid_claims(averages["hybrid"], averages["baseline_6dof"], curve)
    if "refine" in averages and "baseline_6dof" in averages:
        out += _refine_claims(averages["refine"], averages["baseline_6dof"])
    for key, h in averages.items():
        if key.startswith(ORACLE_PREFIX) and "baseline_6dof" in averages:
            out.append(
                {
                    "claim": f"study: hybrid from {key.removeprefix(ORACLE_PREFIX)} × the "
                    "network's error, same budget, MPJPE vs baseline_6dof (mm)",
                    "value": [h["mpjpe_mm"], averages["baseline_6dof"]["mpjpe_mm"]],
                    "holds": None,
                }
            )
    if "baseline_points" in averages:
        p = averages["baseline_points"]
        out.append(
            {
                "claim": "network MPJPE vs baseline_points MPJPE (mm, parity claimed)",
                "value": [net["mpjpe_mm"], p["mpjpe_mm"]],
                "holds": None,
            }
        )
    return out


def _hybrid_claims(h: dict, b: dict, curve: dict | None) -> list[dict]:
    """The hybrid (averages ``h``) against the 6-DoF baseline (``b``): its accuracy, its whole
    budget's time, and, with its convergence ``curve``, when it reached the baseline's MPJPE."""
    fraction = h["ms_per_frame"] / b["ms_per_frame"]
    out = [
        {
            "claim": "hybrid MPJPE ≤ baseline_6dof MPJPE (mm)",
            "value": [h["mpjpe_mm"], b["mpjpe_mm"]],
            "holds": h["mpjpe_mm"] <= b["mpjpe_mm"],
        },
        {
            "claim": f"hybrid time ≤ {HYBRID_TIME_FRACTION:g} × baseline_6dof time",
            "value": fraction,
            "holds": fraction <= HYBRID_TIME_FRACTION,
        },
    ]
    if curve and curve.get("mpjpe_mm"):
        out.append(_hybrid_reach(curve, b))
    return out


REFINE_TIME_FRACTION = 0.1
"""The refinement claim: at most the converged 6-DoF baseline's MPJPE in at most this fraction of
its time."""


def _refine_claims(r: dict, b: dict, fraction_claimed: float = REFINE_TIME_FRACTION) -> list[dict]:
    """Refinement (averages ``r``) against the converged 6-DoF baseline (``b``): its accuracy and
    its time (network pass included) as a fraction of the baseline's."""
    fraction = r["ms_per_frame"] / b["ms_per_frame"] if b["ms_per_frame"] else math.inf
    return [
        {
            "claim": "refine MPJPE ≤ baseline_6dof MPJPE (mm)",
            "value": [r["mpjpe_mm"], b["mpjpe_mm"]],
            "holds": r["mpjpe_mm"] <= b["mpjpe_mm"],
        },
        {
            "claim": f"refine time ≤ {fraction_claimed:g} × baseline_6dof time",
            "value": fraction,
            "holds": fraction <= fraction_claimed,
        },
    ]


DEMO_REFINE_FRACTION = 0.2
"""``make demo``'s refinement claim for the shipped model: at most the solver's MPJPE in at most
this fraction of its time (its short sequences leave the solver fewer sweeps to converge)."""


def shipped_refine_claims(averages: dict[str, dict], baseline: dict, name: str) -> list[dict]:
    """The refinement claims of a shipped model's evaluation (``averages``, with ``refine``)
    against the converged solver of another evaluation on the same sequences (``baseline``: its
    averages; the solver does not depend on the network), worded with the model's ``name``."""
    out = _refine_claims(averages["refine"], baseline, DEMO_REFINE_FRACTION)
    for claim in out:
        claim["claim"] = claim["claim"].replace("refine", f"{name} refined", 1)
    return out


def _hybrid_reach(curve: dict, baseline: dict) -> dict:
    """The claim "the hybrid reaches the baseline's MPJPE in at most the claimed fraction of its
    time", read off the hybrid's curve (network pass included): value the time fraction at the
    first recorded iteration count at or below the baseline's MPJPE (None if none is),
    ``iterations`` that count."""
    times = np.asarray(curve["ms_per_frame"], dtype=float)
    errors = np.asarray(curve["mpjpe_mm"], dtype=float)
    reached = np.flatnonzero(errors <= baseline["mpjpe_mm"])
    where = "never, on its curve"
    fraction, iterations = None, None
    if len(reached) and baseline["ms_per_frame"]:
        k = int(reached[0])
        fraction = float(times[k] / baseline["ms_per_frame"])
        iterations = int(curve["iterations"][k])
        where = f"at {iterations} iterations, read off its curve"
    return {
        "claim": f"hybrid reaches baseline_6dof MPJPE in ≤ {HYBRID_TIME_FRACTION:g} × its time "
        f"({where})",
        "value": fraction,
        "iterations": iterations,
        "holds": fraction is not None and fraction <= HYBRID_TIME_FRACTION,
    }


def claim_line(claim: dict, bold: bool = False) -> str:
    """One claim as text: 'what: value(s): holds | does not hold | reported'."""
    v = claim["value"]
    shown = " vs ".join(_fmt(x) for x in v) if isinstance(v, list) else _fmt(v)
    verdict = {True: "holds", False: "does not hold", None: "reported"}[claim["holds"]]
    return f"{claim['claim']}: {shown}: " + (f"**{verdict}**" if bold else verdict)


def _finite(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def _atomic_text(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _conditions(methods, occlusions) -> list[tuple[str, dict]]:
    """(hidden plates joined by "+", "" for every plate seen; methods) of every condition."""
    return [("", methods), *(("+".join(c["occluded"]), c["methods"]) for c in occlusions)]


def _write_csv(conditions, path: Path) -> None:
    """One row per condition, method and sequence; ``occluded`` names the hidden plates."""
    keys = [k for k, _ in TABLE]
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["method", "sequence", "frames", *keys, "occluded"])
        for occluded, methods in conditions:
            for name, m in methods.items():
                for row in m.sequences:
                    cells = [f"{row.get(k, float('nan')):.4g}" for k in keys]
                    w.writerow([name, row["sequence"], row["frames"], *cells, occluded])
    os.replace(tmp, path)


def _markdown(metrics, methods, averages, plots) -> str:
    ds = metrics["dataset"]
    net = averages["network"]
    lines = [
        "# rbmcap evaluation",
        "",
        f"Data `{ds['path']}`, split **{ds['split']}** ({methods['network'].frames} frames, "
        f"{len(methods['network'].sequences)} sequences), marker set **{ds['marker_set']}**, "
        f"realism **{ds['realism']}**, body `{ds['body']}`, {ds['fps']:g} Hz. "
        f"Checkpoint `{metrics['options']['ckpt']}`. Machine: {metrics['machine']['cpu_count']} "
        f"CPUs ({metrics['machine']['processor']}).",
        "",
        "| method | " + " | ".join(label for _, label in TABLE) + " | time × network |",
        "|---|" + "---|" * (len(TABLE) + 1),
    ]
    for name, m in methods.items():
        a = averages[name]
        cells = [_fmt(a.get(k)) for k, _ in TABLE]
        ratio = a["ms_per_frame"] / net["ms_per_frame"] if net["ms_per_frame"] else float("nan")
        label = m.label + (f", {m.iterations} it." if m.iterations is not None else "")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {ratio:.1f} |")
    if metrics.get("claims"):
        lines += ["", "**The method's claims on this data:**", ""]
        lines += [f"- {claim_line(c, bold=True)}" for c in metrics["claims"]]
    angles = {k: m.angles for k, m in methods.items() if m.angles is not None}
    lines += angles_markdown(angles, {k: m.label for k, m in methods.items()})
    for m in methods.values():
        if not m.convergence:
            continue
        c = m.convergence[0]
        if m.name == "hybrid":
            how = f"from the network's answer, times with its pass; it runs all {m.iterations}"
        elif m.name.startswith(ORACLE_PREFIX):
            how = (
                f"from its oracle start, times with the network's pass; it runs all {m.iterations}"
            )
        else:
            how = f"converged at {m.iterations}"
        lines += [
            "",
            f"**Convergence of {m.label}** (MPJPE against solver iterations; {how} iterations):",
            "",
            "| iterations | " + " | ".join(str(i) for i in c["iterations"]) + " |",
            "|---|" + "---|" * len(c["iterations"]),
            "| MPJPE mm | " + " | ".join(_fmt(v) for v in c["mpjpe_mm"]) + " |",
            "| ms/frame | " + " | ".join(_fmt(v) for v in c["ms_per_frame"]) + " |",
        ]
    lines += occlusion_markdown(metrics, _fmt)
    lines += ["", "## Definitions", "", definitions(metrics["options"]), "", "## Plots", ""]
    lines += [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def _plots(methods, averages, out: Path, fps: float) -> list[Path]:
    """The per-joint error, error over time and speed-accuracy plots (PNG) in ``out``, each on
    a figure of its own (no pyplot: the caller's matplotlib backend is left as it is)."""
    paths = []
    fig = Figure(figsize=(12, 4))
    ax = fig.subplots()
    width = 0.8 / len(methods)
    for i, m in enumerate(methods.values()):
        if m.per_joint_mm is not None:
            ax.bar(np.arange(24) + i * width, m.per_joint_mm, width, label=m.label)
    ax.set_xticks(np.arange(24) + 0.4 - width / 2, SMPL_JOINT_NAMES, rotation=70, fontsize=8)
    ax.set_ylabel("mean joint error (mm)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(_save(fig, out / "per_joint_error.png"))

    fig = Figure(figsize=(10, 4))
    ax = fig.subplots()
    for m in methods.values():
        if m.per_frame:
            series = m.per_frame[0]["mpjpe_mm"]
            ax.plot(np.arange(len(series)) / fps, series, label=m.label, lw=1)
    first = next(iter(methods.values())).sequences[0]["sequence"]
    ax.set_title(f"MPJPE over time: {first}", fontsize=10)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("MPJPE (mm)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(_save(fig, out / "error_over_time.png"))

    fig = Figure(figsize=(7, 5))
    ax = fig.subplots()
    for name, m in methods.items():
        a = averages[name]
        dot = ax.scatter(a["ms_per_frame"], a["mpjpe_mm"], s=60, label=m.label, zorder=3)
        if m.convergence:
            c = m.convergence[0]
            ax.plot(
                c["ms_per_frame"][1:],
                c["mpjpe_mm"][1:],
                "--",
                lw=1,
                alpha=0.7,
                color=dot.get_facecolor()[0],
                label=f"{m.label}: iterations",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("time per frame (ms, log)")
    ax.set_ylabel("MPJPE (mm, log)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(_save(fig, out / "speed_vs_accuracy.png"))
    return paths


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=100)
    return path
