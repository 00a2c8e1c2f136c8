"""rbmcap eval: every method on a split, the report files, and clear errors for bad input."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest

from rbmcap.cli.main import main
from rbmcap.errors import EXIT_DATA, EXIT_MODEL, EXIT_USAGE


def test_eval_writes_the_report_for_every_method(checkpoint, tiny_dataset, tmp_path, capsys):
    out = tmp_path / "eval"
    code = main(
        [
            "eval",
            "--ckpt",
            str(checkpoint),
            "--data",
            str(tiny_dataset),
            "--split",
            "test",
            "--baseline",
            "--hybrid",
            "--max-frames",
            "40",
            "--frames-per-sequence",
            "25",
            "--solver-config",
            "default",
            "--hybrid-start-error",
            "0",
            "1",
            "--out",
            str(out),
            "--json",
        ]
    )
    assert code == 0
    metrics = json.loads(capsys.readouterr().out)
    oracles = {"hybrid_start_0", "hybrid_start_1"}
    assert set(metrics["methods"]) == {"network", "baseline_6dof", "hybrid"} | oracles
    for name, m in metrics["methods"].items():
        assert m["frames"] == 40 and m["sequences"] == 2, name  # 25 + the second's first 15
        for key in ("mpjpe_mm", "pa_mpjpe_mm", "joint_rotation_deg", "v2v_mm", "ms_per_frame"):
            assert m["metrics"][key] >= 0, (name, key)
        assert len(m["per_joint_mm"]) == 24
    base = metrics["methods"]["baseline_6dof"]
    assert base["convergence"][0]["iterations"][0] == 0
    # the baseline's row is its answer where it converged: accuracy and time of the same run
    curve = base["convergence"][0]
    k = curve["iterations"].index(base["iterations"])
    assert base["metrics"]["mpjpe_mm"] == pytest.approx(curve["mpjpe_mm"][k], rel=1e-4)
    assert base["metrics"]["ms_per_frame"] == pytest.approx(curve["ms_per_frame"][k])
    # the hybrid's curve counts what its row counts: the network pass with the solver
    hybrid = metrics["methods"]["hybrid"]
    hybrid_curve = hybrid["convergence"][0]
    assert hybrid_curve["ms_per_frame"][-1] == pytest.approx(hybrid["metrics"]["ms_per_frame"])
    assert hybrid_curve["ms_per_frame"][0] >= metrics["methods"]["network"]["metrics"][
        "ms_per_frame"
    ] * (1 - 1e-6)
    report = (out / "report.md").read_text()
    assert "| network" in report and "Convergence of" in report and "MPJPE" in report
    hybrid = metrics["methods"]["hybrid"]
    assert hybrid["convergence"][0]["iterations"][-1] == hybrid["iterations"]
    # the hybrid gets the iterations that fit in a fifth of the baseline's converged time
    assert 1 <= hybrid["iterations"] <= max(1, metrics["methods"]["baseline_6dof"]["iterations"])
    claims = {c["claim"]: c for c in metrics["claims"]}
    assert any(k.startswith("hybrid time") for k in claims) and "claims on this data" in report
    # oracle starts: 0 is the truth, 1 the network's own answer; same budget as the hybrid
    zero, one = (metrics["methods"][k] for k in sorted(oracles))
    assert zero["convergence"][0]["mpjpe_mm"][0] < 1e-2
    assert one["convergence"][0]["mpjpe_mm"] == pytest.approx(
        hybrid["convergence"][0]["mpjpe_mm"], rel=1e-3, abs=1e-3
    )
    assert zero["iterations"] == one["iterations"] == hybrid["iterations"]
    assert [claims[k]["holds"] for k in claims if k.startswith("study")] == [None, None]
    assert "oracle start" in report
    rows = list(csv.DictReader(open(out / "per_sequence.csv")))
    assert {r["method"] for r in rows} == {"network", "baseline_6dof", "hybrid"} | oracles
    for png in ("per_joint_error.png", "error_over_time.png", "speed_vs_accuracy.png"):
        assert (out / png).stat().st_size > 5000


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--ckpt", "/no/such.ckpt"], "no such checkpoint"),
        (["--split", "nope"], "no split 'nope'"),
        (["--max-frames", "0"], "max_frames = 0: must be a positive integer"),
        (["--hybrid-fraction", "2"], "hybrid_fraction = 2.0: expected 0 … 1"),
        (["--frames-per-sequence", "-3"], "frames_per_sequence = -3: must be a positive"),
        (["--solver-iterations", "0"], "solver_iterations = 0: must be a positive"),
        (["--hybrid-start-error", "0.5"], "start_errors = [0.5]: needs hybrid"),
        (["--smoothing", "-1"], "smoothing = -1.0: expected frames ≥ 0"),
    ],
)
def test_eval_bad_input_is_one_line(checkpoint, tiny_dataset, tmp_path, capsys, extra, needle):
    argv = [
        "eval",
        "--ckpt",
        str(checkpoint),
        "--data",
        str(tiny_dataset),
        "--out",
        str(tmp_path / "o"),
    ]
    for i in range(0, len(extra), 2):
        if extra[i] in argv:
            argv[argv.index(extra[i]) + 1] = extra[i + 1]
        else:
            argv += extra[i : i + 2]
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
    expected = {"no such checkpoint": EXIT_MODEL, "no split 'nope'": EXIT_DATA}
    assert code == expected.get(needle, EXIT_USAGE)


def test_eval_refuses_data_of_another_marker_set(checkpoint, tmp_path, standin, capsys):
    from rbmcap.dataset import SynthOptions, synthesize_dataset
    from rbmcap.motion.procedural.library import generate

    motions = tmp_path / "m" / "Procedural" / "S00"
    motions.mkdir(parents=True)
    generate("squat", 0, body=standin).save(motions / "squat_poses.npz")
    synthesize_dataset(
        SynthOptions(motions=tmp_path / "m", out=tmp_path / "d", markers="rbm_d", progress=False),
        body=standin,
    )
    code = main(
        [
            "eval",
            "--ckpt",
            str(checkpoint),
            "--data",
            str(tmp_path / "d"),
            "--split",
            "train",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2
    assert "trained on marker set 'rbm14'" in capsys.readouterr().err


def test_claims_are_judged_from_the_averages():
    from rbmcap.evaluation.report import claims

    avg = {
        "network": {"mpjpe_mm": 40.0, "ms_per_frame": 0.1},
        "baseline_6dof": {"mpjpe_mm": 15.0, "ms_per_frame": 6.0},
        "hybrid": {"mpjpe_mm": 14.0, "ms_per_frame": 1.5},
        "baseline_points": {"mpjpe_mm": 8.0, "ms_per_frame": 0.5},
    }
    got = {c["claim"].split(" ")[0] + str(i): c for i, c in enumerate(claims(avg))}
    assert [c["holds"] for c in got.values()] == [True, False, True, False, None]
    assert got["network0"]["value"] == pytest.approx(60.0)
    assert got["hybrid3"]["value"] == pytest.approx(0.25)


def test_when_the_hybrid_reached_the_baseline_is_read_off_its_curve():
    """Its whole budget may run over the fraction while the baseline's MPJPE was reached well
    within it: the first recorded iteration count at or below it, its curve's time (which
    includes the network pass)."""
    from rbmcap.evaluation.report import claim_line, claims

    avg = {
        "network": {"mpjpe_mm": 30.0, "ms_per_frame": 0.2},
        "baseline_6dof": {"mpjpe_mm": 10.5, "ms_per_frame": 20.0},
        "hybrid": {"mpjpe_mm": 10.3, "ms_per_frame": 4.1},
    }
    curve = {
        "iterations": [0, 1, 2, 5, 10, 20, 23],
        "ms_per_frame": [0.3, 0.5, 0.7, 1.3, 2.1, 3.7, 4.1],  # network pass included
        "mpjpe_mm": [30.0, 20.0, 15.0, 12.0, 10.6, 10.4, 10.3],
    }
    got = claims(avg, {"hybrid": curve})
    whole, reach = got[-2], got[-1]
    assert whole["value"] == pytest.approx(0.205) and not whole["holds"]
    assert reach["value"] == pytest.approx(3.7 / 20.0) and reach["holds"]
    assert reach["iterations"] == 20 and "at 20 iterations" in claim_line(reach)
    curve["mpjpe_mm"][-2:] = [10.51, 10.51]  # never at or below 10.5
    never = claims(avg, {"hybrid": curve})[-1]
    assert never["value"] is None and never["holds"] is False and "never" in claim_line(never)
    assert len(claims(avg)) == len(got) - 1  # without the curve the claim is not made


def test_hybrid_budget_fits_a_fifth_of_the_baseline_time():
    from rbmcap.evaluation.methods import hybrid_budget
    from rbmcap.evaluation.results import MethodResult

    base = MethodResult("baseline_6dof", "b", iterations=100, converged_ms_per_frame=21.0)
    base.convergence = [{"iterations": [0, 50, 100, 200], "ms_per_frame": [1.0, 11.0, 21.0, 41.0]}]
    net = MethodResult("network", "n", seconds=0.0005, frames=1)  # 0.5 ms/frame
    # 0.85 * 0.2 * 21 ms = 3.57 ms, less 0.5 ms for the network, at 0.2 ms per iteration
    assert hybrid_budget(base, net, 0.2, 0.85) == 15
    # the margin is the planned share: all of it, 0.2 * 21 - 0.5 = 3.7 ms
    assert hybrid_budget(base, net, 0.2, 1.0) == 18
    # early iterations cost more: the record's own times are used
    base.convergence[0]["ms_per_frame"] = [1.0, 4.0, 21.0, 31.0]  # 3 ms over the first 50
    assert hybrid_budget(base, net, 0.4, 0.85) == 50 + int((0.85 * 0.4 * 21 - 0.5 - 3) / (17 / 50))
    assert hybrid_budget(base, net, 0.01, 0.85) == 1


def test_hybrid_budget_leaves_out_the_solvers_first_iteration_set_up():
    """A first iteration that costs 13.5 ms/frame of set-up, then 0.1 ms/frame an iteration:
    the hybrid's fifth of 40 ms/frame holds tens of iterations, not one."""
    from rbmcap.evaluation.methods import hybrid_budget
    from rbmcap.evaluation.results import MethodResult

    base = MethodResult("baseline_6dof", "b", iterations=200, converged_ms_per_frame=40.0)
    base.convergence = [
        {
            "iterations": [0, 1, 2, 5, 10, 20, 50, 100],
            "ms_per_frame": [0.1, 13.6, 13.7, 14.0, 14.5, 15.5, 18.5, 23.5],
        }
    ]
    net = MethodResult("network", "n", seconds=0.0005, frames=1)  # 0.5 ms/frame
    # 0.85 * 0.2 * 40 - 0.5 = 6.3 ms: the first iteration (0.1 ms without its set-up), then
    # 0.1 ms each
    assert hybrid_budget(base, net, 0.2, 0.85) == 63


