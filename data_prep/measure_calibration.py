"""Measure the fit-over-frames calibration on the synthetic sessions of
``tests/helpers/scenes_static.py``.

    python data_prep/measure_calibration.py                 # every case, ~full clip
    python data_prep/measure_calibration.py --quick         # 1 s static + 120 walk frames
    python data_prep/measure_calibration.py --cases tpose motion --betas given

Prints one markdown table: a row per case (a static ``tpose``/``apose``/``sides`` followed by the
CMU walk, calibrated from the frames the fit chooses, or ``motion``: the T-pose session
calibrated from its motion frames only) and per shape (``given``: the subject's betas passed in;
``estimated``). Columns: inference MPJPE (mm, network ``standin-rbm14``) on the clean
plates (the realistic plates without the physical offsets), on the physical plates
uncalibrated and calibrated, each over the whole take, the static
and the motion frames; with a perfect calibration (the true offsets and betas: the floor a fit
can reach, soft tissue and noise remaining); the worst plate's offset errors (mm, degrees,
against the placement composed with the applied offset), also ``gauge-free``: with the turn
that the poses can take up removed (a plate's turn about its segment's axis, or about its joint
for head, hands and feet: what only a pose prior decides, see ``offset_errors`` there);
the frames the fit used in the static and in the motion; the calibration's wall time.
Needs ``shared/data/cmu-iclone`` (or ``RBMCAP_ICLONE_DIR``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np
from helpers import scenes_static as S

CASES = ("tpose", "apose", "sides", "motion")
PARTS = ("whole", "static", "motion")


def _row(case: str, betas_given: bool, scene: dict, cache: dict, max_frames: int) -> list[str]:
    from rbmcap.calibrate import calibrate

    session = S.static_then_walk("tpose" if case == "motion" else case, **scene)
    if id(session) not in cache:  # references shared by the rows of one session
        refs = {"clean": S.predict(session.clean), "raw": S.predict(session.uncalibrated)}
        try:
            refs["oracle"] = S.predict(session.capture, S.oracle_calibration(session))
        except Exception as err:  # a reference, not the measurement: report and go on
            print(f"(no perfect-calibration reference: {err})", file=sys.stderr)
        cache[id(session)] = {k: S.mpjpe_split(m, session) for k, m in refs.items()}
    refs = cache[id(session)]
    frames = [session.motion] if case == "motion" else None
    start = time.perf_counter()
    calib = calibrate(
        session.capture,
        session.synth,
        frames=frames,
        betas=session.betas if betas_given else None,
        max_frames=max_frames,
    )
    seconds = time.perf_counter() - start
    cal = S.mpjpe_split(S.predict(session.capture, calib), session)
    err = S.offset_errors(calib, session)
    oracle = refs.get("oracle")
    cells = [case, "given" if betas_given else "estimated"]
    for d in (refs["clean"], refs["raw"], cal):
        cells += [f"{d[p]:.1f}" for p in PARTS]
    cells += [f"{cal['whole'] / refs['clean']['whole']:.2f}"]
    cells += [f"{oracle['whole']:.1f}" if oracle else "n/a"]
    cells += [
        f"{err['pos_mm'].max():.1f}",
        f"{err['rot_deg'].max():.2f}",
        f"{err['pos_mm_gauge_free'].max():.1f}",
        f"{err['rot_deg_gauge_free'].max():.2f}",
    ]
    used = np.asarray(calib.frames[0])
    static = int((used < session.static[1]).sum())
    cells += [f"{static}/{len(used) - static}", f"{seconds:.1f}"]
    print(
        f"{case}, betas {cells[1]}: {S.describe_offset_errors(err, session.names)}; report:\n"
        f"{getattr(calib, 'report', '')}",
        file=sys.stderr,
    )
    return cells


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--betas", choices=("given", "estimated", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="1 s static + 120 walk frames")
    parser.add_argument("--offsets", choices=("large", "small"), default="large")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-frames", type=int, default=40, help="most frames fitted per capture")
    args = parser.parse_args(argv)
    scene = {"offsets": args.offsets, "seed": args.seed}
    if args.quick:
        scene |= {"static_frames": 60, "walk_frames": 120}
    given = {"given": [True], "estimated": [False], "both": [True, False]}[args.betas]
    head = ["case", "betas"]
    for what in ("clean", "uncalibrated", "calibrated"):
        head += [f"{what} {p}" for p in PARTS]
    head += [
        "calib/clean",
        "perfect calib",
        "max offset mm",
        "max offset deg",
        "gauge-free mm",
        "gauge-free deg",
        "fitted static/motion",
        "calib s",
    ]
    rows, cache = [], {}
    for case in args.cases:
        for g in given:
            rows.append(_row(case, g, scene, cache, args.max_frames))
    print(
        f"MPJPE in mm (network standin-rbm14, clip {S.WALK_CLIP}, {args.offsets} offsets, "
        f"seed {args.seed}, at most {args.max_frames} frames per capture"
        f"{', quick' if args.quick else ''})\n"
    )
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for cells in rows:
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
