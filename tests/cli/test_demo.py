"""``rbmcap demo --quick``: every stage runs end to end on a tiny budget and reports figures;
training stops at its time, and the claims are the report's, computed from its averages."""

from __future__ import annotations

import json
import math

import pytest

from rbmcap.cli.main import main


def test_quick_demo_runs_every_stage_and_reports_finite_figures(tmp_path, capsys):
    from rbmcap.bench.skinning import QUICK_BATCH
    from rbmcap.cli.demo import QUICK
    from rbmcap.evaluation.report import claims, shipped_refine_claims

    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    expected = {"quick", "budget", "body", "render", "skinning", "train", "eval", "claims"}
    assert expected <= set(summary)
    assert summary["quick"] is True and summary["budget"]["eval_frames"] == QUICK.eval_frames
    assert (out / "body.png").stat().st_size > 5000
    train = summary["train"]
    # bounded by time: 5 s of training (set-up and the last validation besides), far fewer
    # epochs than its ceiling of 100
    assert train["max_time"] == "00:00:00:05" and 1 <= train["epochs"] < 100
    assert train["seconds"] < 5 + 45, train["seconds"]
    assert "Time limit reached" in printed or train["epochs"] < 100
    assert math.isfinite(train["best_val_mpjpe_mm"])
    assert summary["threads"] == 1 and summary["skinning"]["batch"] == QUICK_BATCH
    assert set(summary["eval"]) == {"network", "baseline_6dof", "hybrid", "refine"}
    # the shipped model on the same held-out sequences: network and refined
    assert set(summary["shipped_eval"]) == {"network", "refine"}
    shipped = json.loads((out / "shipped" / "metrics.json").read_text())
    assert shipped["options"]["ckpt"] == "standin-rbm14"
    assert shipped["methods"]["network"]["frames"] == summary_frames(out)
    for method, figures in summary["eval"].items():
        for key in ("mpjpe_mm", "pa_mpjpe_mm", "joint_rotation_deg", "ms_per_frame"):
            value = figures[key]
            assert isinstance(value, float) and math.isfinite(value) and value > 0, (method, key)
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert metrics["options"]["solver_iterations"] == QUICK.solver_iterations
    assert metrics["options"]["max_frames"] == QUICK.eval_frames
    assert metrics["options"]["frames_per_sequence"] == QUICK.frames_per_sequence
    assert metrics["options"]["hybrid_margin"] == QUICK.hybrid_margin
    base = metrics["methods"]["baseline_6dof"]
    assert base["frames"] <= QUICK.eval_frames
    assert base["convergence"][0]["iterations"][-1] <= QUICK.solver_iterations
    assert "claim:" in printed and (out / "eval" / "report.md").is_file()
    # the claims: the report's, computed from its averages and the hybrid's curve
    averages = {k: m["metrics"] for k, m in metrics["methods"].items()}
    curves = {k: m["convergence"][0] for k, m in metrics["methods"].items() if m["convergence"]}
    assert metrics["claims"] == claims(averages, curves)
    shipped_claims = shipped_refine_claims(
        {k: m["metrics"] for k, m in shipped["methods"].items()},
        averages["baseline_6dof"],
        "standin-rbm14",
    )
    assert [c["claim"] for c in shipped_claims] == [
        "standin-rbm14 refined MPJPE ≤ baseline_6dof MPJPE (mm)",
        "standin-rbm14 refined time ≤ 0.2 × baseline_6dof time",
    ]
    assert summary["claims"] == metrics["claims"] + shipped_claims
    fraction = (
        summary["eval"]["hybrid"]["ms_per_frame"] / summary["eval"]["baseline_6dof"]["ms_per_frame"]
    )
    (time_claim,) = [c for c in summary["claims"] if c["claim"].startswith("hybrid time")]
    assert time_claim["value"] == fraction and time_claim["holds"] == (fraction <= 0.2)
    hybrid = metrics["methods"]["hybrid"]  # its curve counts its network pass as its row does
    assert hybrid["convergence"][0]["ms_per_frame"][-1] == pytest.approx(
        hybrid["metrics"]["ms_per_frame"]
    )


def summary_frames(out) -> int:
    """Frames the demo's own evaluation scored."""
    return json.loads((out / "eval" / "metrics.json").read_text())["methods"]["network"]["frames"]


def test_the_full_demo_reports_the_skinning_bench_at_its_own_batch():
    import inspect

    from rbmcap.bench import skinning
    from rbmcap.cli.demo import FULL

    options = dict(FULL.skinning)
    inspect.signature(skinning.run).bind(**options)  # options the bench takes
    assert not options.get("quick")  # the bench's own batch, not the smoke test's


def test_pretrained_demo_trains_nothing_and_scores_like_its_card(tmp_path, capsys):
    from rbmcap.inference.pretrained import model_card

    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--pretrained", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["train"]["pretrained"] == "standin-rbm14"
    assert not (out / "train").exists()  # no training run, no checkpoint written
    assert "data.generate.seed=1" in json.dumps(summary) or "_s1_" in summary["train"]["data_path"]
    card_mm = model_card("standin-rbm14")["check"]["mpjpe_mm"]["mean"]
    network_mm = summary["eval"]["network"]["mpjpe_mm"]
    print(f"pretrained on unseen demo data: {network_mm:.1f} mm (card {card_mm:.1f} mm)")
    assert network_mm < 2.0 * card_mm