class _SlowStartPredictor:
    """A network whose first call costs ``start_up`` seconds (loading, tracing, warm-up) and
    every later call almost nothing."""

    def __init__(self, start_up: float) -> None:
        self.start_up, self.calls = start_up, 0

    def predict(self, pos, rot, valid):
        import time

        from rbmcap.body.params import SMPLParams

        self.calls += 1
        if self.calls == 1:
            time.sleep(self.start_up)
        t = len(pos)
        return SMPLParams.from_mapping(
            {"poses": np.zeros((t, 24, 3)), "betas": np.zeros(10), "trans": np.zeros((t, 3))}
        )


class _TimeOnlyScorer:
    """Records the time of each answer (what the hybrid's plan reads), no metrics."""

    def record(self, result, seq, params, seconds):
        result.seconds += seconds
        result.frames += seq.frames


def _sequence(name: str, frames: int):
    from rbmcap.evaluation.sequences import Sequence

    arrays = {
        "poses": np.zeros((frames, 24, 3)),
        "rbm_pos": np.zeros((frames, 14, 3)),
        "rbm_rot": np.tile(np.eye(3), (frames, 14, 1, 1)),
        "rbm_valid": np.ones((frames, 14), dtype=bool),
        "joints": np.zeros((frames, 24, 3)),
    }
    return Sequence(name, arrays)


