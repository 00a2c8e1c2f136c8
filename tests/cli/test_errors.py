"""The command line's error contract: one line on stderr and a documented exit status per kind
of error (rbmcap.errors), never a traceback for a user mistake."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
from helpers.shared import REPO

from rbmcap import errors
from rbmcap.cli import main as cli


@pytest.mark.parametrize(
    ("raised", "code"),
    [
        (errors.ConfigError("x.yaml: bad value"), 2),
        (errors.FormatError("take.csv:12:3: not a number"), 3),
        (FileNotFoundError(2, "No such file", "gone.csv"), 3),
        (errors.ModelError("no such body model"), 4),
        (errors.DataError("take.npz: sequence 'walk', frame 4: NaN"), 5),
        (errors.Interrupted("stopped"), 130),
        (KeyboardInterrupt(), 130),
    ],
)
def test_each_error_kind_has_its_own_exit_status_and_one_line(monkeypatch, capsys, raised, code):
    def fail(args):
        raise raised

    parser = argparse.ArgumentParser()
    parser.set_defaults(func=fail)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    assert cli.main([]) == code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("rbmcap: ")


def test_the_exit_statuses_are_distinct_and_documented():
    kinds = [
        errors.ConfigError,
        errors.FormatError,
        errors.ModelError,
        errors.DataError,
        errors.Interrupted,
    ]
    codes = [k.exit_code for k in kinds]
    assert len(set(codes)) == len(codes) and 1 not in codes  # 1 is Python's own, for bugs
    for kind in kinds:
        assert f"{kind.exit_code:<10} :class:`{kind.__name__}`" in errors.__doc__


def test_usage_errors_from_argparse_exit_2(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["eval", "--no-such-option"])
    assert stop.value.code == errors.EXIT_USAGE


def test_location_names_file_line_column_sequence_and_frame():
    assert errors.location("take.csv", 12, 3) == "take.csv:12:3"
    assert errors.location("take.csv", 12) == "take.csv:12"
    assert errors.location("m.npz", sequence="walk", frame=7) == "m.npz: sequence 'walk', frame 7"
    assert errors.location(sequence=2, frame=0) == "sequence 2, frame 0"


@pytest.mark.parametrize(
    ("script", "make_input", "code"),
    [
        ("data_prep/synthesize.py", lambda d: f"motions={d / 'absent'}", errors.EXIT_FORMAT),
        ("data_prep/synthesize.py", lambda d: _junk_motions(d), errors.EXIT_DATA),
        ("train.py", lambda d: f"data=amass data.path={d / 'absent'}", errors.EXIT_DATA),
    ],
    ids=["synthesize-missing-folder", "synthesize-junk-motions", "train-missing-motions"],
)
def test_the_hydra_scripts_exit_with_the_errors_status_and_one_line(
    tmp_path, script, make_input, code
):
    """The Hydra twins (data_prep/synthesize.py, train.py) report a user's mistake the way the
    rbmcap command does: one line, the error's own exit status, no traceback."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0"}
    argv = [
        sys.executable,
        str(REPO / script),
        *make_input(tmp_path).split(),
        f"hydra.run.dir={tmp_path / 'run'}",
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()  # train.py logs its progress on stderr first
    assert [line for line in lines if ": error: " in line] == lines[-1:], done.stderr
    assert lines[-1].startswith(f"{Path(script).stem}: error: "), done.stderr


def _junk_motions(folder):
    motions = folder / "motions"
    motions.mkdir()
    (motions / "walk_poses.npz").write_bytes(b"not a zip")
    return f"motions={motions}"


def test_a_warning_prints_as_one_line(tmp_path):
    """A C3D whose header promises more frames than it holds imports with one warning line."""
    import ezc3d
    import numpy as np

    c3d = ezc3d.c3d()
    c3d["parameters"]["POINT"]["RATE"]["value"] = [100.0]
    c3d["parameters"]["POINT"]["LABELS"]["value"] = ["A", "B", "C"]
    c3d["data"]["points"] = np.random.default_rng(0).random((4, 3, 50))
    whole = tmp_path / "whole.c3d"
    c3d.write(str(whole))
    cut = tmp_path / "cut.c3d"
    cut.write_bytes(whole.read_bytes()[:-512])
    # as a user runs it (pytest records warnings instead of printing them)
    run = subprocess.run(
        [sys.executable, "-m", "rbmcap", "import", str(cut), "--out", str(tmp_path / "cut.npz")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    err = run.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rbmcap: warning: ") and "holds 42 frames" in err[0]
