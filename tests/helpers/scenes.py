"""A synthetic capture session with known truth: the stand-in body holds a T-pose, then walks.

The ``realistic`` realism preset (placement, soft tissue, noise, gaps) perturbs the plates, and
random physical offsets (up to 3 cm, 15°) are applied on top: ``R_phys = R R_off``,
``p_phys = p + R t_off``. Relative to the clean virtual plates, the true offset is then the
placement composed with the applied one (both are constant plate-frame offsets of one form).
Used by the calibration tests and the capture round trip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import roma
import torch

FPS = 60.0


@dataclass
class Session:
    """What was captured and what is true.

    Attributes:
        body: the stand-in body model; betas: (B,) the subject's shape.
        poses: (T, 24, 3) true axis-angle poses; trans: (T, 3) m.
        synth: a clean :class:`Synthesizer` (rbm14, no realism); real: the realistic one.
        capture: the physical plates as a :class:`~rbmcap.io.capture.Capture` (float64).
        ideal: clean virtual plates (Observations); observed: realistic plates before offsets.
        pert: the realism draw; offsets: (R_off (N, 3, 3), t_off (N, 3) m) applied on top.
    """

    body: object
    betas: np.ndarray
    poses: np.ndarray
    trans: np.ndarray
    synth: object
    real: object
    capture: object
    ideal: object
    observed: object
    pert: object
    offsets: tuple


def random_offsets(n: int, rng) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotations up to 15° about random axes, positions up to 3 cm (uniform in a ball)."""
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    angle = np.deg2rad(rng.uniform(0.0, 15.0, (n, 1)))
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    t = direction * 0.03 * rng.uniform(0.0, 1.0, (n, 1)) ** (1 / 3)
    return roma.rotvec_to_rotmat(torch.as_tensor(axis * angle)), torch.as_tensor(t)


def tpose_then_walk(
    tpose: int = 120,
    walk: int = 120,
    *,
    walk_seed: int = 0,
    seed: int = 0,
    key: str = "calib",
    offsets_seed: int = 13,
) -> Session:
    """``tpose`` frames of T-pose (zero body pose, the walk's first root orientation and
    position), then ``walk`` frames of a procedural walk, at 60 Hz; see the module docstring."""
    from rbmcap.body import load_body_model
    from rbmcap.io.capture import Capture
    from rbmcap.markers.synth import Synthesizer
    from rbmcap.motion.procedural import generate

    body = load_body_model("standin")
    m = generate("walk", seed=walk_seed, body=body)
    hold = np.zeros((tpose, 24, 3), np.float32)
    hold[:, 0] = m.poses[0, 0]
    poses = np.concatenate([hold, m.poses[:walk]])
    trans = np.concatenate([np.repeat(m.trans[:1], tpose, 0), m.trans[:walk]])
    real = Synthesizer(body, "rbm14", "realistic")
    obs = real(poses, trans, m.betas, fps=FPS, seed=seed, key=key)
    clean = Synthesizer(body, "rbm14")
    ideal = clean(poses, trans, m.betas, fps=FPS)
    r_off, t_off = random_offsets(len(real.markers), np.random.default_rng(offsets_seed))
    rot = torch.as_tensor(obs.rot, dtype=torch.float64)
    r_phys = rot @ r_off
    p_phys = torch.as_tensor(obs.pos, dtype=torch.float64) + (rot @ t_off[..., None])[..., 0]
    capture = Capture(
        fps=FPS,
        names=list(real.markers.names),
        pos=p_phys.numpy(),
        rot=r_phys.numpy(),
        valid=obs.valid,
    )
    pert = real.perturbation(len(poses), FPS, seed, key)
    return Session(
        body=body,
        betas=m.betas,
        poses=poses,
        trans=trans,
        synth=clean,
        real=real,
        capture=capture,
        ideal=ideal,
        observed=obs,
        pert=pert,
        offsets=(r_off, t_off),
    )