def test_the_networks_start_up_is_not_charged_to_a_short_set():
    """One 500-frame sequence and a network whose first call takes 1.5 s (3 ms a frame if it
    were charged, most of the hybrid's fifth of 20 ms): the hybrid is still planned tens of
    iterations at the baseline's 0.1 ms a frame per iteration."""
    from rbmcap.evaluation.methods import NetworkMethod, hybrid_budget
    from rbmcap.evaluation.results import MethodResult
    from rbmcap.evaluation.runner import score

    split = [_sequence("only", 500)]
    predictor = _SlowStartPredictor(start_up=1.5)
    net = score(NetworkMethod(predictor, "n"), split, _TimeOnlyScorer(), {})
    assert predictor.calls == 2  # its start-up, untimed, then the timed pass
    assert net.ms_per_frame < 0.5
    base = MethodResult("baseline_6dof", "b", iterations=200, converged_ms_per_frame=20.0)
    base.convergence = [
        {"iterations": [0, 1, 2, 50, 100, 200], "ms_per_frame": [0.5, 0.6, 0.7, 5.5, 10.5, 20.5]}
    ]
    assert hybrid_budget(base, net, 0.2, 0.85) >= 10


class _Stop(Exception):
    pass


def test_solvers_pay_their_start_up_before_the_timed_solves():
    """The first solve of a process is the warm-up: a few frames, a few iterations, untimed;
    the baseline and the hybrid each make one before their timed solves."""
    from rbmcap.evaluation.methods import (
        WARM_UP_FRAMES,
        WARM_UP_ITERATIONS,
        BaselineMethod,
        BudgetPlan,
        HybridMethod,
        NetworkMethod,
        SolverRun,
    )

    class Calls:
        def __init__(self):
            self.seen = []

        def solve(self, pos, rot, valid, *, fps, iterations=None, **kwargs):
            self.seen.append((len(pos), iterations, "init" in kwargs))
            if len(self.seen) > 1:
                raise _Stop  # the timed solves are not this test's

    split = [_sequence("a", 100), _sequence("b", 80)]
    net = NetworkMethod(_SlowStartPredictor(0.0), "n")
    for seq in split:
        net.run(seq)
    for method in (
        BaselineMethod("baseline_6dof", "b", SolverRun(Calls(), 60.0, iterations=50)),
        HybridMethod(SolverRun(Calls(), 60.0, iterations=50), net, BudgetPlan(None, 0.85)),
    ):
        solver = method.solve.solver
        with pytest.raises(_Stop):
            method.prepare(split, {})
            method.run(split[0])
        assert solver.seen[0] == (WARM_UP_FRAMES, WARM_UP_ITERATIONS, False), method.key
        assert solver.seen[1][0] == 100, method.key  # then the first timed solve


