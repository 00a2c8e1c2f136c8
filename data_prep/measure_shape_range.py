"""Measure the network and the solver on body shapes inside and beyond the training range.

    python data_prep/measure_shape_range.py --motions data/real_motions_2000_0_b1000 \
        --prior prior.npz --out shape_range            # the table of docs/history.md

Training shapes are drawn as betas ~ N(0, 0.8²) clipped to ±2
(:func:`rbmcap.motion.procedural.sample_betas`), and the real clips keep the mean shape. Each row
here poses the CMU test subject's clips (``cmu-iclone/02``, real motion) on one fixed shape,
synthesises its plates with the ``realistic`` preset (same seed for every shape) and runs
``rbmcap eval`` with the solver beside the network. Printed per shape: the body's height
(head to the mean of the ankles, rest pose) and arm span (wrist to wrist, T-pose), MPJPE and
joint rotation of both methods, the betas error of both, and the network's MPJPE over the
solver's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from rbmcap.markers.markerset import DEFAULT_MARKERS

SHAPES: dict[str, dict[int, float]] = {
    "mean": {},
    "tall (b0 +2)": {0: 2.0},
    "short (b0 -2)": {0: -2.0},
    "tall (b0 +3)": {0: 3.0},
    "short (b0 -3)": {0: -3.0},
    "long arms (b3 +3)": {3: 3.0},
    "short arms (b3 -3)": {3: -3.0},
    "large (b0 b2 b3 b6 +3)": {0: 3.0, 2: 3.0, 3: 3.0, 6: 3.0},
    "small (b0 b2 b3 b6 -3)": {0: -3.0, 2: -3.0, 3: -3.0, 6: -3.0},
}
"""Betas set per shape (index: value); every other beta is 0. The leading stand-in betas: 0 scales
the whole body, 2 and 6 the trunk and legs, 3 the arms (their length and the shoulders' width)."""


def shape_geometry(betas: np.ndarray) -> tuple[float, float]:
    """(height, arm span) in metres of the stand-in's rest joints for ``betas`` (B,)."""
    import torch

    from rbmcap.body import load_body_model

    body = load_body_model("standin")
    b = torch.as_tensor(betas[: body.num_betas], dtype=torch.float32)[None]
    joints = body.rest_joints(b)[0]
    height = joints[15, 1] - 0.5 * (joints[7, 1] + joints[8, 1])
    return float(height), float(joints[20, 0] - joints[21, 0])


def write_motions(src: Path, dst: Path, betas: dict[int, float], pattern: str) -> int:
    """Copy the clips under ``src`` matching ``pattern`` into ``dst`` with their betas set; write
    a split list naming them all as test. Returns the clip count."""
    names = []
    for path in sorted(src.glob(pattern)):
        data = dict(np.load(path, allow_pickle=False))
        shape = np.zeros_like(data["betas"])
        for i, value in betas.items():
            shape[i] = value
        data["betas"] = shape
        rel = path.relative_to(src)
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        np.savez(dst / rel, **data)
        names.append(rel.as_posix())
    (dst / "splits").mkdir(parents=True, exist_ok=True)
    (dst / "splits" / "test.txt").write_text("".join(n + "\n" for n in names))
    for split in ("train", "val"):
        (dst / "splits" / f"{split}.txt").write_text("")
    return len(names)


def run(cmd: list[str]) -> None:
    print("$", " ".join(cmd), flush=True)
    code = subprocess.run(cmd).returncode
    if code:
        raise SystemExit(f"rbmcap {cmd[3]} stopped with exit status {code} (see above)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--motions", type=Path, required=True, help="motion folder with cmu-iclone/02")
    ap.add_argument("--pattern", default="cmu-iclone/02/*_poses.npz")
    ap.add_argument("--ckpt", default="standin-rbm14")
    ap.add_argument("--prior", type=Path, required=True, help="pose prior .npz for the solver")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--max-frames", type=int, default=2400)
    ap.add_argument("--frames-per-sequence", type=int, default=240)
    ap.add_argument("--solver-iterations", type=int, default=200)
    ap.add_argument("--shapes", nargs="*", default=list(SHAPES), help="names of SHAPES to run")
    args = ap.parse_args(argv)
    rbmcap = [sys.executable, "-m", "rbmcap"]
    rows = []
    for name in args.shapes:
        slug = f"shape{list(SHAPES).index(name)}"
        motions, data, ev = (args.out / slug / d for d in ("motions", "data", "eval"))
        if not (ev / "metrics.json").exists():
            if write_motions(args.motions, motions, SHAPES[name], args.pattern) == 0:
                raise SystemExit(f"no clips match {args.pattern} under {args.motions}")
            run(
                [
                    *rbmcap,
                    "synth",
                    "--motions",
                    str(motions),
                    "--out",
                    str(data),
                    "--markers",
                    DEFAULT_MARKERS,
                    "--realism",
                    "realistic",
                    "--seed",
                    "0",
                    "--workers",
                    "1",
                    "--no-progress",
                ]
            )
            run(
                [
                    *rbmcap,
                    "eval",
                    "--ckpt",
                    args.ckpt,
                    "--data",
                    str(data),
                    "--baseline",
                    "--solver-iterations",
                    str(args.solver_iterations),
                    "--prior",
                    str(args.prior),
                    "--no-vertices",
                    "--max-frames",
                    str(args.max_frames),
                    "--frames-per-sequence",
                    str(args.frames_per_sequence),
                    "--out",
                    str(ev),
                ]
            )
        methods = json.loads((ev / "metrics.json").read_text())["methods"]
        betas = np.zeros(16)
        for i, value in SHAPES[name].items():
            betas[i] = value
        rows.append((name, *shape_geometry(betas), methods["network"], methods["baseline_6dof"]))
    print(
        "| shape | height m | arm span m | network mm / deg | solver mm / deg "
        "| betas err. network / solver | network / solver |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, height, span, net, sol in rows:
        n, s = net["metrics"], sol["metrics"]
        cells = [
            name,
            f"{height:.2f}",
            f"{span:.2f}",
            f"{n['mpjpe_mm']:.1f} / {n['joint_rotation_deg']:.2f}",
            f"{s['mpjpe_mm']:.1f} / {s['joint_rotation_deg']:.2f}",
            f"{n['betas_error']:.2f} / {s['betas_error']:.2f}",
            f"{n['mpjpe_mm'] / s['mpjpe_mm']:.2f}×",
        ]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
