"""A genuine (non-editable) wheel install of rbmcap works from any directory.

The package is built from a copy of the working tree and installed with pip into a fresh virtual
environment; its dependencies come from the project's environment (a ``.pth`` line appends that
site-packages *after* the new one, and ``.pth`` files there, such as the editable install's
finder, are not run), so the check takes well under a minute and needs no network. Every command
then runs from an unrelated directory, so nothing can be found through the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from helpers.shared import REPO

pytestmark = pytest.mark.slow


def _copy_checkout(dst: Path) -> None:
    """Copy what a fresh clone would hold (files git tracks or would add), nothing built."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=REPO,
            capture_output=True,
            check=True,
            timeout=60,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        if (REPO / name).is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, dst / name)


def _run(args, cwd: Path, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv bin folder, environment, working directory) of a fresh wheel install of rbmcap."""
    root = tmp_path_factory.mktemp("install")
    src = root / "src"
    _copy_checkout(src)
    venv = root / "venv"
    base = getattr(sys, "_base_executable", None) or sys.executable
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = site / "site-packages"
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        WANDB_MODE="disabled",
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    start = time.perf_counter()
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            venv / "bin" / "python",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-cache-dir",
            "--quiet",
            src,
        ],
        cwd=root,
        env=env,
    )
    seconds = time.perf_counter() - start
    assert seconds < 120, f"the install took {seconds:.0f} s"
    work = root / "elsewhere"
    work.mkdir()
    return venv / "bin", env, work


def test_the_install_is_a_wheel_with_the_packaged_configuration(installed):
    bin_dir, env, work = installed
    code = (
        "import json, rbmcap, rbmcap.config.packaged as c; "
        "print(json.dumps([rbmcap.__file__, str(c.conf_dir()), c.conf_names('markers')]))"
    )
    module, conf, markers = json.loads(_run([bin_dir / "python", "-c", code], work, env).stdout)
    venv = bin_dir.parent
    assert Path(module).is_relative_to(venv) and Path(conf).is_relative_to(venv)
    assert not Path(module).is_relative_to(REPO)
    assert {"rbm14", "rbm_a", "moshpp53"} <= set(markers)


def test_the_wheel_ships_the_pretrained_model_by_name(installed):
    bin_dir, env, work = installed
    out = _run([bin_dir / "rbmcap", "pretrained", "list", "--json"], work, env).stdout
    cards = json.loads(out)
    assert "standin-rbm14" in cards and cards["standin-rbm14"]["check"]["mpjpe_mm"]["mean"] > 0
    code = (
        "from rbmcap.inference import Predictor; "
        "print(Predictor.from_checkpoint('standin-rbm14').marker_set)"
    )
    assert _run([bin_dir / "python", "-c", code], work, env).stdout.strip() == "rbm14"


def test_body_info_as_a_command_and_as_a_module(installed):
    bin_dir, env, work = installed
    for argv in ([bin_dir / "rbmcap"], [bin_dir / "python", "-m", "rbmcap"]):
        out = _run([*argv, "body", "info", "standin", "--json"], work, env).stdout
        info = json.loads(out)
        assert info["source"] == "standin" and info["num_vertices"] > 5000


def test_synth_with_packaged_markers_and_realism(installed):
    bin_dir, env, work = installed
    rbmcap = bin_dir / "rbmcap"
    _run(
        [
            rbmcap,
            "motion",
            "procedural",
            "--out",
            "motions",
            "--num",
            "2",
            "--seed",
            "0",
            "--quiet",
        ],
        work,
        env,
    )
    _run(
        [
            rbmcap,
            "synth",
            "--motions",
            "motions",
            "--out",
            "dataset",
            "--markers",
            "rbm14",
            "--realism",
            "realistic",
            "--no-progress",
        ],
        work,
        env,
    )
    info = json.loads(_run([rbmcap, "dataset", "info", "dataset", "--json"], work, env).stdout)
    assert info["marker_set"] == "rbm14" and info["realism"] == "realistic"
    assert info["sequences"] == 2 and info["frames"] > 0


def test_training_entry_point_composes_its_packaged_configuration(installed):
    bin_dir, env, work = installed
    out = _run([bin_dir / "rbmcap-train", "--cfg", "job"], work, env).stdout
    assert "markers:" in out and "model:" in out
