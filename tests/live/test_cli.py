"""``rbmcap live`` on the command line: a replay to recordings, subjects and calibrations named
on the command line, live calibration, and one error line for every user mistake."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers.live import prefixed, synthetic_take

from rbmcap.calibrate.calibration import Calibration
from rbmcap.cli.main import main
from rbmcap.live.pipeline import host_port
from rbmcap.live.sources.address import open_source
from rbmcap.motion.smpl_motion import SMPLMotion

TRACE = ["--backend", "trace"]


@pytest.fixture(scope="module")
def take_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("live") / "take.npz"
    return synthetic_take(240, fps=240.0).save(path)


@pytest.mark.exclusive  # replays in real time and counts the frames posed
def test_a_replay_goes_live_to_a_recording_and_a_json_summary(take_file, tmp_path, capsys):
    out = tmp_path / "rec.npz"
    argv = ["live", f"replay:{take_file}", *TRACE, "--rate", "120", "--record", str(out)]
    assert main([*argv, "--bvh", str(tmp_path / "rec.bvh"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["phases"] == 4 and summary["processed"] > 150 and summary["threads"] == 1
    assert summary["lost"] == 0 and not summary["interrupted"]
    motion = SMPLMotion.load(out)
    assert motion.num_frames == summary["processed"] and motion.fps == 240.0
    assert (tmp_path / "rec.bvh").stat().st_size > 0
    assert sorted(summary["written"]) == sorted([str(out), str(tmp_path / "rec.bvh")])


def test_two_subjects_each_get_their_own_recording_waiting_hot(tmp_path, capsys):
    both = prefixed(synthetic_take(120, fps=60.0), ["alice", "bob"]).save(tmp_path / "two.npz")
    out = tmp_path / "rec.npz"
    argv = ["live", f"replay:{both}", *TRACE, "--rate", "60", "--record", str(out), "--hot"]
    assert main([*argv, "--subject", "alice", "--subject", "bob", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["subjects"] == ["alice", "bob"] and summary["hot"] is True
    alice, bob = (SMPLMotion.load(tmp_path / f"rec_{n}.npz") for n in ("alice", "bob"))
    assert alice.num_frames == bob.num_frames == summary["processed"]
    assert np.mean(bob.trans[:, 0] - alice.trans[:, 0]) == pytest.approx(2.0, abs=0.2)


def test_threads_sets_torchs_threads_while_posing(take_file, capsys):
    argv = ["live", f"replay:{take_file}", *TRACE, "--rate", "inf", "--frames", "10"]
    assert main([*argv, "--threads", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["threads"] == 2 and summary["processed"] == 10


def test_precision_holds_the_networks_weights_narrower(take_file, tmp_path, capsys):
    """The same frames posed with int8 weights: the summary says so, and the poses are close to
    float32's but not the same (the narrow network ran)."""
    motions = {}
    for precision in ("float32", "int8"):
        out = tmp_path / f"{precision}.npz"
        argv = ["live", f"replay:{take_file}", *TRACE, "--rate", "inf", "--frames", "12"]
        assert main([*argv, "--precision", precision, "--record", str(out), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["precision"] == precision
        motions[precision] = SMPLMotion.load(out)
    difference = np.abs(motions["int8"].poses - motions["float32"].poses).max()
    assert 0 < difference < 0.1


@pytest.mark.slow  # the fit over frames: about 40 s on 2 cores
@pytest.mark.acceptance  # the same length in CI and in make acceptance
def test_live_calibration_records_fits_writes_and_streams_on_with_it(take_file, tmp_path, capsys):
    calib = tmp_path / "calib.yaml"
    argv = ["live", f"replay:{take_file}", *TRACE, "--calibrate", "0.1", "--calib-out"]
    assert main([*argv, str(calib), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    loaded = Calibration.load(calib)
    assert len(loaded.plates) == 14 and str(calib) in summary["written"]
    assert summary["processed"] > 0  # posing went on after the fit


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["live", "udp://somewhere"], "expected natnet://HOST[:PORT]"),
        (["live", "natnet://127.0.0.1:port"], "the port is not a number"),
        (["live", "replay:"], "expected replay:FILE"),
        (["live", "replay:/no/such/take.npz"], "no such file"),
        (["live", "REPLAY", "--calibrate", "1"], "--calibrate needs --calib-out"),
        (["live", "REPLAY", "--vmc", "host:99999"], "outside 0..65535"),
        (["live", "REPLAY", "--udp-json", "host:x"], "expected [HOST:]PORT"),
        (["live", "REPLAY", "--subject", "a", "--calib", "c.yaml"], "--calib is for one"),
        (["live", "REPLAY", "--subject", "a", "--subject", "a"], "given twice"),
        (["live", "REPLAY", "--subject", "carol"], "subject 'carol'"),
        (["live", "REPLAY", "--record", "/no/such/dir/rec.npz"], "rec.npz"),
        (["live", "REPLAY", "--threads", "0"], "--threads 0: expected a whole number"),
    ],
)
def test_user_mistakes_are_one_error_line_and_a_nonzero_exit(take_file, capsys, argv, expected):
    argv = [str(take_file) if a == "REPLAY" else a for a in argv]
    argv = [f"replay:{take_file}" if a == str(take_file) else a for a in argv]
    code = main([*argv, *TRACE])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert err.startswith("rbmcap: error:") and err.count("\n") == 0, err
    assert expected in err


def test_addresses_default_to_loopback():
    assert host_port("39539") == ("127.0.0.1", 39539)
    assert host_port(":8080") == ("127.0.0.1", 8080)
    assert host_port("0.0.0.0:8080") == ("0.0.0.0", 8080)
    source = open_source("natnet://")
    assert source.name.startswith("natnet://127.0.0.1")
