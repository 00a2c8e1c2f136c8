"""rbmcap eval --sequences GLOB: only the matching sequences are evaluated (e.g. the real clips
of a dataset that mixes them with procedural motion)."""

from __future__ import annotations

import csv

from rbmcap.cli.main import main
from rbmcap.dataset import RBMDataset
from rbmcap.errors import EXIT_DATA


def _evaluated(out) -> list[str]:
    with open(out / "per_sequence.csv", newline="") as f:
        return sorted({row["sequence"] for row in csv.DictReader(f)})


def _argv(checkpoint, data, out, *extra):
    return [
        "eval",
        "--ckpt",
        str(checkpoint),
        "--data",
        str(data),
        "--no-vertices",
        "--frames-per-sequence",
        "6",
        "--out",
        str(out),
        *extra,
    ]


def test_only_matching_sequences_are_evaluated(checkpoint, tiny_dataset, tmp_path):
    names = [e.name for e in RBMDataset(tiny_dataset, "test").sequences]
    assert len(names) >= 2
    one = names[-1]
    assert main(_argv(checkpoint, tiny_dataset, tmp_path / "one", "--sequences", one)) == 0
    assert _evaluated(tmp_path / "one") == [one]
    pattern = one.rsplit("/", 1)[0] + "/*"
    assert main(_argv(checkpoint, tiny_dataset, tmp_path / "glob", "--sequences", pattern)) == 0
    assert _evaluated(tmp_path / "glob") == sorted(n for n in names if n.startswith(pattern[:-1]))
    assert main(_argv(checkpoint, tiny_dataset, tmp_path / "all")) == 0
    assert _evaluated(tmp_path / "all") == sorted(names)


def test_a_glob_matching_nothing_is_one_line_data_error(checkpoint, tiny_dataset, tmp_path, capsys):
    out = tmp_path / "none"
    code = main(_argv(checkpoint, tiny_dataset, out, "--sequences", "cmu-iclone/*"))
    assert code == EXIT_DATA
    err = capsys.readouterr().err.strip()
    assert "no sequence of split 'test' matches 'cmu-iclone/*'" in err and "\n" not in err
    assert not out.exists()
