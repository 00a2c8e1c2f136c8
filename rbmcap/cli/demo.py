"""``rbmcap demo``: the main job on the embedded default, end to end, with no downloads.

Each stage runs on what ships with rbmcap (the open stand-in body and procedural motion) and says
what it did; the stages grow with the library. Training is bounded by time (``trainer.max_time``
of ``experiment=demo``), not by a number of epochs, and the whole demo runs on
:data:`DEMO_THREADS` torch thread. ``--quick`` runs every stage on a tiny budget
(:data:`QUICK`): a smoke test and install check, not figures to read.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rbmcap.config.packaged import conf_dir
from rbmcap.evaluation.options import REFINE_DEFAULT, EvalOptions

DEMO_THREADS = 1
"""torch's intra-op threads for the whole demo. One: the demo's batches are small, where a
thread pool gains little, and on a machine whose other cores are busy the pool's threads spin
waiting for each other (many times slower); on one thread every stage's time is the work of one
core, so the network's and the solvers' times compare alike whatever the machine is doing."""


@dataclass(frozen=True)
class DemoBudget:
    """How much each stage of the demo does.

    Attributes:
        train_overrides: Hydra overrides added to ``experiment=demo`` (motions, training time,
            batches per epoch).
        eval_frames: test frames evaluated at most.
        frames_per_sequence: frames evaluated per test sequence (None: all up to ``eval_frames``).
        solver_iterations: the baseline's sweeps at most (None: its config's; it stops when
            converged); the hybrid's are what its own measured solves fit in a share of the
            baseline's time.
        skinning: options of ``rbmcap bench skinning`` (:func:`rbmcap.bench.skinning.run`).
        hybrid_margin: share of the hybrid's time budget planned for
            (:attr:`rbmcap.evaluation.EvalOptions.hybrid_margin`).
    """

    train_overrides: tuple[str, ...] = ()
    eval_frames: int = 2000
    frames_per_sequence: int | None = 250
    solver_iterations: int | None = None
    skinning: tuple[tuple[str, object], ...] = (("repeats", 3),)
    # a busy machine's load moves between the hybrid's measuring solve and its timed ones:
    # planned on three quarters of its budget, it keeps to it
    hybrid_margin: float = 0.75


FULL = DemoBudget()
"""``make demo``: ``experiment=demo`` as configured (its training time included), eight test
sequences of 250 frames, the baseline until converged, the skinning bench at its own batch, best
of 3 rounds."""

QUICK = DemoBudget(
    # 12 motions: 3 subjects, so train, val and test each get one (whole subjects per split)
    train_overrides=(
        "data.generate.num=12",
        "trainer.max_time=00:00:00:05",
        "trainer.max_epochs=100",  # far more than fit in 5 s: the time ends the run
        "trainer.limit_train_batches=4",
        "trainer.limit_val_batches=2",
    ),
    eval_frames=40,
    frames_per_sequence=20,  # two test sequences
    solver_iterations=6,
    skinning=(("quick", True),),
)
"""``rbmcap demo --quick``: every stage on a tiny budget (a smoke run), training for 5 s."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the main job on the embedded default (no downloads)")
    p.add_argument("--out", type=Path, default=Path("outputs/demo"), help="output folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--quick",
        action="store_true",
        help="every stage on a tiny budget (a smoke test: a few motions, 5 s of training, "
        f"{QUICK.eval_frames} eval frames, at most {QUICK.solver_iterations} solver sweeps)",
    )
    p.add_argument(
        "--eval-frames",
        type=int,
        default=None,
        help=f"test frames to evaluate (default {FULL.eval_frames}; --quick: {QUICK.eval_frames})",
    )
    p.add_argument(
        "--pretrained",
        nargs="?",
        const="standin-rbm14",
        default=None,
        metavar="NAME",
        help="skip training: evaluate a shipped pretrained model (default standin-rbm14) on "
        "demo data made with another seed than it trained on",
    )
    p.set_defaults(func=_run)


