"""SIGTERM stops ``train.py`` with one line naming the checkpoint to resume from, status 143, no
traceback, also when it reaches the data-loading workers too (``timeout``, a cluster's limit)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from helpers.training import TRAIN_PY, tiny_run

from rbmcap.training.stop import Terminated, terminated, watch_sigterm


@pytest.mark.parametrize("group", [True, False], ids=["process group", "main process"])
def test_sigterm_stops_training_with_one_line_and_status_143(group, tmp_path, tiny_dataset):
    out = tmp_path / "run"
    argv = [
        sys.executable,
        str(TRAIN_PY),
        f"hydra.run.dir={out}",
        *tiny_run(tiny_dataset, "trainer.max_epochs=500", "data.num_workers=2", "logger=none"),
        f"paths.root_dir={tmp_path}",
    ]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    last = out / "checkpoints" / "last.ckpt"
    deadline = time.monotonic() + 300
    while not last.is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert last.is_file(), "no epoch ended"
    time.sleep(1.0)  # into a later epoch, workers running
    if group:
        os.killpg(proc.pid, signal.SIGTERM)
    else:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    assert err.strip().splitlines()[-1] == (
        f"train: stopped by SIGTERM; resume from its last epoch with ckpt_path={last}"
    )


def test_sigterm_outside_lightnings_loop_stops_at_once():
    before = signal.getsignal(signal.SIGTERM)
    try:
        watch_sigterm()
        assert not terminated()
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1.0)
        assert terminated()
    finally:
        signal.signal(signal.SIGTERM, before)