def test_the_hybrid_budget_is_the_iterations_its_own_solves_fit():
    """Its iterations cost 0.2 ms a frame after 0.5 ms of set-up, half the baseline's 0.4: the
    planned fifth of 30 ms a frame fits 27 of them, measured on its own solves, not the 15 at
    most that the baseline's cost gives."""
    from types import SimpleNamespace

    from rbmcap.baseline import ConvergenceRecord
    from rbmcap.baseline.config import load_solver_config
    from rbmcap.evaluation.methods import (
        BudgetPlan,
        HybridMethod,
        NetworkMethod,
        SolverRun,
        hybrid_budget,
    )
    from rbmcap.evaluation.results import MethodResult

    class Costed:
        def __init__(self):
            self.config = load_solver_config("default")
            self.calls = []

        def solve(self, pos, rot, valid, *, fps, init=None, iterations=None, **kwargs):
            self.calls.append(iterations)
            counts = sorted({c for c in self.config.record if c <= iterations} | {iterations})
            n, frames = len(counts), len(pos)
            record = ConvergenceRecord(
                iterations=counts,
                evaluations=[0] * n,
                objective=[0.0] * n,
                seconds=[1e-3 * frames * (0.5 + 0.2 * c) for c in counts],
                mpjpe_mm=[10.0] * n,
                frames=frames,
            )
            return SimpleNamespace(record=record)

    split = [_sequence("a", 300), _sequence("b", 300)]
    net = NetworkMethod(_SlowStartPredictor(0.0), "n")
    network = MethodResult("network", "n")
    for seq in split:
        _, seconds = net.run(seq)
        network.seconds, network.frames = network.seconds + seconds, network.frames + seq.frames
    base = MethodResult("baseline_6dof", "b", iterations=100, converged_ms_per_frame=30.0)
    base.convergence = [{"iterations": [0, 1, 2, 100], "ms_per_frame": [0.5, 0.9, 1.3, 40.5]}]
    done = {"network": network, "baseline_6dof": base}
    estimate = hybrid_budget(base, network, 0.2, 1.0)
    assert estimate <= 15
    solver = Costed()
    hybrid = HybridMethod(SolverRun(solver, 60.0), net, BudgetPlan(0.2, 1.0))
    hybrid.prepare(split, done)
    # 0.5 + 0.2 × 27 = 5.9 ms ≤ 6 ms, read between its recorded 20 and 30 iterations
    assert hybrid.budget == 27
    assert solver.calls[1] == 2 * estimate + 10  # measured up to twice the estimate


