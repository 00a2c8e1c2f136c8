"""Synthesising a motion folder into a dataset: the engine behind ``rbmcap synth``.

Motions are discovered and ordered (split, then path), optionally cut into a shard, and each is
synthesised into a part by one of ``workers`` processes (:mod:`rbmcap.dataset.store` for the
on-disk protocol). Unusable files are skipped and named. Realism draws depend only on the seed and
the sequence name, so workers, shards and resumption never change a byte of the result.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from rbmcap.body.load import load_body_model
from rbmcap.dataset.manifest import FORMAT_VERSION, Manifest, SequenceEntry, array_tails
from rbmcap.dataset.npyio import file_sha256
from rbmcap.dataset.sources import MotionJob, discover_jobs, load_motion, shard_jobs
from rbmcap.dataset.store import DatasetWriter
from rbmcap.dataset.synth_options import SynthOptions
from rbmcap.errors import ConfigError, DataError, RBMCapError
from rbmcap.markers.markerset import MarkerSet, load_marker_set
from rbmcap.markers.plates import PLATE_STANDOFF
from rbmcap.markers.realism import RealismConfig, load_realism
from rbmcap.markers.synth import Synthesizer

SYNTH_VERSION = 1
"""Bump when the synthesis maths change, so old outputs are not mixed with new ones."""


@dataclass
class SynthReport:
    """What a run did: the manifest, and how many sequences it made, reused and skipped."""

    manifest: Manifest
    made: int = 0
    reused: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    up_to_date: bool = False


def body_fingerprint(body) -> str:
    """Short hash of a body's rest mesh, faces, skinning weights and rest joints."""
    h = hashlib.sha256()
    for arr in (body.v_template, body.faces, body.lbs_weights, body.rest_joints()):
        h.update(np.ascontiguousarray(arr.detach().cpu().numpy()).tobytes())
    return h.hexdigest()[:16]


def synth_config(
    body, markers: MarkerSet, vertex_ids: np.ndarray, realism: RealismConfig, fps: float, seed: int
) -> dict[str, Any]:
    """The configuration recorded in a manifest; its hash guards an output folder."""
    return {
        "format_version": FORMAT_VERSION,
        "synth_version": SYNTH_VERSION,
        "body": {
            "id": body.identity,
            "fingerprint": body_fingerprint(body),
            "num_vertices": int(body.num_vertices),
            "num_betas": int(body.num_betas),
        },
        "markers": {**markers.to_dict(), "vertex_ids": [int(v) for v in vertex_ids]},
        "realism": realism.to_dict(),
        "fps": float(fps),
        "seed": int(seed),
        "standoff_m": PLATE_STANDOFF,
    }


# ------------------------------------------------------------------------ per-sequence work
_WORKER: dict[str, Any] = {}


def _init_worker(body_spec: str, gender: str, markers, realism, threads: int) -> None:
    torch.set_num_threads(threads)
    _WORKER["synth"] = Synthesizer(load_body_model(body_spec, gender=gender), markers, realism)


def _sequence_blocks(
    synth: Synthesizer, motion, seed: int, key: str
) -> Iterator[dict[str, np.ndarray]]:
    nb = int(synth.body.num_betas)
    betas = np.zeros(nb, np.float32)
    b = np.asarray(motion.betas, np.float32)[:nb]
    betas[: b.size] = b
    poses = np.asarray(motion.poses, np.float32)
    trans = np.asarray(motion.trans, np.float32)
    for start, obs in synth.chunks(poses, trans, betas, fps=motion.fps, seed=seed, key=key):
        stop = start + len(obs)
        yield {
            "poses": poses[start:stop],
            "betas": np.broadcast_to(betas, (stop - start, nb)),
            "trans": trans[start:stop],
            "joints": obs.joints,
            "rbm_pos": obs.pos,
            "rbm_rot": obs.rot,
            "rbm_valid": obs.valid,
        }


def make_part(
    writer: DatasetWriter, job: MotionJob, fps: float, seed: int, synth: Synthesizer | None = None
) -> tuple[str, Any]:
    """Synthesise one job into its part, unless a finished part from the same file exists.

    Returns:
        ('made' | 'reused', entry) or ('skipped', reason).
    """
    synth = synth or _WORKER["synth"]
    try:
        digest = file_sha256(job.path)
    except OSError as exc:
        return "skipped", f"unreadable ({exc.strerror or exc})"
    done = writer.finished_part(job.split, job.source, digest)
    if done is not None:
        return "reused", done
    try:
        motion = load_motion(job, fps)
        entry = SequenceEntry(
            name=job.name,
            source=job.source,
            split=job.split,
            frames=motion.num_frames,
            offset=0,
            fps=float(motion.fps),
            checksum="",
            input_sha256=digest,
        )
        return "made", writer.write_part(entry, _sequence_blocks(synth, motion, seed, job.name))
    except (RBMCapError, OSError) as exc:  # an unusable input, not a bug: skip and name it
        return "skipped", str(exc).replace(str(job.path), job.source).removeprefix(
            f"{job.source}: "
        )


