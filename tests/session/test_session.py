"""``rbmcap session`` on a folder built from the real Plug-in Gait session: subject A's static and
walk, a copy of the walk, a C3D cut before its first frame, a C3D without the segment frames the
plates are read from, and a subject B without a static.

What must hold: the good trials are processed and each bad one is one clear line (exit status 1);
nothing half-written is left; a second run redoes nothing in at most a tenth of the first's time;
a run killed with SIGKILL at random moments, then run again, ends with the outputs of an
uninterrupted run. The session's spec is checked without running anything.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import ezc3d
import numpy as np
import pytest
from helpers.acceptance import length
from helpers.shared import PIG, require

from rbmcap.cli import main as cli
from rbmcap.errors import ConfigError
from rbmcap.session import load_session

STATIC = "PiG_Calibration-FlatFoot-One.c3d"
WALK = "PiG_Motion-FlatFoot-One.c3d"
SESSION = f"""plates: plug-in-gait
subjects:
  A:
    static: {STATIC}
    trials: [{WALK}, walk_copy.c3d, cut.c3d, no_plates.c3d]
    calibrate: [{WALK}]
  B:
    trials: [walk_of_b.c3d]
"""
KEPT = ("session.json", "session.log", "report.html")
"""Files of a run that hold its timings, so differ between runs."""


def _outputs(out: Path) -> dict[str, bytes]:
    """Every output file's bytes but the run's own records, by relative path."""
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and p.name not in KEPT
    }


def _make_folder(root: Path) -> Path:
    folder = root / "session"
    folder.mkdir()
    for name in (STATIC, WALK):
        shutil.copy(require(PIG) / name, folder / name)
    shutil.copy(folder / WALK, folder / "walk_copy.c3d")
    shutil.copy(folder / WALK, folder / "walk_of_b.c3d")
    whole = (folder / WALK).read_bytes()
    first_block = int.from_bytes(whole[16:18], "little")  # header word 9: the data's block
    (folder / "cut.c3d").write_bytes(whole[: 512 * (first_block - 1)])
    c3d = ezc3d.c3d()  # markers, but none of the segment frames (LFEO, ...) plates come from
    c3d["parameters"]["POINT"]["RATE"]["value"] = [100.0]
    c3d["parameters"]["POINT"]["LABELS"]["value"] = ["LASI", "RASI", "C7"]
    c3d["data"]["points"] = np.random.default_rng(0).random((4, 3, 40)) * 1000
    c3d.write(str(folder / "no_plates.c3d"))
    (folder / "session.yaml").write_text(SESSION)
    return folder


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """The session processed once (in this process); its folder, output, result and seconds."""
    folder = _make_folder(tmp_path_factory.mktemp("sess"))
    out = folder.parent / "out"
    t0 = time.perf_counter()
    code = cli.main(["session", str(folder), "--out", str(out)])
    seconds = time.perf_counter() - t0
    return folder, out, code, json.loads((out / "session.json").read_text()), seconds


@pytest.mark.slow
@pytest.mark.acceptance  # with the kill runs: the session is processed once for all of them
def test_the_good_trials_are_processed_and_each_bad_one_is_one_line(first_run):
    _, out, code, result, _ = first_run
    status = {t["name"]: t for t in result["trials"]}
    assert code == 1 and result["failed"] == 3
    for name in (STATIC, WALK, "walk_copy.c3d"):
        assert status[name]["status"] == "done", status[name]
    for name in (WALK, "walk_copy.c3d"):
        summary = status[name]["summary"]
        assert summary["frames"] == 255 and summary["reference"]["mean_mm"] < 25.0, summary
        assert summary["plate_fit_mm"] < 20.0 and summary["angles"] is not None
    errors = {n: status[n]["error"] for n in ("cut.c3d", "no_plates.c3d", "walk_of_b.c3d")}
    assert "no point data" in errors["cut.c3d"], errors
    assert "no_plates.c3d" in errors["no_plates.c3d"], errors
    assert "subject B: no static trial" in errors["walk_of_b.c3d"], errors
    assert all("\n" not in e for e in errors.values())
    log = (out / "session.log").read_text().splitlines()
    assert sum("FAILED" in line for line in log) == 3
    # nothing half-written: every output has its key (the events CSV is written with the
    # angles'), no failed trial has a motion
    companions = (*KEPT, "cycles.png", "angles.events.csv")
    for path in out.rglob("*"):
        if path.is_file() and path.suffix != ".key" and path.name not in companions:
            assert path.with_name(path.name + ".key").is_file(), path
        assert not path.name.startswith("."), path  # no temporary left
    assert not (out / "trials" / "cut" / "motion.npz").exists()
    report = (out / "report.html").read_text()
    assert "failed: " in report and "cycles.png" in report


@pytest.mark.slow
@pytest.mark.acceptance
def test_a_second_run_redoes_nothing_in_a_tenth_of_the_time(first_run):
    folder, out, _, _, seconds = first_run
    before = _outputs(out)
    t0 = time.perf_counter()
    cli.main(["session", str(folder), "--out", str(out)])
    again = time.perf_counter() - t0
    result = json.loads((out / "session.json").read_text())
    assert all(not t["redone"] or t["status"] == "failed" for t in result["trials"])
    assert _outputs(out) == before
    assert again <= 0.1 * seconds, (again, seconds)


@pytest.mark.slow
@pytest.mark.acceptance
def test_a_run_killed_at_random_moments_resumes_to_the_uninterrupted_outputs(first_run, tmp_path):
    """SIGKILL at a random moment of a run, then the next run from where it stopped; the last
    run ends where an uninterrupted one does (1 kill in CI, 5 in an acceptance run)."""
    folder, reference, _, _, seconds = first_run
    out = tmp_path / "out"
    env = os.environ | {"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    command = [sys.executable, "-m", "rbmcap", "session", str(folder), "--out", str(out)]
    rng = np.random.default_rng(7)
    for _ in range(length(1, 5)):
        run = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        time.sleep(float(rng.uniform(3.0, 3.0 + seconds)))
        if run.poll() is None:
            run.send_signal(signal.SIGKILL)
        run.wait()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert _outputs(out) == _outputs(reference)


def test_the_session_file_is_checked_before_anything_runs(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "static_a.c3d").write_bytes(b"")
    (folder / "walk.c3d").write_bytes(b"")
    spec = load_session(folder)
    assert [s.static for s in spec.subjects] == ["static_a.c3d"]
    assert spec.subjects[0].trials == ("walk.c3d",) and spec.method == "refine"
    (folder / "session.yaml").write_text("subjects:\n  A:\n    trials: [run.c3d]\n")
    with pytest.raises(
        ConfigError, match=r"session.yaml: subjects.A.trials: no trial file 'run.c3d'"
    ):
        load_session(folder)
    (folder / "session.yaml").write_text("methd: refine\n")
    with pytest.raises(ConfigError, match=r"session.yaml: unknown key 'methd'"):
        load_session(folder)
    (folder / "session.yaml").write_text("opensim: {model: gait.osim}\n")
    with pytest.raises(ConfigError, match=r"session.yaml: opensim.model: no such file"):
        load_session(folder)
    (folder / "gait.osim").write_text("<OpenSimDocument/>")
    (folder / "session.yaml").write_text("opensim: {model: gait.osim, mass: heavy}\n")
    with pytest.raises(ConfigError, match=r"session.yaml: opensim.mass: expected kilograms"):
        load_session(folder)
    (folder / "session.yaml").write_text("opensim: {model: gait.osim, mass: 71.5}\n")
    spec = load_session(folder)
    assert spec.opensim["mass"] == 71.5 and spec.opensim["model"] == str(folder / "gait.osim")
    with pytest.raises(ConfigError, match="not a folder"):
        load_session(folder / "nowhere")


@pytest.mark.slow
@pytest.mark.acceptance
def test_a_local_dask_cluster_of_two_workers_gives_the_serial_outputs(first_run, tmp_path):
    folder, reference, _, _, _ = first_run
    out = tmp_path / "out"
    assert cli.main(["session", str(folder), "--out", str(out), "--workers", "2"]) == 1
    assert _outputs(out) == _outputs(reference)


def test_a_batch_cluster_s_job_script_asks_for_one_core_and_the_session_s_options():
    """What ``--jobqueue slurm`` would submit, without a Slurm scheduler (the cluster's own
    scheduler on the loopback only)."""
    from rbmcap.session import jobqueue_cluster

    cluster = jobqueue_cluster(
        "slurm",
        queue="short",
        account="gaitlab",
        memory="4GB",
        walltime="00:30:00",
        scheduler_options={"host": "127.0.0.1", "dashboard_address": None},
    )
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    for line in (
        "#SBATCH -p short",
        "#SBATCH -A gaitlab",
        "#SBATCH --cpus-per-task=1",
        "#SBATCH --mem=4G",
        "#SBATCH -t 00:30:00",
    ):
        assert line in script, script
    assert "--nthreads 1" in script and "tcp://127.0.0.1:" in script
    with pytest.raises(ConfigError, match="jobqueue 'lsf': expected one of slurm, pbs, sge"):
        jobqueue_cluster("lsf")


def test_the_session_file_s_cluster_reaches_the_run(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "static.c3d").write_bytes(b"")
    (folder / "session.yaml").write_text("cluster: {kind: pbs, jobs: 4, queue: long}\n")
    assert load_session(folder).cluster == {"kind": "pbs", "jobs": 4, "queue": "long"}
    (folder / "session.yaml").write_text("cluster: 4\n")
    with pytest.raises(ConfigError, match="cluster: expected a mapping"):
        load_session(folder)
