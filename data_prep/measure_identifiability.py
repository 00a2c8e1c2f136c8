"""Measure how well a session's plates determine the calibration offsets: fits started at the
truth, on the synthetic sessions of ``tests/helpers/scenes_static.py``.

    python data_prep/measure_identifiability.py                      # the table of docs/history.md
    python data_prep/measure_identifiability.py --clips 005_02 --frames 160 --plates exact

Each row takes the motion frames of a session (a static then the CMU clip, or ``explore``:
rbmcap's procedural range-of-motion take; ``large`` physical offsets), chosen as ``rbmcap
calibrate`` chooses them, and runs the calibration's full stage
(:meth:`rbmcap.calibrate.objective.SessionFit._stage`, every pose and offset free, the subject's
betas held) from the true poses and the true offsets, the offsets either exact or every plate
moved by ``--perturb`` mm and half as many degrees. ``exact`` plates carry no soft-tissue wobble
and no optical noise; ``realistic`` ones carry the preset's. Printed per row: the plates'
residual (mm, degrees, mean over plates and frames) at the truth and where the fit ends, the
objective's terms there, and the offsets' distance from the truth (mean and worst plate).

If the plates determined every offset, a fit of exact plates without a pose prior would end at
the truth whatever the start; where it ends with the plates fitted and the offsets elsewhere,
the plates leave those offsets to the priors.
Needs ``shared/data/cmu-iclone`` (or ``RBMCAP_ICLONE_DIR``).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np
import roma
import torch
from helpers import scenes_static as S

from rbmcap.markers.markerset import DEFAULT_MARKERS


def _exact_synths():
    """The scenes' synthesizers with the realism's wobble and noise switched off (placement and
    occlusion kept): the plates the fit's model describes exactly."""
    from rbmcap.markers.realism import load_realism
    from rbmcap.markers.synth import Synthesizer

    cfg = load_realism("realistic").to_dict()
    cfg["soft_tissue"] |= {"position_mm": 0.0, "rotation_deg": 0.0}
    cfg["noise"] |= {"position_mm": 0.0, "rotation_deg": 0.0}
    body = S._body()
    return Synthesizer(body, DEFAULT_MARKERS), Synthesizer(body, DEFAULT_MARKERS, load_realism(cfg))


@functools.cache
def _explore_motion(walk_frames, seed: int, clip: str = "explore"):
    """rbmcap's procedural ``explore`` motion (every joint through random key poses inside its
    limits, a range-of-motion take) in place of a CMU clip, the shape drawn as the scenes draw
    it."""
    from rbmcap.motion.procedural import generate, sample_betas

    body = S._body()
    betas = sample_betas(np.random.default_rng(seed), body.num_betas)[: body.num_betas]
    motion = generate("explore", seed, fps=S.FPS, betas=betas, body=body)
    return motion if walk_frames is None else motion[:walk_frames]


def _row(clip: str, plates: str, frames: int, prior_weight: float, perturb_mm: float) -> list[str]:
    from rbmcap.baseline.prior import default_pose_prior
    from rbmcap.calibrate import session_fit as F
    from rbmcap.calibrate.objective import FitState, FitWeights, SessionFit
    from rbmcap.geometry import rotmat_geodesic_angle

    realistic, clips = S._synths, S.walk_motion
    if plates == "exact":
        S._synths = functools.cache(_exact_synths)
    if clip == "explore":
        S.walk_motion = _explore_motion
    try:  # built afresh (not the cached scene): the plates depend on what was swapped in
        session = S.static_then_walk.__wrapped__("tpose", offsets="large", seed=0, clip=clip)
    finally:
        S._synths, S.walk_motion = realistic, clips
    names = session.names
    caps = F.session_captures(session.capture, names, session.synth.markers.name)
    chosen, (pos, rot, valid) = F._frames_used(caps, [session.motion], names, 0, frames)
    idx = np.asarray(chosen[0])
    fit = SessionFit(
        session.synth,
        pos,
        rot,
        valid,
        prior=default_pose_prior(),
        weights=FitWeights(prior=prior_weight),
        betas=session.betas,
    )
    r_true, t_true = S.true_offsets(session)
    truth = FitState(
        roma.rotvec_to_rotmat(torch.as_tensor(session.poses[idx], dtype=torch.float64)),
        torch.as_tensor(session.trans[idx], dtype=torch.float64),
        fit.state.betas.clone(),
        r_true.clone(),
        t_true.clone(),
    )
    start = truth
    if perturb_mm > 0:  # every plate moved by the same amount in a random direction
        g = torch.Generator().manual_seed(1)
        n = len(names)
        dr = torch.randn(n, 3, generator=g, dtype=torch.float64)
        dt = torch.randn(n, 3, generator=g, dtype=torch.float64)
        dr = dr / dr.norm(dim=-1, keepdim=True) * np.radians(perturb_mm / 2)
        dt = dt / dt.norm(dim=-1, keepdim=True) * perturb_mm * 1e-3
        start = FitState(
            truth.rotmats, truth.trans, truth.betas, r_true @ roma.rotvec_to_rotmat(dr), t_true + dt
        )
    end = fit._stage(start, 600, betas=False, offsets=True, rotation=True)

    def residual(st) -> str:
        p, r = fit.residuals(st)
        return f"{float(p.nanmean()):.2f} / {float(r.nanmean()):.2f}"

    dp = ((end.t_off - t_true).norm(dim=-1) * 1000).numpy()
    da = np.degrees(rotmat_geodesic_angle(end.r_off, r_true).numpy())
    terms = fit.terms(end)
    truth_terms = fit.terms(truth)
    return [
        clip,
        plates,
        f"{len(idx)}",
        f"{prior_weight:g}",
        f"{perturb_mm:g} mm, {perturb_mm / 2:g}°" if perturb_mm else "none",
        residual(truth),
        residual(end),
        f"{float(truth_terms['offsets']):.1f} → {float(terms['offsets']):.1f}",
        f"{dp.mean():.1f} / {da.mean():.1f}",
        f"{dp.max():.1f} ({names[int(dp.argmax())]}) / {da.max():.1f} ({names[int(da.argmax())]})",
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clips", nargs="+", default=[S.WALK_CLIP, "005_02"])
    parser.add_argument("--plates", nargs="+", choices=("exact", "realistic"), default=["exact"])
    parser.add_argument("--frames", nargs="+", type=int, default=[40], help="motion frames fitted")
    parser.add_argument("--prior", nargs="+", type=float, default=[0.0], help="pose prior weight")
    parser.add_argument("--perturb", nargs="+", type=float, default=[0.0, 20.0], help="mm")
    args = parser.parse_args(argv)
    head = [
        "clip",
        "plates",
        "frames",
        "pose prior",
        "offsets started off by",
        "residual at the truth mm / deg",
        "residual at the end mm / deg",
        "offsets' prior term",
        "offset error mean mm / deg",
        "offset error worst mm / deg",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for clip in args.clips:
        for plates in args.plates:
            for frames in args.frames:
                for prior in args.prior:
                    for perturb in args.perturb:
                        cells = _row(clip, plates, frames, prior, perturb)
                        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
