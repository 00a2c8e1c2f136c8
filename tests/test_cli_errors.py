"""The command line's error contract: one line on stderr and a documented exit status per kind
of error (rbmcap.errors), never a traceback for a user mistake."""

from __future__ import annotations

import argparse

import pytest

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
    kinds = [errors.ConfigError, errors.FormatError, errors.ModelError, errors.DataError,
             errors.Interrupted]  # fmt: skip
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
