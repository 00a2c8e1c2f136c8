"""``rbmcap bench skinning``: full smplx forward vs sparse skinning of the rbm14 marker vertices.

Both run in this process on the same random poses and shapes (batch 1024, or 128 with
``quick``; no autograd), each timed as the best of several interleaved rounds; the sparse side
skins the 14 reference marker vertices of the stand-in and their one-rings, which is what plate
synthesis and marker losses need. ``rbmcap demo`` reports this measurement at the full batch
with fewer rounds (``repeats``).
"""

from __future__ import annotations

import torch

from rbmcap.bench.timing import best_seconds
from rbmcap.body import load_body_model
from rbmcap.markers.markerset import DEFAULT_MARKERS, load_marker_set

BATCH = 1024
QUICK_BATCH = 128


def run(quick: bool = False, model: str = "standin", repeats: int | None = None) -> dict:
    """Full forward against sparse skinning of ``model``'s rbm14 marker vertices: ms per frame
    of each (best of ``repeats`` rounds; None: 3 with ``quick``, else 15), the speed-up and the
    largest difference of the sparse vertices (m)."""
    body = load_body_model(model)
    markers = load_marker_set(DEFAULT_MARKERS)
    ids = body.with_one_rings(markers.resolve(body))
    batch = QUICK_BATCH if quick else BATCH
    gen = torch.Generator().manual_seed(0)
    poses = 0.3 * torch.randn(batch, 24, 3, generator=gen)
    betas = torch.randn(batch, body.num_betas, generator=gen)
    trans = torch.randn(batch, 3, generator=gen)
    if repeats is None:
        repeats = 3 if quick else 15
    with torch.no_grad():
        times = best_seconds(
            {
                "full": lambda: body(poses, betas, trans),
                "sparse": lambda: body.skin_vertices(ids, poses, betas, trans),
            },
            repeats,
        )
        full, sparse = times["full"], times["sparse"]
        dense = body(poses, betas, trans).vertices[:, ids]
        err = (dense - body.skin_vertices(ids, poses, betas, trans)).abs().max()
    return {
        "model": body.identity,
        "batch": batch,
        "repeats": repeats,
        "num_vertices": body.num_vertices,
        "sparse_vertices": len(ids),
        "full_ms_per_frame": 1e3 * full / batch,
        "sparse_ms_per_frame": 1e3 * sparse / batch,
        "speedup": full / sparse,
        "max_abs_difference_m": float(err),
    }
