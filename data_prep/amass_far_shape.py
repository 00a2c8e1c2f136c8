"""Write CMU test clips as AMASS SMPL+H files of a subject whose shape is far from the stand-in's
mean, with split lists that make every clip a test clip: the data of issue 52's "real AMASS-format
file" row (docs/results.md#a-shape-far-from-the-mean).

    python data_prep/amass_far_shape.py data/real_motions_2000_0_b1000/cmu-iclone/02 out/amass_far
    rbmcap synth --motions out/amass_far --markers rbm14 --realism realistic \
        --out out/amass_far_rbm14
    rbmcap eval --ckpt standin-rbm14 --data out/amass_far_rbm14 --baseline --hybrid --refine \
        --no-vertices --out eval/amass_far
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from rbmcap.motion import read_motion

FAR_BETAS = np.array([2.0, -2.0, 1.5, -1.5, 1.0, -1.0, 1.0, -1.0, 0.5, -0.5, 0, 0, 0, 0, 0, 0])
"""A shape two standard deviations out along the first principal directions (AMASS's 16)."""

CLIPS = ("002_01", "002_03", "002_05", "002_09")
"""CMU subject 2's walk, run, jump and washing clips."""


def main(source: str, out: str) -> None:
    root = Path(out)
    names = []
    for clip in CLIPS:
        motion = read_motion(Path(source) / f"{clip}_poses.npz")
        far = motion.replace(betas=FAR_BETAS.copy(), name=f"CMU_far/{clip}")
        rel = Path("CMU_far") / f"{clip}_poses.npz"
        far.save(root / rel)
        names.append(str(rel))
    (root / "splits").mkdir(parents=True, exist_ok=True)
    (root / "splits" / "test.txt").write_text("\n".join(names) + "\n")
    for split in ("train", "val"):
        (root / "splits" / f"{split}.txt").write_text("")
    print(f"wrote {len(names)} clips with betas {FAR_BETAS[:6].tolist()}... to {root}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