def _step(title: str) -> float:
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def _run(args: argparse.Namespace) -> int:
    # start-up: every `rbmcap` command builds the demo's parser; this loads when it runs
    import torch

    start = time.perf_counter()
    if hasattr(sys.stdout, "reconfigure"):  # each line shown as it is printed, also in a pipe
        sys.stdout.reconfigure(line_buffering=True)
    torch.set_num_threads(DEMO_THREADS)
    budget = QUICK if args.quick else FULL
    if args.eval_frames is not None:
        budget = replace(budget, eval_frames=args.eval_frames)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"quick": bool(args.quick), "budget": asdict(budget), "threads": DEMO_THREADS}
    print(
        f"rbmcap demo on {DEMO_THREADS} torch thread: its batches are small, and a thread pool "
        "would spin against other work on a busy machine"
    )
    summary.update(_body_and_render(out))
    summary["skinning"] = _skinning(dict(budget.skinning))
    if args.pretrained:
        summary["train"] = result = _pretrained_stage(out, args.seed, budget, args.pretrained)
    else:
        summary["train"] = result = _train_stage(out, args.seed, budget)
    summary["eval"], summary["claims"] = _eval_stage(out, result, budget)
    if not args.pretrained:
        shipped = _shipped_stage(out, result, budget, summary["eval"])
        summary["shipped_eval"], shipped_claims = shipped
        summary["claims"] += shipped_claims
    summary["seconds"] = time.perf_counter() - start
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    print(
        f"\nDone in {summary['seconds'] / 60:.1f} min. Outputs in {out}/ (summary.json, "
        "body.png, train/, eval/report.md, shipped/report.md)."
    )
    return 0


def _body_and_render(out: Path) -> dict:
    """Stages 1–2: the stand-in body, posed, shaped and rendered to ``out/body.png``."""
    # start-up: every `rbmcap` command builds the demo's parser; this loads when it runs
    import torch

    # start-up: as torch above
    from rbmcap.body import load_body_model
    from rbmcap.body.mesh_pictures import render_meshes
    from rbmcap.body.poses import stride_pose

    t = _step("1. stand-in body (built and cached on first use)")
    body = load_body_model("standin")
    print(
        f"   {body.identity}: {body.num_vertices} vertices, {body.faces.shape[0]} faces, "
        f"{body.num_joints} joints, {body.num_betas} betas ({time.perf_counter() - t:.1f} s)"
    )
    t = _step("2. pose and render it")
    faces = body.faces.numpy()
    with torch.no_grad():
        rest = body(torch.zeros(24, 3)).vertices.numpy()
        posed = body(torch.as_tensor(stride_pose(), dtype=torch.float32)).vertices.numpy()
        tall = torch.zeros(body.num_betas)
        tall[0] = 2.0
        shaped = body(torch.zeros(24, 3), tall).vertices.numpy()
    png = render_meshes(
        [(rest, faces), (posed, faces), (shaped, faces)],
        out / "body.png",
        titles=["rest pose", "stride pose", "betas[0] = +2 (taller)"],
        views=["front", "three_quarter", "front"],
    )
    height = float(rest[:, 1].max() - rest[:, 1].min())
    print(f"   height {height:.2f} m at zero betas; wrote {png} ({time.perf_counter() - t:.1f} s)")
    return {"body": {"id": body.identity, "vertices": body.num_vertices}, "render": str(png)}


def _skinning(options: dict) -> dict:
    """Stage 3: sparse against full skinning, measured by ``rbmcap bench skinning`` itself
    (:func:`rbmcap.bench.skinning.run` with ``options``)."""
    # start-up: every `rbmcap` command builds the demo's parser; this loads when it runs
    from rbmcap.bench import run_benchmark

    t = _step("3. sparse vs full skinning (rbmcap bench skinning)")
    bench = run_benchmark("skinning", **options)
    print(
        f"   full forward {bench['full_ms_per_frame']:.3f} ms/frame, sparse "
        f"{bench['sparse_ms_per_frame']:.4f} ms/frame for {bench['sparse_vertices']} vertices: "
        f"{bench['speedup']:.0f}x faster, max difference {bench['max_abs_difference_m']:.1e} m "
        f"(batch {bench['batch']}, best of {bench['repeats']} rounds; "
        f"{time.perf_counter() - t:.0f} s)"
    )
    keys = ("full_ms_per_frame", "sparse_ms_per_frame", "speedup", "batch", "repeats")
    return {k: bench[k] for k in keys}