def test_oracle_start_scales_the_network_error():
    import numpy as np
    import roma
    import torch

    from rbmcap.body.params import SMPLParams
    from rbmcap.evaluation.oracle import scaled_error_start

    rng = np.random.default_rng(0)
    truth = {
        "poses": rng.normal(0, 0.5, (5, 24, 3)),
        "betas": rng.normal(size=10),
        "trans": rng.normal(size=(5, 3)),
    }
    net = {
        "poses": truth["poses"] + rng.normal(0, 0.2, (5, 24, 3)),
        "betas": rng.normal(size=16),
        "trans": truth["trans"] + 0.1,
    }

    def angle(a, b):
        ra, rb = (roma.rotvec_to_rotmat(torch.as_tensor(x, dtype=torch.float64)) for x in (a, b))
        return roma.rotmat_geodesic_distance(ra, rb).numpy()

    def start(f):
        params = scaled_error_start(SMPLParams.from_mapping(net), SMPLParams.from_mapping(truth), f)
        assert isinstance(params, SMPLParams)
        return params.numpy()

    for f, ref in ((0.0, truth), (1.0, net)):
        got = start(f)
        assert angle(got["poses"], ref["poses"]).max() < 1e-5
        np.testing.assert_allclose(got["trans"], ref["trans"], atol=1e-6)
    half = start(0.5)
    # geodesic: half the angle to the truth, and the other half to the network
    full = angle(net["poses"], truth["poses"])
    np.testing.assert_allclose(angle(half["poses"], truth["poses"]), full / 2, atol=1e-5)
    np.testing.assert_allclose(angle(half["poses"], net["poses"]), full / 2, atol=1e-5)
    # betas of different lengths: the shorter is zero-padded
    assert half["betas"].shape == (16,)
    np.testing.assert_allclose(half["betas"][10:], net["betas"][10:] / 2, atol=1e-6)
    np.testing.assert_allclose(half["trans"], truth["trans"] + 0.05, atol=1e-6)


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"max_frames": 0}, "max_frames = 0"),
        ({"max_frames": 2.5}, "max_frames = 2.5"),
        ({"frames_per_sequence": -1}, "frames_per_sequence = -1"),
        ({"solver_iterations": 0}, "solver_iterations = 0"),
        ({"hybrid_fraction": 1.5}, "hybrid_fraction = 1.5"),
        ({"hybrid_fraction": -0.1}, "hybrid_fraction = -0.1"),
        ({"hybrid_margin": 0.0}, "hybrid_margin = 0.0"),
        ({"hybrid_margin": 1.2}, "hybrid_margin = 1.2"),
        ({"start_errors": (0.5,)}, "start_errors = [0.5]: needs hybrid"),
        ({"start_errors": (-1.0,), "hybrid": True}, "start_errors = [-1.0]: must be ≥ 0"),
    ],
)
def test_eval_options_check_every_field(changes, needle):
    from rbmcap.errors import ConfigError
    from rbmcap.evaluation import EvalOptions

    with pytest.raises(ConfigError, match=re.escape(needle)):
        EvalOptions(ckpt="m.ckpt", data="d", **changes)
    ok = EvalOptions(ckpt="m.ckpt", data="d", hybrid=True, start_errors=[1, 0.5, 1])
    assert ok.start_errors == (1.0, 0.5)  # duplicates dropped, order kept
    ok.max_frames = 0  # a library caller changing a field afterwards is checked by evaluate
    with pytest.raises(ConfigError, match="max_frames = 0"):
        ok.validate()


