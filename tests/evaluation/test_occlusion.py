"""rbmcap eval --occlude: plates hidden for whole sequences, for every method, and reported."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest

from rbmcap.cli.main import main
from rbmcap.errors import ConfigError
from rbmcap.evaluation import EvalOptions
from rbmcap.evaluation.occlusion import joints_near, occlusion_groups

LEFT_HAND = 4  # rbm14's plate order
FEET = (7, 13)


@pytest.fixture(scope="module")
def corrupted(tiny_dataset, tmp_path_factory):
    """The tiny dataset with the left hand plate's test data replaced by garbage (far away,
    randomly turned), its validity untouched."""
    out = tmp_path_factory.mktemp("corrupt") / "dataset"
    shutil.copytree(tiny_dataset, out)
    rng = np.random.default_rng(0)
    pos = np.load(out / "test" / "rbm_pos.npy", mmap_mode="r+")
    pos[:, LEFT_HAND] = rng.normal(0, 3.0, pos[:, LEFT_HAND].shape)
    rot = np.load(out / "test" / "rbm_rot.npy", mmap_mode="r+")
    q, _ = np.linalg.qr(rng.normal(size=rot[:, LEFT_HAND].shape))
    rot[:, LEFT_HAND] = q * np.sign(np.linalg.det(q))[:, None, None]  # proper rotations
    pos.flush(), rot.flush()
    return out


def _run_json(checkpoint, data, out, *extra) -> dict:
    """``rbmcap eval`` with every method, a few frames and solver iterations, the hybrid on a
    fixed budget (not timed, so two runs are comparable); its ``metrics.json``."""
    argv = [
        "eval",
        "--ckpt",
        str(checkpoint),
        "--data",
        str(data),
        "--baseline",
        "--hybrid",
        "--max-frames",
        "24",
        "--frames-per-sequence",
        "12",
        "--solver-iterations",
        "3",
        "--hybrid-fraction",
        "0",
        "--no-vertices",
        "--json",
        "--out",
        str(out),
        *extra,
    ]
    assert main(argv) == 0
    return json.loads((out / "metrics.json").read_text())


@pytest.fixture(scope="module")
def spied(checkpoint, tiny_dataset, tmp_path_factory):
    """One evaluation with the left hand hidden, then both feet, recording the ``valid`` every
    method was given: (method, plates invalid in every frame) per call; and its outputs."""
    from rbmcap.baseline import Solver
    from rbmcap.evaluation.methods import WARM_UP_FRAMES, WARM_UP_ITERATIONS
    from rbmcap.inference import Predictor

    calls = []
    predict, solve = Predictor.predict, Solver.solve

    def spy_predict(self, pos, rot, valid):
        calls.append(("network", _hidden(valid)))
        return predict(self, pos, rot, valid)

    def spy_solve(self, pos, rot, valid=None, **kwargs):
        warm_up = kwargs.get("iterations") == WARM_UP_ITERATIONS and len(pos) <= WARM_UP_FRAMES
        who = "hybrid" if kwargs.get("init") is not None else "baseline"
        if not warm_up:  # a method's untimed first solve, from its own start
            calls.append((who, _hidden(valid)))
        return solve(self, pos, rot, valid, **kwargs)

    out = tmp_path_factory.mktemp("spied") / "eval"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Predictor, "predict", spy_predict)
        mp.setattr(Solver, "solve", spy_solve)
        metrics = _run_json(
            checkpoint,
            tiny_dataset,
            out,
            "--occlude",
            "left_hand",
            "--occlude",
            "left_foot,right_foot",
        )
    return {"calls": calls, "metrics": metrics, "out": out}


def _hidden(valid) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(~np.asarray(valid).any(0)))


def test_hidden_plates_are_invalid_for_every_method(spied):
    by_condition = {}
    for who, hidden in spied["calls"]:
        by_condition.setdefault(hidden, set()).add(who)
    everyone = {"network", "baseline", "hybrid"}
    # every plate seen, then each condition: each method ran and was given the plates invalid
    assert by_condition == {(): everyone, (LEFT_HAND,): everyone, FEET: everyone}


def test_hidden_plate_data_is_never_read(spied, checkpoint, corrupted, tmp_path):
    """Garbage in the hidden plate's data changes nothing; with the plate seen it does."""
    garbage = _run_json(checkpoint, corrupted, tmp_path / "eval", "--occlude", "left_hand")
    clean = spied["metrics"]
    for key in ("network", "baseline_6dof", "hybrid"):
        hidden_clean = clean["occlusions"][0]["methods"][key]["metrics"]
        hidden_garbage = garbage["occlusions"][0]["methods"][key]["metrics"]
        for name in ("mpjpe_mm", "pa_mpjpe_mm", "joint_rotation_deg", "betas_error"):
            assert hidden_garbage[name] == pytest.approx(hidden_clean[name], rel=1e-6), (key, name)
        # seen, the garbage is read: the corruption is real
        seen_garbage = garbage["methods"][key]["metrics"]["mpjpe_mm"]
        assert seen_garbage > clean["methods"][key]["metrics"]["mpjpe_mm"] + 1.0, key
    # hiding the (clean) plate changes the network's answer: the mask reaches it
    seen = clean["methods"]["network"]["metrics"]["mpjpe_mm"]
    assert clean["occlusions"][0]["methods"]["network"]["metrics"]["mpjpe_mm"] != seen


