"""The procedural motion library: a registry of kinds, one motion per seed, and whole AMASS-like
folders of them with split lists.

Folder layout (as AMASS): ``OUT/Procedural/S{k:02d}/{kind}_{i:04d}_poses.npz``, one subject
folder per body shape with its ``shape.npz``, and ``OUT/splits/{train,val,test}.txt`` assigning
whole subjects to splits (so test bodies are unseen), readable by
``rbmcap.motion.amass.discover(OUT, split_lists=OUT / "splits")``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from rbmcap.atomic import write_text_atomic
from rbmcap.body.pool import check_workers, map_with_body
from rbmcap.errors import ConfigError
from rbmcap.motion.amass import merge_split_lists
from rbmcap.motion.kinematics import MotionKinematics, standin_body
from rbmcap.motion.limits import JointLimits
from rbmcap.motion.procedural import explore, gait, stationary
from rbmcap.motion.procedural.base import Built, ground_and_plant, settle_height
from rbmcap.motion.procedural.footlock import lock_feet
from rbmcap.motion.smpl_motion import SMPLMotion

Generator = Callable[[np.random.Generator, float, MotionKinematics], Built]

KINDS: dict[str, Generator] = {
    "walk": gait.walk,
    "run": gait.run,
    "walk_turn": gait.walk_turn,
    "turn_in_place": gait.turn_in_place,
    "squat": stationary.squat,
    "arm_raise": stationary.arm_raise,
    "reach": stationary.reach,
    "jumping_jack": stationary.jumping_jack,
    "bend": stationary.bend,
    "kick": stationary.kick,
    "explore": explore.explore,
}
"""Every procedural motion kind, by name."""

GAIT_KINDS = ("walk", "run", "walk_turn", "turn_in_place")
DATASET_NAME = "Procedural"
NUM_STORED_BETAS = 16  # as AMASS's SMPL+H files
SHAPE_STD = 0.8
SHAPE_CLIP = 2.0
LIBRARY_RECORD = "library.json"
"""What :func:`generate_library` was asked, written into its ``Procedural`` folder."""


def sample_betas(
    rng: np.random.Generator,
    num_betas: int,
    *,
    std: float = SHAPE_STD,
    clip: float = SHAPE_CLIP,
) -> np.ndarray:
    """A body shape: the model's betas ~ N(0, ``std``²) clipped to ±``clip``, padded to 16.

    The defaults (0.8, ±2) keep to plausible adult proportions of the stand-in; wider spreads
    reach the shapes of docs/history.md "Body shapes beyond the training range".
    """
    if not (std >= 0.0 and clip > 0.0):
        raise ConfigError(f"shape spread must have std >= 0 and clip > 0, got {std} and {clip}")
    betas = np.zeros(max(NUM_STORED_BETAS, num_betas))
    betas[:num_betas] = np.clip(rng.normal(0.0, std, num_betas), -clip, clip)
    return betas


def generate(
    kind: str,
    seed: int,
    *,
    fps: float = 60.0,
    betas: np.ndarray | None = None,
    body=None,
    name: str | None = None,
    limits: JointLimits | None = None,
) -> SMPLMotion:
    """One procedural motion of ``kind``; the same arguments give the same motion.

    Args:
        kind: a key of :data:`KINDS`.
        seed: the random seed (speeds, durations, amplitudes, and the shape if not given).
        fps: frame rate.
        betas: body shape; default a random one drawn from the seed.
        body: the body model that stands the motion on the floor; default the stand-in.
        name: motion name; default ``{kind}_{seed}``.
        limits: joint limits to clip to; default ``conf/motion/joint_limits.yaml``.
    """
    if kind not in KINDS:
        raise ConfigError(f"unknown motion kind {kind!r}; expected one of {', '.join(KINDS)}")
    rng = np.random.default_rng(seed)
    body = body if body is not None else standin_body()
    if betas is None:
        betas = sample_betas(rng, body.num_betas)
    kin = MotionKinematics(body, betas)
    limits = limits or JointLimits.load()
    built = KINDS[kind](rng, fps, kin)
    poses = limits.clip(built.track.rotvecs())
    if built.trans is not None:
        trans = settle_height(poses, built.trans, kin, built.stance)
    else:
        trans = ground_and_plant(poses, kin, built.flight, fps)
        poses = limits.clip(lock_feet(poses, trans, kin, fps))
        trans = ground_and_plant(poses, kin, built.flight, fps)
    return SMPLMotion(
        poses=poses,
        trans=trans,
        betas=betas,
        gender=getattr(body, "gender", "neutral"),
        fps=fps,
        name=name or f"{kind}_{seed}",
        source={
            "generator": "rbmcap.motion.procedural",
            "kind": kind,
            "seed": int(seed),
            "params": {k: _plain(v) for k, v in built.params.items()},
        },
    )


def generate_library(
    out: str | Path,
    num: int,
    seed: int,
    *,
    kinds: Sequence[str] | None = None,
    fps: float = 60.0,
    num_subjects: int | None = None,
    shape_std: float = SHAPE_STD,
    shape_clip: float = SHAPE_CLIP,
    body=None,
    progress: Callable[[int, int, Path], None] | None = None,
    workers: int = 1,
) -> list[Path]:
    """Write ``num`` motions cycling through ``kinds`` into an AMASS-like folder.

    Args:
        out: the output root.
        num: number of motions.
        seed: master seed; each motion's own seed and each subject's shape derive from it.
        kinds: kinds to cycle through (default all, in :data:`KINDS` order).
        fps: frame rate of the files.
        num_subjects: body shapes to spread the motions over (default ``max(1, num // 4)``,
            at most 50; at most ``num``). Whole subjects go to one split, so a network learns
            body shape from the training subjects only: give it many to generalise.
        shape_std, shape_clip: each subject's betas ~ N(0, ``shape_std``²) clipped to
            ±``shape_clip`` (:func:`sample_betas`).
        body: body model (default the stand-in).
        progress: called with (index, num, path) after each file, in order.
        workers: processes that make the motions (spawned, each loading ``body`` again from its
            ``source``); every motion depends only on its own seed, so the files are the same
            for any count.

    Returns:
        The written motion files, in order.
    """
    kinds = _checked_kinds(kinds, num, num_subjects, workers)
    out = Path(out)
    body = body if body is not None else standin_body()
    n_subj = num_subjects or min(50, max(1, num // 4))
    shape = {"std": float(shape_std), "clip": float(shape_clip)}
    subject_betas, motion_seeds, subject_of, splits = _draw_plan(
        seed, num, n_subj, body.num_betas, shape
    )
    _write_shapes(out / DATASET_NAME, subject_betas, body)
    _write_record(out / DATASET_NAME, num=num, seed=seed, subjects=n_subj, shape=shape)
    work = [
        (out, kinds[i % len(kinds)], i, int(motion_seeds[i]), int(s), subject_betas[s], fps)
        for i, s in enumerate(subject_of)
    ]
    lists = {"train": [], "val": [], "test": []}
    for _, kind, i, _, s, _, _ in work:
        lists[splits[s]].append(_relative_path(kind, i, s))
    written = []
    for i, path in enumerate(map_with_body(_make_motion, work, body, workers)):
        written.append(path)
        if progress:
            progress(i, num, path)
    merge_split_lists(out / "splits", DATASET_NAME, lists)
    return written


@functools.cache
def _limits() -> JointLimits:
    return JointLimits.load()


def _relative_path(kind: str, i: int, subject: int) -> str:
    return f"{DATASET_NAME}/S{subject:02d}/{kind}_{i:04d}_poses.npz"


def _make_motion(job, body) -> Path:
    """Write one planned motion (``job``: folder, kind, index, seed, subject, betas, fps)."""
    out, kind, i, seed, s, betas, fps = job
    name = f"{kind}_{i:04d}"
    motion = generate(kind, seed, betas=betas, name=name, fps=fps, body=body, limits=_limits())
    motion.source["subject"] = f"S{s:02d}"
    return motion.save(out / _relative_path(kind, i, s))


def _write_record(root: Path, **record) -> None:
    """Write the library's recipe (count, seed, subjects, shape spread) beside its shapes."""
    write_text_atomic(root / LIBRARY_RECORD, json.dumps(record, indent=1) + "\n")


def _checked_kinds(
    kinds: Sequence[str] | None, num: int, num_subjects: int | None, workers: int = 1
) -> list[str]:
    """The kinds to cycle through, after checking :func:`generate_library`'s arguments."""
    kinds = list(kinds) if kinds else list(KINDS)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        raise ConfigError(
            f"unknown motion kind(s) {', '.join(unknown)}; expected {', '.join(KINDS)}"
        )
    if num < 1:
        raise ConfigError(f"num must be at least 1, got {num}")
    if num_subjects is not None and not 1 <= num_subjects <= num:
        raise ConfigError(f"num_subjects must be between 1 and num ({num}), got {num_subjects}")
    check_workers(workers)
    return kinds


def _draw_plan(seed: int, num: int, n_subj: int, num_betas: int, shape: dict[str, float]):
    """From the master seed, in this order: each subject's betas (``shape``: ``std``, ``clip``),
    each motion's seed, each motion's subject and each subject's split."""
    master = np.random.default_rng(seed)
    subject_betas = [sample_betas(master, num_betas, **shape) for _ in range(n_subj)]
    motion_seeds = master.integers(0, 2**31 - 1, size=num)
    subject_of = master.permutation(np.arange(num) % n_subj)
    return subject_betas, motion_seeds, subject_of, _subject_splits(n_subj, master)


def _subject_splits(n: int, rng: np.random.Generator) -> list[str]:
    """Whole subjects to splits: about 80/10/10, each of val and test non-empty from 3 up."""
    n_val = n_test = max(1, round(0.1 * n)) if n >= 3 else 0
    order = rng.permutation(n)
    split = ["train"] * n
    for k in order[:n_val]:
        split[k] = "val"
    for k in order[n_val : n_val + n_test]:
        split[k] = "test"
    return split


def _write_shapes(root: Path, subject_betas: list[np.ndarray], body) -> None:
    """One folder per subject, ``root/S{k:02d}``, holding its ``shape.npz``."""
    for s, betas in enumerate(subject_betas):
        folder = root / f"S{s:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        _save_shape(folder / "shape.npz", betas, body)


def _save_shape(path: Path, betas: np.ndarray, body) -> None:
    # AMASS keeps each subject's shape next to its sequences.
    with open(path, "wb") as fh:
        np.savez_compressed(fh, betas=betas, gender=np.array(getattr(body, "gender", "neutral")))


def _plain(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
