"""Model files the tests write themselves: SMPL-H variants and chumpy-style pickles."""

from __future__ import annotations

import numpy as np

from rbmcap.body.standin.build import build_standin
from rbmcap.skeleton import SMPLH_PARENTS


def smplh_arrays(num_betas: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    """An SMPL-H-format body (52 joints, ``num_betas`` betas) made from the stand-in.

    All finger joints of a hand sit at the stand-in's hand joint; the stand-in's hand skinning
    and pose correctives go to the index fingers' first joints (SMPL-H's 22 and 37), which is
    how SMPL's 24 joints map onto SMPL-H's 52; the other finger joints get small random
    correctives. With the first 10 betas and 24-joint poses it is the stand-in.
    Arrays follow AMASS's SMPL+H ``.npz`` (no hand PCA keys).
    """
    base = build_standin()
    rng = np.random.default_rng(seed)
    nv = base["v_template"].shape[0]
    regressor = np.zeros((52, nv))
    regressor[:22] = base["J_regressor"][:22]
    weights = np.zeros((nv, 52))
    weights[:, :22] = base["weights"][:, :22]
    for hand, first in ((22, 22), (23, 37)):
        for k in range(15):
            regressor[first + k] = base["J_regressor"][hand]
        weights[:, first] = base["weights"][:, hand]
    extra = rng.normal(scale=0.01, size=(nv, 3, max(num_betas - 10, 0)))
    shapedirs = np.concatenate([base["shapedirs"], extra], axis=-1)[..., :num_betas]
    # Pose correctives in SMPL-H's layout (features (R_j − I) for joints 1..51): the stand-in's
    # own for the body and the two hand joints (so on SMPL's 24 joints this body poses exactly
    # like the stand-in), and small random ones for the other finger joints.
    posedirs = rng.normal(scale=0.002, size=(nv, 3, 9 * 51))
    posedirs[..., : 9 * 21] = base["posedirs"][..., : 9 * 21]
    for hand, first in ((22, 22), (23, 37)):
        posedirs[..., 9 * (first - 1) : 9 * first] = base["posedirs"][
            ..., 9 * (hand - 1) : 9 * hand
        ]
    kintree = np.array([[2**32 - 1, *SMPLH_PARENTS[1:]], list(range(52))], dtype=np.int64)
    out = {
        "v_template": base["v_template"],
        "f": base["f"],
        "weights": weights,
        "J_regressor": regressor,
        "kintree_table": kintree,
        "shapedirs": shapedirs,
        "posedirs": posedirs,
    }
    return out


def walk_plates(body, frames: int, names):
    """``frames`` of realistic rbm14 plates of a procedural walk (seed 0) with extra gaps (plate 3
    hidden in frames 10–16, plate 5 every seventh frame), as float64 ``(names, pos, rot, valid)``;
    ``names(k)`` names plate k. The test writers' round trips start from these."""
    import numpy as np

    from rbmcap.markers.synth import Synthesizer
    from rbmcap.motion.procedural import generate

    m = generate("walk", seed=0, body=body)
    obs = Synthesizer(body, "rbm14", "realistic")(
        m.poses[:frames], m.trans[:frames], m.betas, fps=m.fps, key="t"
    )
    valid = obs.valid.copy()
    valid[10:17, 3] = False
    valid[:, 5] &= np.arange(frames) % 7 != 0
    labels = [names(k) for k in range(obs.pos.shape[1])]
    return labels, obs.pos.astype(np.float64), obs.rot.astype(np.float64), valid
