"""A gait report's kinematics page: each angle over the gait cycle, ours against the lab's.

Rows are pelvis, hip, knee, ankle and foot progression, columns the sagittal, frontal and
transverse planes. Each side's cycles (foot strike to the next foot strike of that side) are
normalised to 0–100 % and averaged; the left side is drawn red and the right green, as gait
reports do, the lab's curves solid and the motion's dashed.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # no display needed; must precede pyplot

import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from rbmcap.atomic import atomic_path

ROWS = ("PelvisAngles", "HipAngles", "KneeAngles", "AnkleAngles", "FootProgressAngles")
PLANES = ("sagittal", "frontal", "transverse")
SIDE_COLOURS = {"L": "#c0392b", "R": "#27ae60"}
POINTS = 101


def cycle_curves(values: np.ndarray, strikes: list[int]) -> np.ndarray:
    """Each cycle between consecutive ``strikes`` of ``values`` (T,) resampled to
    :data:`POINTS` samples over 0–100 %: (cycles, POINTS)."""
    out = []
    for a, b in itertools.pairwise(strikes):
        seg = values[a : b + 1]
        out.append(np.interp(np.linspace(0, len(seg) - 1, POINTS), np.arange(len(seg)), seg))
    return np.array(out).reshape(-1, POINTS)


def plot_gait_cycles(
    ours: dict[str, np.ndarray],
    theirs: dict[str, np.ndarray],
    strikes: dict[str, list[int]],
    path: str | Path,
    title: str = "",
) -> Path:
    """Write the page as a PNG: ``ours`` and ``theirs`` are ``{set name: (T, 3) degrees}`` on
    the same frames, ``strikes`` the foot-strike frames per side letter."""
    fig, axes = plt.subplots(len(ROWS), 3, figsize=(11, 13), dpi=80, sharex=True)
    x = np.linspace(0, 100, POINTS)
    for r, base in enumerate(ROWS):
        for c, plane in enumerate(PLANES):
            ax = axes[r, c]
            for side, colour in SIDE_COLOURS.items():
                name = side + base
                if name not in ours or name not in theirs or len(strikes.get(side, [])) < 2:
                    continue
                for source, style in ((theirs, "-"), (ours, "--")):
                    curves = cycle_curves(source[name][:, c], strikes[side])
                    if len(curves):
                        ax.plot(x, np.nanmean(curves, axis=0), style, color=colour, lw=1.6)
            ax.set_title(f"{base.removesuffix('Angles')} ({plane})", fontsize=9)
            ax.grid(alpha=0.3)
            if r == len(ROWS) - 1:
                ax.set_xlabel("gait cycle (%)")
            if c == 0:
                ax.set_ylabel("degrees")
    handles = [
        plt.Line2D([], [], color=SIDE_COLOURS["L"], label="left"),
        plt.Line2D([], [], color=SIDE_COLOURS["R"], label="right"),
        plt.Line2D([], [], color="k", ls="-", label="capture's own"),
        plt.Line2D([], [], color="k", ls="--", label="motion"),
    ]
    fig.legend(handles=handles, loc="upper right", ncol=4, fontsize=9)
    fig.suptitle(title, x=0.02, ha="left", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path
