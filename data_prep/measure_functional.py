"""Measure functional joint centres and hinge axes (:mod:`rbmcap.calibrate.functional`) against
the truth, on the synthetic sessions of ``tests/helpers/scenes_static.py``.

    python data_prep/measure_functional.py                 # walk and range-of-motion, realistic
    python data_prep/measure_functional.py --plates exact --prior-mm 0
    python data_prep/measure_functional.py --joint-noise measured  # the residual's correlation

Each row takes the motion frames of a session (the CMU walk ``005_01`` after its static, or
``explore``: rbmcap's procedural range-of-motion take), the plates with the ``realistic`` preset
(soft tissue, noise, gaps) and ``large`` physical offsets (every plate up to 5 cm and 30° off,
three turned 180° and moved 15 cm). The prior handed to the fit is the true joint centre moved by
``--prior-mm`` in a random direction fixed in the parent bone (a body model's joint centre off
the subject's by that much), or none (``--prior-mm -1``: the point midway between the plates).

Printed per joint: the centre's error (mm, mean over the frames of the distance between the
true joint and the centre the plates put there), the axis' error (degrees, against the principal
axis of the true joint's local rotations, carried into the parent plate's frame by the mean
rotation between the plate and the parent bone), the range and off-axis spread, and how many
directions came from the prior, and the centre's error split along the true axis and across it.
``--joint-noise`` picks how the frames count against the noise
(:data:`rbmcap.calibrate.functional.JOINT_NOISE`; the end-to-end run's calibration too).

``--end-to-end`` instead calibrates the T-pose + walk session (``rbmcap calibrate``'s fit, the
joints measured with the fitted body as their prior) and prints MPJPE (mm, against the true
joints, over the whole take) of the network ``standin-rbm14`` and of refinement (2 sweeps):
with the calibration's offsets alone, with its joint centres, and with its hinges at
``--hinge-deg``; and the same with the true offsets and shape (*perfect calib*, the floor).
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

from rbmcap.calibrate.functional import JOINT_NOISE, adjacent_pairs, fit_joint, in_frames
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS


def _exact_synths():
    from rbmcap.markers.synth import Synthesizer

    clean = Synthesizer(S._body(), "rbm14")
    return clean, clean


def _explore_motion(walk_frames, seed: int, clip: str = "explore"):
    from rbmcap.motion.procedural import generate, sample_betas

    body = S._body()
    betas = sample_betas(np.random.default_rng(seed), body.num_betas)[: body.num_betas]
    motion = generate("explore", seed, fps=S.FPS, betas=betas, body=body)
    return motion if walk_frames is None else motion[:walk_frames]


def session(clip: str, plates: str):
    """The synthetic session (built afresh: what is swapped in decides its plates)."""
    realistic, clips = S._synths, S.walk_motion
    if plates == "exact":
        S._synths = functools.cache(_exact_synths)
    if clip == "explore":
        S.walk_motion = _explore_motion
    try:
        return S.static_then_walk.__wrapped__("tpose", offsets="large", seed=0, clip=clip)
    finally:
        S._synths, S.walk_motion = realistic, clips


def global_rotations(session) -> np.ndarray:
    """(T, 24, 3, 3) each joint's world rotation in the true motion."""
    local = roma.rotvec_to_rotmat(torch.as_tensor(session.poses, dtype=torch.float64))
    out = [local[:, 0]]
    for j in range(1, 24):
        out.append(out[SMPL_PARENTS[j]] @ local[:, j])
    return torch.stack(out, 1).numpy()


def true_axis(local: np.ndarray) -> np.ndarray:
    """The principal axis of a joint's local rotations (T, 3, 3), in its parent bone's frame."""
    rel = torch.as_tensor(local)
    mean = roma.special_procrustes(rel.mean(0))
    turns = roma.rotmat_to_rotvec(rel @ mean.T).numpy()
    turns = turns - turns.mean(0)
    return np.linalg.eigh(turns.T @ turns)[1][:, -1]