def test_eval_cli_defaults_are_the_options_defaults(tmp_path):
    import dataclasses

    from rbmcap.cli.main import build_parser
    from rbmcap.evaluation import EvalOptions

    args = build_parser().parse_args(["eval", "--ckpt", "m", "--data", "d", "--out", "o"])
    built = EvalOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(EvalOptions)})
    assert dataclasses.asdict(built) == dataclasses.asdict(
        EvalOptions(ckpt=Path("m"), data=Path("d"))
    )
    # every field reaches the CLI under its own name
    args = build_parser().parse_args(
        [
            "eval",
            "--ckpt",
            "m",
            "--data",
            "d",
            "--out",
            "o",
            "--no-vertices",
            "--hybrid-start-error",
            "0.5",
            "--solver-iterations",
            "7",
        ]
    )
    assert (args.vertices, args.start_errors, args.solver_iterations) == (False, [0.5], 7)


def test_fraction_wording_follows_the_value():
    from rbmcap.evaluation.report import definitions
    from rbmcap.evaluation.wording import fraction_in_words, share_of

    assert fraction_in_words(0.2) == "a fifth"
    assert fraction_in_words(0.5) == "half"
    assert fraction_in_words(1 / 3) == "a third"
    assert fraction_in_words(0.3) == "0.3×"
    assert share_of(0.25, "the time") == "a quarter of the time"
    assert share_of(0.3, "the time") == "0.3 × the time"

    def words(options):  # the report wraps its lines
        return " ".join(definitions(options).split())

    text = words({"hybrid_fraction": 0.2, "hybrid_margin": 0.85})
    assert "fit in a fifth of the baseline's converged time (85 % of it planned for)" in text
    text = words({"hybrid_fraction": 0.3, "hybrid_margin": 0.9})
    assert "fit in 0.3 × the baseline's converged time (90 % of it planned for)" in text
    assert "a fifth" not in text and "85 %" not in text
    assert "config's iterations" in words({"hybrid_fraction": 0.0})


def test_eval_smoothing_reaches_the_predictor(checkpoint, tiny_dataset):
    from rbmcap.evaluation import EvalOptions
    from rbmcap.evaluation.runner import EvalSetup
    from rbmcap.inference.smoothing import DEFAULT_SIGMA_FRAMES

    raw = EvalSetup.open(EvalOptions(checkpoint, tiny_dataset, smoothing=0.0))
    assert raw.predictor.smoothing == 0.0
    default = EvalSetup.open(EvalOptions(checkpoint, tiny_dataset))
    assert default.predictor.smoothing == DEFAULT_SIGMA_FRAMES
