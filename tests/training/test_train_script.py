"""``train.py`` itself, run as a user would: a subprocess, from another working directory, with
the packaged configuration (``pkg://rbmcap.conf``) and one fast_dev_run step."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.training import run_train_py

from rbmcap.errors import DataError

RESULT_KEYS = {
    "best_checkpoint",
    "last_checkpoint",
    "best_val_mpjpe_mm",
    "val_metrics",
    "epochs",
    "output_dir",
    "data_path",
}


def _json_result(stdout: str) -> dict:
    """The JSON object ``train.py`` prints last (Lightning may print lines before it)."""
    start = stdout.rindex("\n{\n") + 1 if "\n{\n" in stdout else stdout.index("{")
    return json.loads(stdout[start:])


def test_train_py_runs_from_another_directory(tmp_path, tiny_dataset):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_train_py(
        elsewhere,
        "+trainer.fast_dev_run=true",
        f"paths.root_dir={tmp_path / 'root'}",
        f"data.path={tiny_dataset}",
        "data.window=30",
        "data.batch_size=4",
        "model=mlp",
        "model.hidden_dim=32",
        "model.num_blocks=1",
        "trainer.enable_progress_bar=false",
        "logger=csv",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = _json_result(proc.stdout)
    assert set(result) == RESULT_KEYS
    assert result["data_path"] == str(tiny_dataset)
    out = Path(result["output_dir"])
    assert out.is_relative_to(tmp_path / "root" / "outputs" / "train"), out
    assert (out / ".hydra" / "config.yaml").is_file()  # Hydra wrote its record there
    assert result["epochs"] == 1 and "val/mpjpe_mm" in result["val_metrics"]
    assert not any(elsewhere.iterdir()), "nothing written to the working directory"


def test_a_user_mistake_is_one_error_line_and_its_exit_status(tmp_path):
    proc = run_train_py(
        tmp_path,
        f"data.path={tmp_path / 'nothing'}",
        "data.generate=null",
        f"paths.root_dir={tmp_path}",
    )
    assert proc.returncode == DataError.exit_code == 5, proc.stderr[-3000:]
    assert "train: error:" in proc.stderr and "no dataset" in proc.stderr
    assert "Traceback" not in proc.stderr
