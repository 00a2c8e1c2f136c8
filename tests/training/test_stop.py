"""SIGTERM stops ``train.py`` with one line naming the checkpoint to resume from, status 143, no
traceback, also when it reaches the data-loading workers too (``timeout``, a cluster's limit)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers.training import TRAIN_PY, tiny_run

from rbmcap.training.stop import Terminated, stopped_by_sigterm, terminated, watch_sigterm


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


def test_a_worker_death_reported_after_sigterm_prints_nothing(monkeypatch):
    """torch's SIGCHLD handler installed, SIGTERM and SIGCHLD both pending: Python runs SIGTERM's
    handler first (15 < 17), which swaps SIGCHLD's; the pending SIGCHLD must find a handler to
    run, or Python prints "Signal 17 ignored due to race condition" with a traceback."""
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    torch_calls = []
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGCHLD)}
    try:
        signal.signal(signal.SIGCHLD, lambda *_: torch_calls.append(1))
        watch_sigterm()
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGCHLD})
        for signum in (signal.SIGTERM, signal.SIGCHLD):  # to this thread: others may run
            signal.pthread_kill(threading.get_ident(), signum)
        with pytest.raises(Terminated):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGCHLD})
            time.sleep(0.2)
        time.sleep(0.2)
        assert stopped_by_sigterm(wait_s=0.0)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGCHLD})
        for signum, handler in before.items():
            signal.signal(signum, handler)
    assert not torch_calls, "torch's handler ran after SIGTERM"
    assert not unraisable, [str(u.exc_value) for u in unraisable]
