"""The occlusion part of an evaluation's report: each condition against every plate seen.

For every condition (plates hidden for whole sequences, :mod:`rbmcap.evaluation.occlusion`)
``metrics.json`` holds its methods as for every plate seen, plus per method:

- ``near_mpjpe_mm``: the MPJPE over the joints near the hidden plates (each plate's carrying
  joint and that joint's children), where a hidden plate's information is missing most;
- ``all_seen``: the same method's ``mpjpe_mm`` and ``near_mpjpe_mm`` with every plate seen;
- ``mpjpe_ratio_to_all_seen``: its MPJPE over its MPJPE with every plate seen.

The network's ratio is judged against :data:`OCCLUSION_CLAIM_RATIO`.
"""

from __future__ import annotations

from rbmcap.evaluation.results import MethodResult, methods_json

OCCLUSION_CLAIM_RATIO = 1.5
"""The occlusion claim: with plates hidden, the network's MPJPE is at most this many times its
MPJPE with every plate seen."""


def occlusions_json(occlusions: list[dict], seen: dict[str, MethodResult]) -> list[dict]:
    """The conditions as ``metrics.json`` holds them.

    Args:
        occlusions: :func:`~rbmcap.evaluation.runner.evaluate`'s ``occlusions``: per condition
            ``occluded`` (plate names), ``near_joints`` (SMPL joint names) and ``methods``.
        seen: the methods with every plate seen (key → :class:`MethodResult`).
    """
    out = []
    for cond in occlusions:
        near = cond["near_joints"]
        entries = methods_json(cond["methods"])
        for key, entry in entries.items():
            entry["near_mpjpe_mm"] = cond["methods"][key].joint_error_mm(near)
            if key not in seen:
                continue
            all_seen = seen[key].averages()["mpjpe_mm"]
            entry["all_seen"] = {
                "mpjpe_mm": all_seen,
                "near_mpjpe_mm": seen[key].joint_error_mm(near),
            }
            entry["mpjpe_ratio_to_all_seen"] = entry["metrics"]["mpjpe_mm"] / all_seen
        out.append(
            {"occluded": list(cond["occluded"]), "near_joints": list(near), "methods": entries}
        )
    return out


def occlusion_claims(occlusions: list[dict]) -> list[dict]:
    """The network's MPJPE under each condition against :data:`OCCLUSION_CLAIM_RATIO` × its
    MPJPE with every plate seen (``occlusions`` as :func:`occlusions_json` gives them)."""
    out = []
    for cond in occlusions:
        ratio = cond["methods"].get("network", {}).get("mpjpe_ratio_to_all_seen")
        if ratio is None:
            continue
        out.append(
            {
                "claim": f"network MPJPE with {', '.join(cond['occluded'])} hidden ≤ "
                f"{OCCLUSION_CLAIM_RATIO:g} × with every plate seen",
                "value": ratio,
                "holds": ratio <= OCCLUSION_CLAIM_RATIO,
            }
        )
    return out


def occlusion_markdown(metrics: dict, fmt) -> list[str]:
    """The report's occlusion section (lines): one row per condition and method, every plate
    seen first; ``fmt`` formats a number. Empty without conditions."""
    occlusions = metrics.get("occlusions") or []
    if not occlusions:
        return []
    lines = [
        "",
        "## Occlusion",
        "",
        "Plates hidden for whole sequences (invalid in every frame before any method sees the "
        "data). **× all seen**: the method's MPJPE over its MPJPE with every plate seen; "
        "**near**: MPJPE over the joints near the hidden plates, hidden (with every plate seen).",
        "",
        "| hidden plates | method | MPJPE mm | × all seen | near mm (all seen) | "
        "PA-MPJPE mm | joint rot. deg | ms/frame |",
        "|---|---|---|---|---|---|---|---|",
    ]
    conditions = [{"occluded": [], "methods": metrics["methods"]}, *occlusions]
    for cond in conditions:
        hidden = ", ".join(cond["occluded"]) or "none"
        for m in cond["methods"].values():
            a = m["metrics"]
            label = m["label"] + (f", {m['iterations']} it." if m["iterations"] is not None else "")
            near = "–"
            if m.get("near_mpjpe_mm") is not None:
                before = m.get("all_seen", {}).get("near_mpjpe_mm")
                near = f"{fmt(m['near_mpjpe_mm'])} ({fmt(before)})"
            ratio = fmt(m["mpjpe_ratio_to_all_seen"]) if "mpjpe_ratio_to_all_seen" in m else "1"
            cells = [
                hidden,
                label,
                fmt(a["mpjpe_mm"]),
                ratio,
                near,
                fmt(a["pa_mpjpe_mm"]),
                fmt(a["joint_rotation_deg"]),
                fmt(a["ms_per_frame"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [
        f"- joints near {', '.join(c['occluded'])}: {', '.join(c['near_joints']) or '–'}"
        for c in occlusions
    ]
    return lines