def rows(clip: str, plates: str, prior_mm: float, noise: str, seed: int = 0) -> list[dict]:
    sess = session(clip, plates)
    a, b = sess.motion
    names = sess.names
    pos, rot, valid = sess.capture.pos[a:b], sess.capture.rot[a:b], sess.capture.valid[a:b]
    joints = sess.joints[a:b]
    glob = global_rotations(sess)[a:b]
    local = roma.rotvec_to_rotmat(torch.as_tensor(sess.poses[a:b], dtype=torch.float64)).numpy()
    rng = np.random.default_rng(seed)
    out = []
    for pair in adjacent_pairs(sess.synth.markers):
        j = SMPL_JOINT_NAMES.index(pair.joint)
        ia, ib = names.index(pair.parent), names.index(pair.child)
        both = valid[:, ia] & valid[:, ib]
        ra, pa, rb, pb = rot[both, ia], pos[both, ia], rot[both, ib], pos[both, ib]
        truth = joints[both, j]
        prior = None
        if prior_mm >= 0:
            d = rng.normal(size=3)
            d *= prior_mm * 1e-3 / np.linalg.norm(d)
            parent_bone = glob[both, SMPL_PARENTS[j]]
            prior = in_frames(truth + parent_bone @ d, ra, pa, rb, pb)
        fj = fit_joint(pair, ra, pa, rb, pb, prior, noise=noise)
        ea, eb = fj.estimates(pa, ra, pb, rb)
        error = 0.5 * (ea + eb) - truth
        centre_mm = float(np.linalg.norm(error, axis=-1).mean() * 1e3)
        # the true axis, from the parent bone's frame into the parent plate's
        plate_from_bone = roma.special_procrustes(
            torch.as_tensor(np.einsum("tji,tjk->ik", ra, glob[both, SMPL_PARENTS[j]]))
        ).numpy()
        axis = plate_from_bone @ true_axis(local[both, j])
        axis_deg = float(np.degrees(np.arccos(min(1.0, abs(float(axis @ fj.axis_parent))))))
        along = np.einsum("tj,tj->t", error, ra @ axis)  # the true axis, in the world
        across = np.linalg.norm(error - along[:, None] * (ra @ axis), axis=-1)
        out.append(
            {
                "take": clip,
                "joint": pair.joint,
                "centre_mm": centre_mm,
                "along_mm": float(np.abs(along).mean() * 1e3),
                "across_mm": float(across.mean() * 1e3),
                "axis_deg": axis_deg,
                "range_deg": fj.range_deg,
                "off_axis_deg": fj.off_axis_deg,
                "from_prior": fj.from_prior,
                "uncertainty_mm": float(fj.uncertainty_mm[-1]),
            }
        )
    return out


def end_to_end(hinge_degrees: list[float], noise: str) -> None:
    """The ``--end-to-end`` table (module docstring)."""
    import copy
    import time

    from rbmcap.baseline import load_solver_config
    from rbmcap.calibrate import calibrate
    from rbmcap.inference.solve_capture import infer_capture

    sess = S.static_then_walk("tpose")
    t0 = time.perf_counter()
    calib = calibrate(sess.capture, sess.synth, joint_noise=noise)
    print(f"calibration {time.perf_counter() - t0:.0f} s")
    for line in calib.report.functional:
        print(" ", line)
    bare = copy.copy(calib)
    bare.joints, bare.joint_offsets = {}, {}
    centres_only = copy.copy(calib)
    centres_only.joint_offsets = {}
    pred = S.predictor()
    oracle = S.oracle_calibration(sess)
    print("| method | calibrated | perfect calib | ms/frame |")
    print("|---|---|---|---|")
    row = [S.mpjpe_mm(pred.predict_capture(sess.capture, c), sess) for c in (calib, oracle)]
    print(f"| network | {row[0]:.2f} | {row[1]:.2f} | |")
    plain = S.mpjpe_mm(pred.predict_capture(sess.capture, centres_only), sess)
    print(f"| network, no joint correction | {plain:.2f} | | |")
    runs = [("refined, offsets only", bare, 0.0)]
    runs += [("refined, joint centres, no joint correction", centres_only, 0.0)]
    runs += [("refined, joint centres and correction", calib, 0.0)]
    runs += [(f"refined, joint centres + hinges {h:g}°", calib, h) for h in hinge_degrees]
    for name, c, hinge in runs:
        config = load_solver_config("refine", {"weights.hinge_sigma_deg": hinge})
        got = []
        for cal in (c, oracle):
            answer = infer_capture(
                sess.capture, cal, method="refine", predictor=pred, solver_config=config
            )
            got.append((S.mpjpe_mm(answer.motion, sess), answer.seconds_per_frame * 1e3))
        print(f"| {name} | {got[0][0]:.2f} | {got[1][0]:.2f} | {got[0][1]:.1f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clips", nargs="+", default=[S.WALK_CLIP, "explore"])
    p.add_argument("--plates", default="realistic", choices=["realistic", "exact"])
    p.add_argument("--prior-mm", type=float, default=20.0)
    p.add_argument("--end-to-end", action="store_true")
    p.add_argument("--hinge-deg", type=float, nargs="+", default=[1.0, 3.0])
    p.add_argument("--joint-noise", default="shared", choices=JOINT_NOISE)
    args = p.parse_args()
    if args.end_to_end:
        end_to_end(args.hinge_deg, args.joint_noise)
        return
    print(
        "| take | joint | centre mm | along the axis | across | axis deg | range deg | "
        "off-axis deg | from prior | ± mm |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for clip in args.clips:
        for r in rows(clip, args.plates, args.prior_mm, args.joint_noise):
            print(
                f"| {r['take']} | {r['joint']} | {r['centre_mm']:.1f} | {r['along_mm']:.1f} | "
                f"{r['across_mm']:.1f} | {r['axis_deg']:.1f} | {r['range_deg']:.0f} | "
                f"{r['off_axis_deg']:.1f} | {r['from_prior']} | {r['uncertainty_mm']:.0f} |"
            )


if __name__ == "__main__":
    main()