def test_report_names_the_hidden_plates(spied):
    metrics, out = spied["metrics"], spied["out"]
    assert metrics["options"]["occlude"] == [["left_hand"], ["left_foot", "right_foot"]]
    hand, feet = metrics["occlusions"]
    assert hand["occluded"] == ["left_hand"] and feet["occluded"] == ["left_foot", "right_foot"]
    assert hand["near_joints"] == ["left_wrist", "left_hand"]
    assert feet["near_joints"] == ["left_ankle", "right_ankle", "left_foot", "right_foot"]
    seen = metrics["methods"]
    for cond in (hand, feet):
        assert set(cond["methods"]) == {"network", "baseline_6dof", "hybrid"}
        for key, m in cond["methods"].items():
            # near: the per-joint errors averaged over the joints near the hidden plates
            idx = [_joint(j) for j in cond["near_joints"]]
            assert m["near_mpjpe_mm"] == pytest.approx(np.mean([m["per_joint_mm"][i] for i in idx]))
            before = np.mean([seen[key]["per_joint_mm"][i] for i in idx])
            assert m["all_seen"]["near_mpjpe_mm"] == pytest.approx(before)
            ratio = m["metrics"]["mpjpe_mm"] / seen[key]["metrics"]["mpjpe_mm"]
            assert m["mpjpe_ratio_to_all_seen"] == pytest.approx(ratio)
    claims = [c for c in metrics["claims"] if "hidden" in c["claim"]]
    assert [c["claim"] for c in claims] == [
        "network MPJPE with left_hand hidden ≤ 1.5 × with every plate seen",
        "network MPJPE with left_foot, right_foot hidden ≤ 1.5 × with every plate seen",
    ]
    assert claims[0]["holds"] == (hand["methods"]["network"]["mpjpe_ratio_to_all_seen"] <= 1.5)
    report = (out / "report.md").read_text()
    assert "## Occlusion" in report and "| left_foot, right_foot | network" in report
    assert "joints near left_hand: left_wrist, left_hand" in report
    rows = list(csv.DictReader(open(out / "per_sequence.csv")))
    assert {r["occluded"] for r in rows} == {"", "left_hand", "left_foot+right_foot"}
    assert {(r["method"], r["occluded"]) for r in rows if r["occluded"]} == {
        (k, c)
        for k in ("network", "baseline_6dof", "hybrid")
        for c in ("left_hand", "left_foot+right_foot")
    }


def _joint(name: str) -> int:
    from rbmcap.skeleton import SMPL_JOINT_NAMES

    return SMPL_JOINT_NAMES.index(name)


@pytest.mark.parametrize(
    ("occlude", "needle"),
    [
        (["left_hnd"], "marker set 'rbm14' has no plate 'left_hnd'; its plates: head, chest,"),
        (["left_hand,right_fot"], "no plate 'right_fot'"),
        ([","], "occlude: an empty plate group"),
    ],
)
def test_unknown_plate_is_one_line_exit_2(
    checkpoint, tiny_dataset, tmp_path, capsys, occlude, needle
):
    argv = [
        "eval",
        "--ckpt",
        str(checkpoint),
        "--data",
        str(tiny_dataset),
        "--out",
        str(tmp_path / "o"),
    ]
    for group in occlude:
        argv += ["--occlude", group]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_occlude_groups_from_strings_and_lists():
    assert EvalOptions(ckpt="c", data="d", occlude="left_foot, right_foot").occlude == (
        ("left_foot", "right_foot"),
    )
    groups = ["left_hand", "left_foot,right_foot", ("right_foot", "left_foot"), "left_hand,"]
    assert occlusion_groups(groups) == (("left_hand",), ("left_foot", "right_foot"))
    assert EvalOptions(ckpt="c", data="d").occlude == ()
    with pytest.raises(ConfigError, match="empty plate group"):
        EvalOptions(ckpt="c", data="d", occlude=[" "])


def test_joints_near_a_plate_are_its_segment_ends():
    markers = [
        {"name": "left_shin", "anchor": {"joint": "left_knee"}},
        {"name": "chest", "anchor": {"joint": "spine3"}},
        {"name": "bare"},
    ]
    assert joints_near(("left_shin",), markers) == ("left_knee", "left_ankle")
    assert joints_near(("chest", "bare"), markers) == (
        "spine3",
        "neck",
        "left_collar",
        "right_collar",
    )
