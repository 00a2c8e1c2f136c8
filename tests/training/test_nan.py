"""A NaN or infinite loss stops training with one DataError naming the epoch, the step and the loss
term (exit status 5 from train.py), and no checkpoint ever holds a NaN or infinite weight."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from helpers.training import compose_train, run_train_py, tiny_run

from rbmcap.errors import EXIT_DATA, DataError
from rbmcap.training.guards import AtomicCheckpointIO, check_finite_loss, check_finite_weights
from rbmcap.training.module import RegressorLitModule


def test_the_loss_check_names_the_epoch_the_step_and_each_bad_term():
    good = {"rotation": torch.tensor(0.5), "total": torch.tensor(0.5)}
    check_finite_loss(good, 0, 0)
    bad = {
        "rotation": torch.tensor(float("nan")),
        "joints": torch.tensor(float("inf")),
        "betas": torch.tensor(0.1),
        "total": torch.tensor(float("nan")),
    }
    with pytest.raises(
        DataError,
        match=r"epoch 2, step 17: the loss became NaN "
        r"\(loss terms: rotation NaN, joints infinite\)",
    ) as err:
        check_finite_loss(bad, 2, 17)
    assert err.value.exit_code == EXIT_DATA


def test_weights_with_nan_are_never_saved(tmp_path):
    state = {"net.w": torch.ones(3), "net.b": torch.tensor([0.0, float("-inf")])}
    with pytest.raises(DataError, match=r"1 weight tensors hold NaN or infinite values \(net.b\)"):
        check_finite_weights(state, "x.ckpt")
    with pytest.raises(DataError, match="not saved"):
        AtomicCheckpointIO().save_checkpoint({"state_dict": state}, tmp_path / "x.ckpt")
    assert list(tmp_path.iterdir()) == []  # no file, no temporary either
    AtomicCheckpointIO().save_checkpoint({"state_dict": {"w": torch.ones(2)}}, tmp_path / "x.ckpt")
    assert [p.name for p in tmp_path.iterdir()] == ["x.ckpt"]


def _nan_from(monkeypatch, epoch: int, batch: int, term: str = "rotation") -> None:
    """Make loss term ``term`` NaN from training batch ``batch`` of epoch ``epoch`` on."""
    losses = RegressorLitModule._losses

    def poisoned(self, out, batch_):
        terms, joints = losses(self, out, batch_)
        if self.training and (self.current_epoch, self._batch) >= (epoch, batch):
            terms[term] = terms[term] * float("nan")
            terms["total"] = terms["total"] + terms[term]
        return terms, joints

    step = RegressorLitModule.training_step

    def counted(self, batch_, batch_idx):
        self._batch = batch_idx
        return step(self, batch_, batch_idx)

    monkeypatch.setattr(RegressorLitModule, "_losses", poisoned)
    monkeypatch.setattr(RegressorLitModule, "training_step", counted)


def _finite_checkpoints(folder: Path) -> dict[str, int]:
    """Every checkpoint under ``folder`` (name → global step); each must load with finite
    weights."""
    found = {}
    for path in sorted(folder.rglob("*.ckpt")):
        state = torch.load(path, weights_only=True)
        assert all(bool(torch.isfinite(v).all()) for v in state["state_dict"].values()), path
        found[path.name] = state["global_step"]
    return found


def test_a_nan_loss_stops_training_and_the_last_good_checkpoint_stays(
    tmp_path, tiny_dataset, monkeypatch
):
    from rbmcap.training.run import train

    monkeypatch.setenv("RBMCAP_ROOT", str(tmp_path))
    _nan_from(monkeypatch, epoch=1, batch=1, term="joints")
    cfg = compose_train(*tiny_run(tiny_dataset, "logger=none", "trainer.max_epochs=3"))
    with pytest.raises(
        DataError,
        match=r"epoch 1, step 4: the loss became NaN "
        r"\(loss terms: joints NaN\)",
    ):
        train(cfg, tmp_path / "run")
    # epoch 0 ended with a checkpoint (step 3); nothing was saved after the NaN
    saved = _finite_checkpoints(tmp_path / "run")
    assert saved and set(saved.values()) == {3} and "last.ckpt" in saved
    assert not [p for p in (tmp_path / "run").rglob(".*") if p.is_file()]  # no temporaries


class _PoisonWeights(L.Callback):
    """Puts a NaN into the weights just before the first validation (so before a checkpoint)."""

    def on_validation_start(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            with torch.no_grad():
                next(pl_module.model.net.parameters()).view(-1)[0] = float("nan")


def test_weights_that_became_nan_are_not_checkpointed(tmp_path, tiny_dataset, monkeypatch):
    from rbmcap.training import run

    monkeypatch.setenv("RBMCAP_ROOT", str(tmp_path))
    build = run.build_trainer

    def poisoned(cfg, output_dir):
        trainer, checkpoint = build(cfg, output_dir)
        trainer.callbacks.insert(0, _PoisonWeights())
        return trainer, checkpoint

    monkeypatch.setattr(run, "build_trainer", poisoned)
    with pytest.raises(DataError, match=r"not saved: 1 weight tensors hold NaN.*net\."):
        run.train(compose_train(*tiny_run(tiny_dataset, "logger=none")), tmp_path / "run")
    assert _finite_checkpoints(tmp_path / "run") == {}
    assert not [p for p in (tmp_path / "run").rglob("*") if p.is_file() and "ckpt" in p.name]


def test_train_py_exits_5_with_one_line_when_the_loss_diverges(tmp_path, tiny_dataset):
    # an absurd learning rate: the first step throws the weights so far that the loss overflows
    proc = run_train_py(
        tmp_path,
        f"paths.root_dir={tmp_path / 'root'}",
        "optim.lr=1e30",
        *tiny_run(tiny_dataset, "logger=none", "trainer.max_epochs=2"),
    )
    assert proc.returncode == EXIT_DATA, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("train: error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "epoch 0, step 1: the loss became" in lines[0], lines[0]
    assert _finite_checkpoints(tmp_path / "root") == {}
