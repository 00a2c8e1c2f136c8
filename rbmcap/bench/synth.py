"""``rbmcap bench synth``: rbm14 synthesis speed (sparse vs dense) and memory at 10× the input.

- ``sparse_frames_per_s``: end-to-end in-memory synthesis on the stand-in (sparse skinning of the
  marker vertices and their one-rings, joints, plate frames), one motion of ``FRAMES`` frames
  with one shape, realism ``none``; best of several runs, at the better of one torch thread and
  the default thread count (both are reported).
- ``dense_frames_per_s``: the same outputs the dense way: full smplx forward of every vertex,
  then plate frames at the marker vertices, in batches of the synthesiser's chunk size (one
  chunk of frames is timed). ``speedup`` is the ratio of the two rates;
  ``max_abs_difference_m`` checks they agree. The dense forward runs faster in small batches
  (its per-frame intermediates then fit in cache), so ``dense_small_batch_frames_per_s`` (batches
  of ``SMALL_BATCH``) and ``speedup_vs_small_batch_dense`` are reported as well.
- Memory: ``rbmcap synth`` (the full pipeline: discovery, loading, synthesis, dataset store) is
  run in a fresh subprocess on a base input and on 10× as many frames (ten times the sequences).
  Each process loads the body, resets its resident-set high-water mark (Linux ``clear_refs``)
  and reports the peak resident set size during the run (``VmHWM``) and its growth over the
  resident size at the start. ``peak_memory_ratio`` = big peak / base peak.
  ``pipeline_frames_per_s_1thread`` is the whole pipeline's rate on the big input, disk
  included, in one process with one torch thread (``--workers N`` multiplies it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import torch

from rbmcap.bench.timing import best_seconds
from rbmcap.body import load_body_model
from rbmcap.markers.markerset import DEFAULT_MARKERS
from rbmcap.markers.plates import plate_frames
from rbmcap.markers.synth import CHUNK_FRAMES, Synthesizer

FRAMES = 16384
DENSE_FRAMES = CHUNK_FRAMES
SMALL_BATCH = 64
QUICK_FRAMES, QUICK_DENSE_FRAMES = 1024, 256
"""``quick`` (smoke tests): a few seconds of timing, the same figures, noisier."""


def _motion(frames: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    gen = np.random.default_rng(seed)
    poses = (0.3 * gen.standard_normal((frames, 24, 3))).astype(np.float32)
    trans = gen.standard_normal((frames, 3)).astype(np.float32)
    betas = gen.standard_normal(10).astype(np.float32)
    return poses, trans, betas


def speed(quick: bool = False) -> dict:
    """Sparse vs dense synthesis rates of rbm14 on the stand-in, in this process.

    Each side is timed with one torch thread and with the default count (all cores); the
    headline rates are each side's best. On a machine shared with other jobs, OpenMP threads
    can slow small tensor operations down many times over, and one thread then wins.
    """
    body = load_body_model("standin")
    synth = Synthesizer(body, DEFAULT_MARKERS)
    frames = QUICK_FRAMES if quick else FRAMES
    dense_frames = QUICK_DENSE_FRAMES if quick else DENSE_FRAMES
    poses, trans, betas = _motion(frames, 0)
    dense = _dense_synthesis(body, synth.topology, poses, trans, betas, dense_frames)
    runs = {
        "sparse": lambda: synth(poses, trans, betas),
        "dense": dense,
        "small": lambda: dense(SMALL_BATCH),
    }
    default_threads = torch.get_num_threads()
    try:
        with torch.inference_mode():
            repeats = 2 if quick else 7
            seconds = {n: _best_at(n, runs, repeats) for n in sorted({1, default_threads})}
            pos, _, joints = dense(dense_frames)  # one batch: every frame
            sparse = synth(poses[:dense_frames], trans[:dense_frames], betas)
    finally:
        torch.set_num_threads(default_threads)
    err = max(
        float(np.abs(pos.numpy() - sparse.pos).max()),
        float(np.abs(joints.numpy() - sparse.joints).max()),
    )
    sparse_fps = {n: frames / times["sparse"] for n, times in seconds.items()}
    dense_fps = {n: dense_frames / times["dense"] for n, times in seconds.items()}
    small_fps = {n: dense_frames / times["small"] for n, times in seconds.items()}
    best_sparse, best_dense = max(sparse_fps.values()), max(dense_fps.values())
    return {
        "model": body.identity,
        "markers": DEFAULT_MARKERS,
        "skinned_vertices": len(synth.topology.skin_ids),
        "num_vertices": int(body.num_vertices),
        "sparse_frames": frames,
        "dense_frames": dense_frames,
        "sparse_frames_per_s": best_sparse,
        "dense_frames_per_s": best_dense,
        "speedup": best_sparse / best_dense,
        "dense_small_batch_frames_per_s": max(small_fps.values()),
        "speedup_vs_small_batch_dense": best_sparse / max(small_fps.values()),
        "sparse_frames_per_s_by_threads": sparse_fps,
        "dense_frames_per_s_by_threads": dense_fps,
        "dense_small_batch_frames_per_s_by_threads": small_fps,
        "max_abs_difference_m": err,
    }


def _dense_synthesis(body, topo, poses, trans, betas, dense_frames: int):
    """``dense(batch)``: plate positions and rotations and the joints of the first
    ``dense_frames`` frames the dense way (full forward of every vertex), ``batch`` frames at
    a time; it returns the last batch's."""
    dp, dt, db = (torch.from_numpy(a) for a in (poses[:dense_frames], trans[:dense_frames], betas))
    skin_ids = torch.as_tensor(topo.skin_ids)

    def dense(batch: int = dense_frames):
        for start in range(0, dense_frames, batch):
            sl = slice(start, start + batch)
            out = body(dp[sl], db, dt[sl])
            pos, rot = plate_frames(out.vertices[:, skin_ids], topo)
        return pos, rot, out.joints

    return dense


