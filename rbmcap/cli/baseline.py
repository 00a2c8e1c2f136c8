"""``rbmcap baseline``: the optimisation baseline's tools.

* ``fit-prior (--data DATASET | --motions DIR [DIR ...]) --out prior.npz [--split train]
  [--components 8] [--seed 0] [--max-samples 20000]``
"""

from __future__ import annotations

import argparse
import sys

from rbmcap.baseline.prior import fit_pose_prior, motion_poses
from rbmcap.dataset import RBMDataset
from rbmcap.errors import DataError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "baseline",
        help="optimisation baseline tools",
        description="Tools of the optimisation baseline.",
    )
    tools = p.add_subparsers(dest="tool", metavar="TOOL", required=True)
    f = tools.add_parser(
        "fit-prior",
        help="fit the Gaussian-mixture pose prior on a dataset split or motions folders",
        description=(
            "Fit a Gaussian mixture (full covariances, EM) to the body poses (axis-angle of joints "
            "1..23) of one split of a synthesised dataset, or of motions folders, and write it as "
            ".npz for the solver."
        ),
    )
    source = f.add_mutually_exclusive_group(required=True)
    source.add_argument("--data", help="dataset folder (holding manifest.json)")
    source.add_argument(
        "--motions",
        nargs="+",
        metavar="DIR",
        help="motions folders (`rbmcap motion procedural` / `motion from-bvh DIR`); a folder "
        "with split lists gives its --split, one without gives all its motions",
    )
    f.add_argument("--split", default="train", help="split to learn from (default: train)")
    f.add_argument("--out", required=True, help="output .npz")
    f.add_argument("--components", type=int, default=8, help="mixture components (default 8)")
    f.add_argument("--seed", type=int, default=0, help="seed of subsampling and initialisation")
    f.add_argument(
        "--max-samples",
        type=int,
        default=20000,
        help="poses used at most, spread over the split (default 20000)",
    )
    f.set_defaults(func=_fit_prior)


def _fit_prior(args: argparse.Namespace) -> int:
    if args.motions:
        poses, count = motion_poses(args.motions, args.split)
        where = f"{count} motions"
    else:
        poses = RBMDataset(args.data, args.split).arrays["poses"]
        where = f"{args.data}"
    if len(poses) == 0:
        raise DataError(f"{args.data}: split {args.split!r} has no frames")
    prior = fit_pose_prior(
        poses, num_components=args.components, seed=args.seed, max_samples=args.max_samples
    )
    path = prior.save(args.out)
    print(
        f"{path}: {prior.num_components} components over {prior.dim} numbers, fitted on "
        f"{prior.num_samples} of {len(poses)} poses of {args.split!r} ({where}) "
        f"(mean log-likelihood {prior.log_likelihood:.2f} nats)",
        file=sys.stderr,
    )
    return 0
