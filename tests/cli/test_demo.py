"""``rbmcap demo --quick``: every stage runs end to end on a tiny budget and reports figures."""

from __future__ import annotations

import json
import math

from rbmcap.cli.main import main


def test_quick_demo_runs_every_stage_and_reports_finite_figures(tmp_path, capsys):
    from rbmcap.cli.demo import QUICK

    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert {"quick", "budget", "body", "render", "skinning", "train", "eval"} <= set(summary)
    assert summary["quick"] is True and summary["budget"]["eval_frames"] == QUICK.eval_frames
    assert (out / "body.png").stat().st_size > 5000
    assert summary["train"]["epochs"] >= 1
    assert math.isfinite(summary["train"]["best_val_mpjpe_mm"])
    assert set(summary["eval"]) == {"network", "baseline_6dof", "hybrid"}
    for method, figures in summary["eval"].items():
        for key in ("mpjpe_mm", "pa_mpjpe_mm", "joint_rotation_deg", "ms_per_frame"):
            value = figures[key]
            assert isinstance(value, float) and math.isfinite(value) and value > 0, (method, key)
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    assert metrics["options"]["solver_iterations"] == QUICK.solver_iterations
    assert metrics["options"]["max_frames"] == QUICK.eval_frames
    assert metrics["options"]["frames_per_sequence"] == QUICK.frames_per_sequence
    base = metrics["methods"]["baseline_6dof"]
    assert base["frames"] <= QUICK.eval_frames
    assert base["convergence"][0]["iterations"][-1] == QUICK.solver_iterations
    assert "claim:" in printed and (out / "eval" / "report.md").is_file()


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