def _best_at(threads: int, runs: dict, repeats: int) -> dict[str, float]:
    """Best seconds of each run with ``threads`` torch threads (left set)."""
    torch.set_num_threads(threads)
    return best_seconds(runs, repeats)


_MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys, time

    def status(key):
        with open("/proc/self/status") as fh:
            return next(int(l.split()[1]) for l in fh if l.startswith(key + ":"))

    import torch
    from rbmcap.body import load_body_model
    from rbmcap.dataset import SynthOptions, synthesize_dataset
    torch.set_num_threads(1)
    body = load_body_model("standin")
    loading_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    before = status("VmRSS")
    try:  # reset the high-water mark so it measures the run alone (Linux)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        reset = True
    except OSError:
        reset = False
    start = time.perf_counter()
    report = synthesize_dataset(
        SynthOptions(motions=sys.argv[1], out=sys.argv[2], progress=False), body=body
    )
    seconds = time.perf_counter() - start
    frames = sum(s.frames for s in report.manifest.sequences)
    run_peak = status("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kb": before, "run_peak_kb": run_peak, "loading_peak_kb":
                      loading_peak, "frames": frames, "seconds": seconds}))
    """
)


def _write_inputs(folder: Path, sequences: int, frames: int) -> None:
    """``sequences`` motion files of ``frames`` frames (hard links to a few distinct motions)."""
    distinct = []
    for i in range(min(sequences, 4)):
        poses, trans, betas = _motion(frames, 100 + i)
        path = folder / "CMU" / "bench" / f"seq{i:04d}_poses.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(
            path,
            poses=poses.reshape(frames, 72),
            trans=trans,
            betas=betas,
            gender=np.array("neutral"),
            mocap_framerate=np.array(60.0),
        )
        distinct.append(path)
    for i in range(len(distinct), sequences):
        os.link(distinct[i % len(distinct)], folder / "CMU" / "bench" / f"seq{i:04d}_poses.npz")


def _measure(sequences: int, frames: int, workdir: Path) -> dict:
    motions, out = workdir / f"motions{sequences}", workdir / f"out{sequences}"
    _write_inputs(motions, sequences, frames)
    env = {**os.environ, "WANDB_MODE": "disabled"}
    proc = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(motions), str(out)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"memory benchmark subprocess failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory(quick: bool = False) -> dict:
    """Peak memory of the synth pipeline on a base input and on 10× as many frames."""
    sequences, frames = (1, 512) if quick else (6, 4096)
    with tempfile.TemporaryDirectory(prefix="rbmcap-bench-") as tmp:
        base = _measure(sequences, frames, Path(tmp))
        big = _measure(10 * sequences, frames, Path(tmp))
    mb = 1.0 / 1024.0  # /proc and ru_maxrss count KiB
    return {
        "memory_base_frames": base["frames"],
        "memory_big_frames": big["frames"],
        "base_peak_rss_mb": base["run_peak_kb"] * mb,
        "big_peak_rss_mb": big["run_peak_kb"] * mb,
        "peak_memory_ratio": big["run_peak_kb"] / base["run_peak_kb"],
        "base_run_growth_mb": (base["run_peak_kb"] - base["before_kb"]) * mb,
        "big_run_growth_mb": (big["run_peak_kb"] - big["before_kb"]) * mb,
        "loading_peak_rss_mb": max(base["loading_peak_kb"], big["loading_peak_kb"]) * mb,
        "pipeline_frames_per_s_1thread": big["frames"] / big["seconds"],
    }


def run(quick: bool = False) -> dict:
    return {**speed(quick), **memory(quick)}