# ------------------------------------------------------------------------------ the run
def synthesize_dataset(
    options: SynthOptions,
    *,
    body=None,
    on_skip: Callable[[str, str], None] | None = None,
) -> SynthReport:
    """Synthesise every motion under ``options.motions`` into the dataset ``options.out``.

    Args:
        options: what to do.
        body: an already loaded body model to use in-process (default: load ``options.body``).
        on_skip: called with (source, reason) for each unusable motion file (default: a
            warning line on stderr).

    Raises:
        ConfigError: bad options, or ``out`` holds a dataset made with another configuration.
        DataError: no usable motion was found.
    """
    on_skip = on_skip or _warn_skip
    if body is None:
        body = load_body_model(options.body, gender=options.gender)
    markers = load_marker_set(options.markers)
    realism = load_realism(options.realism)
    synth = Synthesizer(body, markers, realism)
    config = synth_config(body, markers, synth.vertex_ids, realism, options.fps, options.seed)
    all_jobs = discover_jobs(options.motions, options.split_lists)
    jobs = all_jobs
    shard = None
    if options.shard is not None:
        index, count = options.shard
        jobs = shard_jobs(all_jobs, index, count)
        shard = {"index": index, "count": count, "total_sequences": len(all_jobs)}
    tails = array_tails(len(markers), int(body.num_betas))
    writer = DatasetWriter(options.out, config, tails, shard=shard)
    existing = writer.open()
    if existing is not None and not writer.work.exists():
        return _check_up_to_date(existing, jobs, options.out)
    if not jobs:
        raise DataError(f"{options.motions}: no motion files found (expected *_poses.npz files)")
    results = _run_jobs(writer, jobs, options, synth)
    entries, skipped, made, reused = [], [], 0, 0
    single_file = Path(options.motions).is_file()
    for job, (status, value) in zip(jobs, results, strict=True):
        if status == "skipped":
            skipped.append({"source": job.source, "reason": value})
            if not single_file:
                on_skip(job.source, value)
        else:
            entries.append(value)
            made += status == "made"
            reused += status == "reused"
    if not entries:
        if Path(options.motions).is_file():
            raise DataError(f"{options.motions}: {skipped[0]['reason']}")
        raise DataError(f"{options.motions}: none of the {len(jobs)} motion files was usable")
    manifest = writer.finalize(entries, skipped)
    return SynthReport(manifest=manifest, made=made, reused=reused, skipped=skipped)


def _run_jobs(
    writer: DatasetWriter, jobs: list[MotionJob], options: SynthOptions, synth: Synthesizer
) -> list[tuple[str, Any]]:
    results: list[tuple[str, Any] | None] = [None] * len(jobs)
    bar = tqdm(total=len(jobs), unit="seq", disable=not options.progress, file=sys.stderr)
    frames, t0 = 0, time.perf_counter()

    def done(i: int, result: tuple[str, Any]) -> None:
        nonlocal frames
        results[i] = result
        if result[0] == "made":
            frames += result[1].frames
        bar.update(1)
        bar.set_postfix(frames_per_s=f"{frames / max(time.perf_counter() - t0, 1e-9):.0f}")

    workers = max(1, int(options.workers))
    try:
        if workers == 1 or len(jobs) == 1:
            for i, job in enumerate(jobs):
                done(i, make_part(writer, job, options.fps, options.seed, synth))
        else:
            threads = max(1, (os.cpu_count() or 1) // workers)
            init = (
                _body_spec(synth.body, options),
                synth.body.gender,
                synth.markers,
                synth.realism,
                threads,
            )
            with ProcessPoolExecutor(
                workers, mp_context=get_context("spawn"), initializer=_init_worker, initargs=init
            ) as pool:
                futures = {
                    pool.submit(make_part, writer, job, options.fps, options.seed): i
                    for i, job in enumerate(jobs)
                }
                for fut in as_completed(futures):
                    done(futures[fut], fut.result())
    finally:
        bar.close()
    return results  # type: ignore[return-value]


def _body_spec(body, options: SynthOptions) -> str:
    return str(getattr(body, "source", "") or options.body)


def _check_up_to_date(existing: Manifest, jobs: list[MotionJob], out) -> SynthReport:
    done = {s.source: s.input_sha256 for s in existing.sequences}
    skipped = {s["source"] for s in existing.skipped}
    changed = {j.source for j in jobs} != set(done) | skipped or any(
        j.source in done and done[j.source] != file_sha256(j.path) for j in jobs
    )
    if changed:
        raise ConfigError(
            f"{out}: a complete dataset with this configuration exists but was made from other "
            f"motion files; use another output folder or delete it"
        )
    return SynthReport(manifest=existing, up_to_date=True)


def _warn_skip(source: str, reason: str) -> None:
    print(f"rbmcap: warning: skipped {source}: {reason}", file=sys.stderr)
