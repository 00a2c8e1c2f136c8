"""``rbmcap baseline``: the optimisation baseline's tools (``fit-prior``)."""

from __future__ import annotations

import argparse
import sys

from rbmcap.errors import DataError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "baseline",
        help="optimisation baseline tools",
        description="Tools of the optimisation baseline (design §7).",
    )
    tools = p.add_subparsers(dest="tool", metavar="TOOL", required=True)
    f = tools.add_parser(
        "fit-prior",
        help="fit the Gaussian-mixture pose prior on a dataset split",
        description=(
            "Fit a Gaussian mixture (full covariances, EM) to the body poses (axis-angle of joints "
            "1..23) of one split of a synthesised dataset, and write it as .npz for the solver."
        ),
    )
    f.add_argument("--data", required=True, help="dataset folder (holding manifest.json)")
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
    from rbmcap.baseline.prior import fit_pose_prior
    from rbmcap.dataset import RBMDataset

    data = RBMDataset(args.data, args.split)
    poses = data.arrays["poses"]
    if len(poses) == 0:
        raise DataError(f"{args.data}: split {args.split!r} has no frames")
    prior = fit_pose_prior(
        poses, num_components=args.components, seed=args.seed, max_samples=args.max_samples
    )
    path = prior.save(args.out)
    print(
        f"{path}: {prior.num_components} components over {prior.dim} numbers, fitted on "
        f"{prior.num_samples} of {len(poses)} poses of {args.split!r} "
        f"(mean log-likelihood {prior.log_likelihood:.2f} nats)",
        file=sys.stderr,
    )
    return 0
