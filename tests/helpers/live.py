"""Live-capture test helpers: a synthetic take, sinks that keep what they get, and the offline
causal answer every streamed pose must equal."""

from __future__ import annotations

import time

import numpy as np
import torch

from rbmcap.io.capture import Capture


def synthetic_take(frames: int = 480, fps: float = 240.0, seed: int = 0) -> Capture:
    """rbm14 plates of a procedural walk on the stand-in (realistic noise), as a capture."""
    from rbmcap.bench.infer import sample_observations
    from rbmcap.markers.markerset import load_marker_set

    obs, *_ = sample_observations(frames, seed=seed)
    names = list(load_marker_set("rbm14").names)
    return Capture(
        fps=fps, names=names, pos=obs.pos, rot=obs.rot, valid=obs.valid, source="synthetic"
    )


def prefixed(capture: Capture, subjects: list[str]) -> Capture:
    """One capture holding ``capture``'s plates once per subject, named ``SUBJECT_plate``, each
    subject shifted 2 m along X from the one before."""
    _t, _n = capture.pos.shape[:2]
    pos = np.concatenate(
        [capture.pos + np.float32([2.0 * k, 0, 0]) for k in range(len(subjects))], 1
    )
    return Capture(
        fps=capture.fps,
        names=[f"{s}_{name}" for s in subjects for name in capture.names],
        pos=np.where(np.tile(capture.valid, (1, len(subjects)))[..., None], pos, 0.0),
        rot=np.concatenate([capture.rot] * len(subjects), 1),
        valid=np.tile(capture.valid, (1, len(subjects))),
        source="synthetic-subjects",
    )


class KeepingSink:
    """An inline sink keeping every pose (and, with ``delay_s``, slow to return)."""

    def __init__(self, delay_s: float = 0.0, inline: bool = True) -> None:
        self.name, self.inline, self.delay_s = "keeping", inline, delay_s
        self.poses: list = []
        self.opened = self.closed = 0

    def open(self, subjects, stats) -> None:
        self.subjects, self.stats = subjects, stats
        self.opened += 1

    def send(self, pose) -> None:
        self.poses.append(pose)
        if self.delay_s:
            time.sleep(self.delay_s)

    def close(self) -> None:
        self.closed += 1


def offline_answer(predictor, pos, rot, valid, frames, phases: int) -> dict:
    """{frame number: (rotmats (24, 3, 3), trans (3,))}: the causal model run offline, per phase,
    on the frames numbered ``frames`` (indices into the arrays), the phase being frame mod
    ``phases``."""
    frames = np.asarray(frames)
    out = {}
    for phase in range(phases):
        idx = frames[frames % phases == phase]
        if not len(idx):
            continue
        with torch.no_grad():
            ans = predictor.model(*(torch.as_tensor(x[idx])[None] for x in (pos, rot, valid)))
        for k, f in enumerate(idx):
            out[int(f)] = (ans["rotmats"][0, k].numpy(), ans["trans"][0, k].numpy())
    return out


def max_difference(poses, answer: dict) -> float:
    """Largest |streamed − offline| over the poses' rotation matrices and translations."""
    worst = 0.0
    for pose in poses:
        r, t = answer[pose.frame]
        worst = max(
            worst, float(np.abs(pose.rotmats - r).max()), float(np.abs(pose.trans - t).max())
        )
    return worst