def _train_stage(out: Path, seed: int, budget: DemoBudget) -> dict:
    """Stages 4–5: make the demo data, then train the demo network for its configured time;
    returns :func:`rbmcap.training.run.train`'s result with the stages' ``data_seconds``,
    ``seconds`` (training, its set-up and last validation included) and ``max_time``."""
    # start-up: every `rbmcap` command builds the demo's parser; this loads when it runs
    from rbmcap.training.run import build_datamodule, train

    cfg = _demo_config(out, seed, (*budget.train_overrides, f"data.generate.seed={DEMO_DATA_SEED}"))
    t = _step("4. make the demo data (procedural motions → rbm14 synthesis; kept for reruns)")
    build_datamodule(cfg).prepare_data()
    data_seconds = time.perf_counter() - t
    print(f"   {cfg.data.path} ({data_seconds:.0f} s)")
    max_time = str(cfg.trainer.max_time)
    t = _step(f"5. train the demo network for {max_time} (python train.py experiment=demo)")
    print("   (trainer.max_time, DD:HH:MM:SS; a line per epoch)")
    shutil.rmtree(out / "train", ignore_errors=True)  # a rerun replaces the previous demo run
    result = train(cfg, out / "train")
    result.update(data_seconds=data_seconds, seconds=time.perf_counter() - t, max_time=max_time)
    best = result["best_val_mpjpe_mm"]
    print(
        f"   best validation MPJPE {best if best is not None else float('nan'):.1f} mm, joint "
        f"angle error {result['val_metrics'].get('val/joint_angle_deg', float('nan')):.1f} deg "
        f"after {result['epochs']} epochs ({result['seconds']:.0f} s)"
    )
    print(f"   checkpoint: {result['best_checkpoint']}")
    return result


DEMO_DATA_SEED = 1
"""Master seed of the demo's data: shipped models train on seed 0's motions and body shapes (see
their cards), so the demo's test split holds motions and shapes they never saw, and the demo's
network and the shipped one are scored on the same held-out sequences."""


def _pretrained_stage(out: Path, seed: int, budget: DemoBudget, name: str) -> dict:
    """Stage 4 with ``--pretrained``: make the demo data only and return the model's name as the
    checkpoint (what :func:`_eval_stage` needs)."""
    # start-up: every `rbmcap` command builds the demo's parser; this loads when it runs
    from rbmcap.inference.pretrained import model_card
    from rbmcap.training.run import build_datamodule

    t = _step(f"4. pretrained network {name} (training skipped; `rbmcap pretrained list`)")
    card = model_card(name)  # one ModelError listing the shipped names when unknown
    cfg = _demo_config(out, seed, (*budget.train_overrides, f"data.generate.seed={DEMO_DATA_SEED}"))
    build_datamodule(cfg).prepare_data()
    check = card.get("check", {}).get("mpjpe_mm", {}).get("mean")
    print(
        f"   trained by: {card.get('command')}; check-set MPJPE {check} mm "
        f"({time.perf_counter() - t:.0f} s)"
    )
    return {
        "pretrained": name,
        "best_checkpoint": name,
        "last_checkpoint": name,
        "data_path": str(cfg.data.path),
        "card": card,
    }


