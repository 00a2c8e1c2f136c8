"""rbmcap eval saves each sequence (plates, truth, every method's answer) for viewers and
renderers: the saved answers are the scored ones, and the truth is the dataset's."""

from __future__ import annotations

import csv
import os

import numpy as np
import pytest

from rbmcap.cli.main import main
from rbmcap.dataset import RBMDataset
from rbmcap.errors import DataError
from rbmcap.evaluation.saved import load_sequences, worst_sequence
from rbmcap.metrics import evaluate_sequence


@pytest.fixture(scope="module")
def evaluated(checkpoint, tiny_dataset, tmp_path_factory):
    import matplotlib

    out = tmp_path_factory.mktemp("saved") / "eval"
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # the report's plots must leave a notebook's backend alone
    try:
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
                "--max-frames",
                "40",
                "--frames-per-sequence",
                "25",
                "--solver-iterations",
                "5",
                "--out",
                str(out),
            ]
        )
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
    assert code == 0
    return out


def test_every_sequence_is_saved_with_truth_plates_and_answers(evaluated, tiny_dataset):
    saved = load_sequences(evaluated)
    data = RBMDataset(tiny_dataset, "test")
    assert [s.name for s in saved] == [e.name for e in data.sequences][: len(saved)]
    assert [s.frames for s in saved] == [25, 15]
    umask = os.umask(0)
    os.umask(umask)
    for path in sorted((evaluated / "sequences").glob("*.npz")):  # readable as open() makes files
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    for seq in saved:
        assert seq.methods == ["truth", "network", "baseline_6dof"]
        arrays = data.sequence(seq.name)
        np.testing.assert_allclose(seq.pos, arrays["rbm_pos"][: seq.frames], atol=1e-6)
        np.testing.assert_array_equal(seq.valid, arrays["rbm_valid"][: seq.frames])
        truth = seq.motion("truth")
        np.testing.assert_allclose(truth.poses, arrays["poses"][: seq.frames], atol=1e-6)
        assert seq.rot.shape == (seq.frames, len(seq.plate_names), 3, 3)
        assert seq.motion("network").poses.shape == (seq.frames, 24, 3)


def test_saved_answers_score_as_reported(evaluated, standin):
    rows = {
        (r["method"], r["sequence"]): r
        for r in csv.DictReader(open(evaluated / "per_sequence.csv"))
    }
    for seq in load_sequences(evaluated):
        truth = seq.params["truth"]
        for key in ("network", "baseline_6dof"):
            m = evaluate_sequence(standin, seq.params[key], truth, seq.fps, vertices=False)
            reported = float(rows[(key, seq.name)]["mpjpe_mm"])
            assert m.mean["mpjpe_mm"] == pytest.approx(reported, rel=1e-3), (key, seq.name)


def test_worst_sequence_and_name_filter(evaluated):
    rows = [
        r for r in csv.DictReader(open(evaluated / "per_sequence.csv")) if r["method"] == "network"
    ]
    worst = max(rows, key=lambda r: float(r["mpjpe_mm"]))["sequence"]
    assert worst_sequence(evaluated) == worst
    assert [s.name for s in load_sequences(evaluated, worst)] == [worst]
    with pytest.raises(DataError, match="no saved sequence matches"):
        load_sequences(evaluated, "no-such-*")
    with pytest.raises(DataError, match="no row for method"):
        worst_sequence(evaluated, "nope")
