"""The dataset recipe: how a dataset that does not exist yet is made.

A :class:`MotionRecipe` names the motions (procedural, and real clips retargeted from BVH
folders); :func:`make_dataset` writes them and synthesises the dataset from them with a body,
a marker set, a realism preset and a frame rate, through the same
:func:`~rbmcap.dataset.build.synthesize_dataset` as ``rbmcap synth``. The Hydra data config
(``conf/data``) describes a recipe (``data.generate``), which
:meth:`rbmcap.training.data.RBMDataModule.prepare_data` makes.

A dataset records what it cannot be told apart by: the procedural body-shape spread
(:data:`RECIPE_RECORD`) and, in its manifest, the marker set (:func:`check_marker_set`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from rbmcap.body import load_body_model
from rbmcap.dataset.build import synthesize_dataset
from rbmcap.dataset.manifest import Manifest
from rbmcap.dataset.synth_options import SynthOptions
from rbmcap.errors import ConfigError, DataError
from rbmcap.markers.markerset import MarkerSet, load_marker_set
from rbmcap.motion.folder import build_motion_folder
from rbmcap.motion.procedural.library import (
    DATASET_NAME,
    LIBRARY_RECORD,
    SHAPE_CLIP,
    SHAPE_STD,
    generate_library,
)

log = logging.getLogger("rbmcap.train")


@dataclass(frozen=True)
class MotionRecipe:
    """How to make the motions of a dataset that does not exist yet: ``num`` procedural motions
    (master ``seed``, ``subjects`` body shapes, 0 for automatic) written to ``motions_dir`` (reused
    when it already holds motions), and real motion from the BVH folders of ``bvh`` added beside
    them. ``seed`` also seeds the synthesis.

    Each ``bvh`` entry is a mapping: ``dir`` (a folder of clips, e.g. CMU on the iClone rig),
    ``joint_map`` (e.g. ``iclone_cc``; default ``auto``), optionally ``subject_pattern`` (a
    regular expression whose ``subject`` group names the unit a split holds out, for clips that
    name no actor) and ``splits`` (subject → val/test; other subjects train), retargeted with
    :func:`rbmcap.motion.folder.build_motion_folder` into ``motions_dir/<dir name>/`` and merged
    into the split lists.

    ``shape`` spreads the procedural body shapes (``std``, ``clip`` of
    :func:`rbmcap.motion.procedural.sample_betas`; default 0.8 and 2). The folder names do not
    carry it, so the motions and the dataset record it and refuse a recipe asking another.

    ``workers`` processes make the procedural motions and synthesise the dataset; the data are
    the same for any count, so it is in no folder name.
    """

    motions_dir: str | Path
    num: int
    seed: int
    subjects: int
    bvh: Sequence[Mapping[str, Any]]
    shape: Mapping[str, float] | None = None
    workers: int = 1

    def shape_spread(self) -> dict[str, float]:
        """``shape`` with its defaults filled in: {"std": ..., "clip": ...}."""
        given = dict(self.shape or {})
        unknown = sorted(set(given) - {"std", "clip"})
        if unknown:
            raise ConfigError(f"data.generate.shape: unknown key(s) {', '.join(unknown)}")
        return {
            "std": float(given.get("std", SHAPE_STD)),
            "clip": float(given.get("clip", SHAPE_CLIP)),
        }


RECIPE_RECORD = "recipe.json"
"""The procedural shape spread a dataset was made with, beside its ``manifest.json``."""


def check_shape_record(record: Path, wanted: Mapping[str, float], what: str) -> None:
    """ConfigError when the JSON ``record`` (a missing one: the defaults, which were the only
    spread before it was recorded) names a shape spread other than ``wanted``."""
    made = {"std": SHAPE_STD, "clip": SHAPE_CLIP}
    if record.is_file():
        made = json.loads(record.read_text()).get("shape", made)
    if any(abs(float(made[k]) - float(wanted[k])) > 1e-9 for k in ("std", "clip")):
        raise ConfigError(
            f"{what}: made with body shapes of std {made['std']} clipped to ±{made['clip']}, "
            f"but data.generate.shape asks std {wanted['std']} clipped to ±{wanted['clip']}; "
            "give data.path and data.generate.motions_dir new folders"
        )


def make_dataset(
    path: Path,
    recipe: MotionRecipe,
    *,
    body: str,
    markers: str | Mapping[str, Any],
    realism: str,
    fps: float,
) -> None:
    """Write into ``path`` the dataset synthesised from the motions ``recipe`` describes, on
    ``body`` with the marker set ``markers`` (a name, path or parsed mapping) and the ``realism``
    preset at ``fps`` Hz (logging each step)."""
    body_model = load_body_model(body)
    motions = Path(recipe.motions_dir)
    # Generation must not move the global RNGs: training numerics are the same whether or not
    # this run had to make its data.
    with torch.random.fork_rng(devices=[]):
        add_procedural_motions(motions, recipe, fps, body_model)
        for source in recipe.bvh:
            add_bvh_motions(motions, source, fps, body_model, recipe.workers)
        name = markers if isinstance(markers, str) else markers.get("name")
        log.info(
            "generating dataset %s: synthesising %s (markers %s, realism %s)",
            path,
            motions,
            name,
            realism,
        )
        splits = motions / "splits"
        synthesize_dataset(
            SynthOptions(
                motions=motions,
                out=path,
                body=body,
                markers=markers,
                realism=realism,
                fps=fps,
                seed=recipe.seed,
                progress=False,
                split_lists=splits if splits.is_dir() else None,
                workers=recipe.workers,
            ),
            body=body_model,
        )
    (path / RECIPE_RECORD).write_text(json.dumps({"shape": recipe.shape_spread()}) + "\n")


def add_procedural_motions(motions: Path, recipe: MotionRecipe, fps: float, body) -> None:
    """Generate the ``recipe``'s procedural motions at ``fps`` Hz on ``body`` into ``motions``
    unless it already holds motions (see :class:`MotionRecipe`)."""
    shape = recipe.shape_spread()
    if motions.is_dir() and any(motions.rglob("*.npz")):
        if recipe.num > 0 and (motions / DATASET_NAME).is_dir():
            check_shape_record(motions / DATASET_NAME / LIBRARY_RECORD, shape, str(motions))
        return
    log.info(
        "generating %d procedural motions into %s (seed %d)",
        recipe.num,
        motions,
        recipe.seed,
    )
    generate_library(
        motions,
        recipe.num,
        recipe.seed,
        fps=fps,
        num_subjects=recipe.subjects or None,
        shape_std=shape["std"],
        shape_clip=shape["clip"],
        body=body,
        workers=recipe.workers,
    )


def add_bvh_motions(
    motions: Path, source: Mapping[str, Any], fps: float, body, workers: int = 1
) -> None:
    """Retarget the BVH folder ``source['dir']`` into ``motions`` unless it is there already
    (see :class:`MotionRecipe`), with ``workers`` processes."""
    folder = Path(str(source["dir"]))
    if not folder.is_dir():
        raise DataError(f"{folder}: no such folder of BVH clips (data.generate.bvh)")
    if (motions / folder.name).is_dir():
        return
    log.info(
        "retargeting the BVH clips of %s into %s (joint map %s)",
        folder,
        motions,
        source.get("joint_map") or "auto",
    )
    splits = {str(k): str(v) for k, v in dict(source.get("splits") or {}).items()}
    lists = build_motion_folder(
        folder,
        motions,
        str(source.get("joint_map") or "auto"),
        splits=splits,
        fps=fps,
        body=body,
        subject_pattern=source.get("subject_pattern"),
        workers=workers,
    )
    log.info("real motion: %s", ", ".join(f"{k} {len(v)}" for k, v in lists.items()))


def check_marker_set(path: Path, markers: MarkerSet) -> None:
    """Refuse a dataset made with another marker set, or another definition of the same name
    (e.g. a ``markers.*`` override on the command line)."""
    made = dict(Manifest.load(path).config.get("markers", {}))
    made.pop("vertex_ids", None)
    if made.get("name") != markers.name:
        raise ConfigError(
            f"{path} was made with marker set {made.get('name')!r}, "
            f"the config asks for {markers.name!r}"
        )
    if load_marker_set(made).fingerprint != markers.fingerprint:
        raise ConfigError(
            f"{path} was made with another definition of marker set {markers.name!r} than the "
            "configured one (a markers.* override?); give the changed set its own name or "
            "data.path"
        )