def _eval_stage(out: Path, result: dict, budget: DemoBudget) -> tuple:
    """Network, baseline, hybrid and refinement on the test split; returns each one's averages
    and the method's claims (:func:`rbmcap.evaluation.report.claims`)."""
    number = 5 if "pretrained" in result else 6
    t = _step(
        f"{number}. evaluate on the held-out test split: network vs optimisation vs hybrid vs "
        "refined"
    )
    opts = EvalOptions(
        ckpt=result["best_checkpoint"] or result["last_checkpoint"],
        data=Path(result["data_path"]),
        split="test",
        baseline=True,
        hybrid=True,
        refine=REFINE_DEFAULT,
        max_frames=budget.eval_frames,
        frames_per_sequence=budget.frames_per_sequence,
        solver_iterations=budget.solver_iterations,
        hybrid_margin=budget.hybrid_margin,
        vertices=False,
    )
    averages, claims = _evaluated(opts, out / "eval", t)
    return averages, claims


SHIPPED = "standin-rbm14"
"""The shipped model the demo compares with what its two minutes of training give."""


def _shipped_stage(out: Path, result: dict, budget: DemoBudget, trained: dict) -> tuple:
    """The shipped :data:`SHIPPED` on the same held-out sequences: network and refined (the
    solver's answer does not depend on the network: the first evaluation's is compared with);
    returns its averages and the refinement claims against that solver
    (:func:`rbmcap.evaluation.report.shipped_refine_claims`)."""
    t = _step(f"7. the shipped {SHIPPED} on the same sequences: network vs refined")
    opts = EvalOptions(
        ckpt=SHIPPED,
        data=Path(result["data_path"]),
        split="test",
        refine=REFINE_DEFAULT,
        max_frames=budget.eval_frames,
        frames_per_sequence=budget.frames_per_sequence,
        vertices=False,
    )
    return _evaluated(opts, out / "shipped", t, against=trained["baseline_6dof"])


def _evaluated(opts, folder: Path, started: float, against: dict | None = None) -> tuple:
    """Evaluate ``opts`` into ``folder``, print its table and claims; returns (each method's
    averages, the claims: the report's, or with ``against`` (a converged solver's averages on
    the same sequences) the shipped model's refinement claims)."""
    # start-up: every `rbmcap` command builds the demo's parser; this loads when it runs
    from rbmcap.evaluation import evaluate
    from rbmcap.evaluation.report import claim_line, shipped_refine_claims, write_report

    metrics = write_report(evaluate(opts), folder)
    net = metrics["methods"]["network"]
    print(f"   {net['sequences']} test sequences, {net['frames']} frames")
    print(_table(metrics))
    averages = {k: m["metrics"] for k, m in metrics["methods"].items()}
    claims = metrics.get("claims", [])
    if against is not None:
        claims = shipped_refine_claims(averages, against, str(opts.ckpt))
    for c in claims:
        print(f"   claim: {claim_line(c)}")
    print(f"   full report: {folder / 'report.md'} ({time.perf_counter() - started:.0f} s)")
    return averages, claims


def _table(metrics: dict) -> str:
    rows = [
        f"   {'method':44s} {'MPJPE mm':>9s} {'PA-MPJPE':>9s} {'joint deg':>9s} "
        f"{'ms/frame':>9s} {'x network':>9s}"
    ]
    for m in metrics["methods"].values():
        a = m["metrics"]
        label = m["label"] + (f", {m['iterations']} it." if m["iterations"] is not None else "")
        rows.append(
            f"   {label:44s} {a['mpjpe_mm']:9.1f} {a['pa_mpjpe_mm']:9.1f} "
            f"{a['joint_rotation_deg']:9.1f} {a['ms_per_frame']:9.2f} "
            f"{m['time_ratio_to_network']:9.1f}"
        )
    return "\n".join(rows)


def _demo_config(out: Path, seed: int, extra: tuple[str, ...]):
    """``experiment=demo`` composed with data and outputs under ``out`` (logging to stdout)."""
    # start-up: every `rbmcap` command builds the demo's parser; this loads when it runs
    from hydra import compose, initialize_config_dir

    logging.basicConfig(level=logging.INFO, format="   %(message)s")
    overrides = [
        "experiment=demo",
        f"seed={seed}",
        f"paths.root_dir={out}",
        "trainer.enable_progress_bar=false",
        *extra,
    ]
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose("train", overrides=overrides)
