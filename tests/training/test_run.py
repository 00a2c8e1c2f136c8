"""Training: every network runs through Lightning, the module can overfit, checkpoints load
safely, and train.py's wiring trains, checkpoints and resumes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import lightning as L
import pytest
import torch
from helpers.training import SMALL, compose_train, probe_training_start, small_module, tiny_run

from rbmcap.config.packaged import conf_dir
from rbmcap.model.features import FEATURE_KINDS
from rbmcap.training.data import RBMDataModule
from rbmcap.training.module import RegressorLitModule


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same global RNG state (module init, shuffling)."""
    torch.manual_seed(0)


@pytest.mark.parametrize("network", list(SMALL))
def test_fast_dev_run_for_every_network(standin, tiny_dataset, network):
    model = small_module(standin, network, "augment.marker_dropout=0.3", "augment.dropout_span=10")
    data = RBMDataModule(tiny_dataset, window=30, train_stride=30, batch_size=4)
    trainer = L.Trainer(
        fast_dev_run=True,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=data)
    out = model(
        *(
            torch.zeros(1, 5, 14, 3),
            torch.eye(3).expand(1, 5, 14, 3, 3),
            torch.ones(1, 5, 14, dtype=torch.bool),
        )
    )
    assert out["rotmats"].shape == (1, 5, 24, 3, 3) and out["trans"].shape == (1, 5, 3)
    assert model.model.is_causal == (network.startswith("causal") or network == "mlp")  # per-frame


@pytest.mark.parametrize("network", ["transformer", "causal_gru"])
def test_mixed_precision_runs_the_network_alone_in_bfloat16(standin, tiny_dataset, network):
    """``trainer.precision=bf16-mixed``: the plate fit's solve has no bfloat16 kernel and a
    position in metres held in bfloat16 is off by millimetres, so only the network runs in
    half precision; decoding and losses are float32 and equal the float32 run's on its output."""
    model = small_module(standin, network, "plate_fit.enabled=true", "features=anchored")
    data = RBMDataModule(tiny_dataset, window=30, train_stride=30, batch_size=4)
    trainer = L.Trainer(
        fast_dev_run=True,
        accelerator="cpu",
        precision="bf16-mixed",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=data)
    batch = next(iter(data.train_dataloader()))
    model.eval()
    seen = {}
    model.model.net.register_forward_hook(lambda m, i, o: seen.update(dtype=o.dtype, out=o))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(batch["pos"], batch["rot"], batch["valid"])
        terms, joints = model._losses(out, batch)
    assert seen["dtype"] == torch.bfloat16
    assert all(
        v.dtype == torch.float32
        for v in (*out.values(), *terms.values(), joints)
        if isinstance(v, torch.Tensor)
    )
    with torch.no_grad():  # the same network output decoded without autocast
        _, ctx = model.model.encoder(batch["pos"], batch["rot"], batch["valid"])
        plain = model.model.decode_outputs(seen["out"].float(), ctx)
    torch.testing.assert_close(out["rotmats"], plain["rotmats"], atol=1e-6, rtol=0)
    torch.testing.assert_close(out["trans"], plain["trans"], atol=1e-6, rtol=0)
    assert torch.isfinite(terms["total"])


def test_a_tiny_run_overfits_one_batch(standin, tiny_dataset):
    torch.manual_seed(0)
    model = small_module(standin, "mlp", "features=kinematic")
    model.model.net.train()
    batch = next(iter(RBMDataModule(tiny_dataset, window=20, batch_size=4).train_dataloader()))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(300):
        out = model(batch["pos"], batch["rot"], batch["valid"])
        loss = model._losses(out, batch)[0]["total"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])


def test_checkpoint_hyper_parameters_are_plain_data(standin, tiny_dataset, tmp_path):
    model = small_module(standin, "transformer")
    trainer = L.Trainer(
        max_steps=1,
        limit_val_batches=1,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        default_root_dir=tmp_path,
        enable_model_summary=False,
    )
    trainer.fit(model, datamodule=RBMDataModule(tiny_dataset, window=30, batch_size=2))
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    raw = torch.load(path, weights_only=True)  # safe loading: no DictConfig, no pickled classes
    assert raw["hyper_parameters"]["model"]["features"] == "kinematic"
    assert all(name.startswith("model.") for name in raw["state_dict"])
    again = RegressorLitModule.load_from_checkpoint(path, weights_only=True)
    x = (
        torch.randn(1, 8, 14, 3),
        torch.eye(3).expand(1, 8, 14, 3, 3),
        torch.ones(1, 8, 14, dtype=torch.bool),
    )
    model.eval(), again.eval()
    assert torch.allclose(model(*x)["trans"], again(*x)["trans"])


def test_the_training_module_takes_a_shipped_checkpoint_and_refuses_a_flat_optimiser():
    """The shipped layout is the training module's own (Lightning restores it strictly); an
    ``optim`` section of bare numbers (no optimiser and schedule nodes) is one ConfigError."""
    from rbmcap.checkpoint import read_checkpoint
    from rbmcap.errors import ConfigError
    from rbmcap.paths import resolve_checkpoint

    spec = "standin-rbm14-stream"
    module = RegressorLitModule.load_from_checkpoint(resolve_checkpoint(spec), weights_only=True)
    assert module.model.config.fps == 60.0
    hp = read_checkpoint(spec)["hyper_parameters"]
    hp["optim"] = {"lr": 1e-3, "weight_decay": 0.0, "decay": 0.8, "decay_every": 0.1}
    with pytest.raises(ConfigError, match=r"^optim: missing optimizer, scheduler"):
        RegressorLitModule(**hp)


def test_train_py_wiring_trains_checkpoints_and_resumes(tmp_path, tiny_dataset, monkeypatch):
    from rbmcap.training.run import train

    monkeypatch.setenv("RBMCAP_ROOT", str(tmp_path))
    probe = probe_training_start(monkeypatch)
    overrides = tiny_run(tiny_dataset, "logger=csv")
    first = train(compose_train(*overrides), tmp_path / "run1")
    assert first["best_val_mpjpe_mm"] > 0 and Path(first["last_checkpoint"]).is_file()
    metrics = (tmp_path / "run1" / "csv" / "version_0" / "metrics.csv").read_text()
    assert "val/mpjpe_mm" in metrics and "val/joint_angle_deg" in metrics
    saved = torch.load(first["last_checkpoint"], weights_only=True)
    assert saved["global_step"] == 3 and saved["epoch"] == 0

    cfg = compose_train(*overrides, "trainer.max_epochs=2", f"ckpt_path={first['last_checkpoint']}")
    second = train(cfg, tmp_path / "run2")
    # The resumed run starts where the checkpoint ended (a fresh run would start at step 0,
    # epoch 0, from the seed's initial weights) and trains only the second epoch.
    assert (probe.step, probe.epoch) == (3, 1)
    for name, value in saved["state_dict"].items():
        torch.testing.assert_close(probe.weights[name], value, rtol=0, atol=0, msg=name)
    assert torch.load(second["last_checkpoint"], weights_only=True)["global_step"] == 6
    assert second["epochs"] == 2
    json.dumps(second)  # plain data


class _Killed(BaseException):
    """Stands for a kill: not an ``Exception``, so nothing on the way out handles it."""


class _DieAt(L.Callback):
    """Raises :class:`_Killed` at training batch ``batch`` of epoch ``epoch``."""

    def __init__(self, epoch: int, batch: int) -> None:
        self.at = (epoch, batch)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if (trainer.current_epoch, batch_idx) == self.at:
            raise _Killed


def _final_state(path: str) -> dict:
    """Weights, Adam's moments, the step and the scheduler of a checkpoint."""
    raw = torch.load(path, weights_only=True)
    adam = raw["optimizer_states"][0]["state"]
    return {
        "step": raw["global_step"],
        "epoch": raw["epoch"],
        **raw["state_dict"],
        **{f"adam.{i}.{k}": v for i, s in adam.items() for k, v in s.items()},
        "sched": raw["lr_schedulers"][0]["last_epoch"],
    }


def test_a_resumed_run_ends_bit_identical_to_the_uninterrupted_run(
    tmp_path, tiny_dataset, monkeypatch
):
    """Interrupted mid-epoch 2 (the last checkpoint is epoch 1's), then resumed from it: the
    replayed batches, their marker dropout and the network's dropout are those of the
    uninterrupted run, so weights and optimiser state end bit-identical. A run that ignored the
    checkpoint would start at step 0 and train all 9 steps again (the probe sees it), and one that
    restored the weights but not the data order or random state would end elsewhere."""
    from rbmcap.training import run

    monkeypatch.setenv("RBMCAP_ROOT", str(tmp_path))
    overrides = tiny_run(tiny_dataset, "logger=none", "trainer.max_epochs=3")
    reference = run.train(compose_train(*overrides), tmp_path / "ref")["last_checkpoint"]
    reference = _final_state(reference)
    assert reference["step"] == 9
    build = run.build_trainer

    def dying(cfg, output_dir):
        trainer, checkpoint = build(cfg, output_dir)
        trainer.callbacks.append(_DieAt(epoch=2, batch=2))
        return trainer, checkpoint

    monkeypatch.setattr(run, "build_trainer", dying)
    with pytest.raises(_Killed):
        run.train(compose_train(*overrides), tmp_path / "killed")
    last = tmp_path / "killed" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 6
    monkeypatch.setattr(run, "build_trainer", build)
    probe = probe_training_start(monkeypatch)
    resumed = run.train(compose_train(*overrides, f"ckpt_path={last}"), tmp_path / "resumed")
    assert (probe.step, probe.epoch) == (6, 2)  # it trained the last epoch only
    state = _final_state(resumed["last_checkpoint"])
    assert state.keys() == reference.keys()
    for name, value in reference.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(state[name], value), name
        else:
            assert state[name] == value, name


def test_marker_set_mismatch_is_refused(tmp_path, tiny_dataset):
    from rbmcap.errors import ConfigError
    from rbmcap.training.run import train

    cfg = compose_train(f"data.path={tiny_dataset}", "markers=rbm_d")
    with pytest.raises(ConfigError, match="marker set 'rbm14'"):
        train(cfg, tmp_path)


def test_every_experiment_config_composes():
    names = [p.stem for p in (conf_dir() / "experiment").glob("*.yaml")]
    assert {"demo", "paper_rbm14", "paper_rbm14_mse", "paper_rbm14_raw"} <= set(names)
    for name in names:
        cfg = compose_train(f"experiment={name}")
        assert cfg.model.name and cfg.features in FEATURE_KINDS
    assert compose_train("experiment=paper_rbm14_mse").loss.rotation == "axis_angle_mse"
    assert compose_train("experiment=paper_rbm14_raw").features == "raw"
    reduced = compose_train("experiment=paper_rbm14", "markers=rbm_a")
    assert reduced.markers.name == "rbm_a" and reduced.features == "paper"
    ddp = compose_train("trainer=ddp").trainer
    assert ddp.strategy == "ddp" and ddp.accelerator == "gpu"


def test_an_experiment_builds_its_optimiser_and_schedule_from_the_config(standin):
    """``optim`` and ``scheduler`` are instantiated (``_target_``), command-line overrides and the
    experiment's own values included; a value the optimiser refuses is one ConfigError line."""
    from types import SimpleNamespace

    from rbmcap.errors import ConfigError

    model = small_module(
        standin, "mlp", "experiment=standin_rbm14", "optim.lr=1e-3", "scheduler.decay=0.5"
    )
    model.trainer = SimpleNamespace(estimated_stepping_batches=100)
    configured = model.configure_optimizers()
    opt, schedule = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    assert isinstance(opt, torch.optim.Adam) and opt.defaults["lr"] == 1e-3
    assert opt.param_groups[0]["lr"] == pytest.approx(1e-3 / 3)  # the experiment's 3 % warm-up
    for _ in range(10):
        opt.step()
        schedule.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.5e-3)  # step 10 of 100: one decay
    bad = small_module(standin, "mlp", "optim.lr=-1")
    bad.trainer = model.trainer
    with pytest.raises(ConfigError, match=r"^optim.optimizer: Invalid learning rate"):
        bad.configure_optimizers()


def test_the_data_module_is_built_from_the_config(tmp_path):
    from rbmcap.dataset.recipe import MotionRecipe
    from rbmcap.training.run import build_datamodule

    cfg = compose_train("experiment=demo", "data.batch_size=7", f"paths.root_dir={tmp_path}")
    data = build_datamodule(cfg)
    assert isinstance(data, RBMDataModule) and (data.batch_size, data.window) == (7, 60)
    assert isinstance(data.generate, MotionRecipe) and data.generate.num == 80
    assert data.markers["name"] == "rbm14" and data.path.parent == tmp_path / "data"


def test_loggers_come_from_the_logger_config_group(tmp_path):
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    from rbmcap.training.loggers import build_logger

    csv = build_logger(compose_train("logger=csv").logger, tmp_path)
    assert isinstance(csv, CSVLogger) and Path(csv.save_dir) == tmp_path
    assert isinstance(
        build_logger(compose_train("logger=tensorboard").logger, tmp_path), TensorBoardLogger
    )
    assert build_logger(compose_train("logger=none").logger, tmp_path) is None


def test_a_logger_config_without_target_is_a_config_error(tmp_path):
    from rbmcap.errors import ConfigError
    from rbmcap.training.loggers import build_logger

    with pytest.raises(ConfigError, match="_target_"):
        build_logger({"name": "csv"}, tmp_path)


def _wandb(tmp_path, monkeypatch, mode: str | None, key: str | None):
    from lightning.pytorch.loggers import WandbLogger

    from rbmcap.training.loggers import build_logger

    for name, value in (("WANDB_MODE", mode), ("WANDB_API_KEY", key)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    cfg = compose_train("logger=wandb", "logger.project=rbmcap-test")
    logger = build_logger(cfg.logger, tmp_path)
    assert isinstance(logger, WandbLogger)
    return logger


def test_wandb_disabled_stays_disabled_and_never_waits(tmp_path, monkeypatch):
    """WandbLogger(offline=True) would turn WANDB_MODE=disabled into an offline run."""
    import time

    logger = _wandb(tmp_path, monkeypatch, mode="disabled", key=None)
    assert logger._offline is False
    start = time.perf_counter()
    run = logger.experiment
    logger.log_metrics({"x": 1.0})
    try:
        assert run.disabled, "WANDB_MODE=disabled must give a no-op run"
        assert os.environ["WANDB_MODE"] == "disabled"
        assert time.perf_counter() - start < 20, "disabled W&B must not wait on anything"
    finally:
        run.finish()


def test_wandb_without_a_key_logs_offline(tmp_path, monkeypatch):
    logger = _wandb(tmp_path, monkeypatch, mode=None, key=None)
    assert logger._offline is True  # written locally, never a blocking login
    assert Path(logger.save_dir) == tmp_path


def test_wandb_with_a_key_is_left_online(tmp_path, monkeypatch):
    logger = _wandb(tmp_path, monkeypatch, mode=None, key="0" * 40)
    assert logger._offline is False  # (the experiment is never created here: no network)


# ------------------------------------------------------------------- markers.* overrides
def test_marker_overrides_reach_the_model(standin):
    default = small_module(standin, "mlp")
    moved = small_module(
        standin, "mlp", "markers.markers.0.anchor.along=0.9", "markers.markers.4.parent=chest"
    )
    parents = moved.model.config.markers["parents"]
    assert parents[4] == 1 and default.model.config.markers["parents"][4] == 3  # hand → chest
    assert moved.model.encoder.parents == parents  # the feature tree follows the override
    rest, rest_default = (torch.tensor(m.model.config.plate_rest_pos) for m in (moved, default))
    assert not torch.allclose(rest[0], rest_default[0], atol=1e-3), "head plate moved"
    torch.testing.assert_close(rest[1:], rest_default[1:])


def test_a_marker_set_cut_down_on_the_command_line_drops_its_markers(standin):
    """The composed mapping is what counts, not the group's name."""
    model = small_module(
        standin, "mlp", "+markers.select=[chest,head,left_hand]", "markers.name=rbm3"
    )
    config = model.model.config
    assert config.markers["names"] == ["chest", "head", "left_hand"]
    assert config.markers["parents"] == [-1, 0, 0]
    assert model.model.encoder.num_markers == 3 and len(config.plate_rest_pos) == 3


# ------------------------------------------------------------------- data preparation
class _FakeSynthesis:
    """Stands in for motion generation and synthesis: records who called it, then puts a copy
    of the tiny dataset where the synthesis would have written."""

    def __init__(self, tiny_dataset):
        self.tiny, self.calls = tiny_dataset, []

    def generate(self, out, num, seed, **kwargs):
        self.calls.append(("generate", _callers()))
        Path(out).mkdir(parents=True, exist_ok=True)
        return []

    def synthesize(self, options, **kwargs):
        import shutil

        self.calls.append(("synthesize", _callers(), options.markers))
        shutil.copytree(self.tiny, options.out)


def _callers() -> list[str]:
    import inspect

    return [frame.function for frame in inspect.stack()]


@pytest.fixture
def fake_synthesis(tiny_dataset, monkeypatch):
    import rbmcap.dataset.recipe

    fake = _FakeSynthesis(tiny_dataset)
    monkeypatch.setattr(rbmcap.dataset.recipe, "generate_library", fake.generate)
    monkeypatch.setattr(rbmcap.dataset.recipe, "synthesize_dataset", fake.synthesize)
    return fake


def _absent_data(tmp_path, *overrides: str):
    return compose_train(
        f"paths.root_dir={tmp_path}",
        "data.generate.num=12",
        "data.window=30",
        "data.batch_size=4",
        "model=mlp",
        "model.hidden_dim=32",
        "model.num_blocks=1",
        "+trainer.fast_dev_run=true",
        "trainer.enable_progress_bar=false",
        "logger=none",
        *overrides,
    )


def test_a_missing_dataset_is_made_in_prepare_data_only(tmp_path, fake_synthesis, caplog):
    """Building the model, data module and trainer has no side effects; Lightning's
    prepare_data (one process per node) makes the data, and setup (every DDP process) never."""
    from rbmcap.errors import DataError
    from rbmcap.training.run import build_datamodule, train

    cfg = _absent_data(tmp_path)
    data = build_datamodule(cfg)
    assert not data.has_dataset() and not fake_synthesis.calls
    with pytest.raises(DataError, match="no dataset"):
        data.setup("fit")  # what a process that did not prepare the data sees
    assert not fake_synthesis.calls

    with caplog.at_level("INFO", logger="rbmcap.train"):
        result = train(cfg, tmp_path / "run")
    assert [c[0] for c in fake_synthesis.calls] == ["generate", "synthesize"]
    for _, callers, *_ in fake_synthesis.calls:
        assert "prepare_data" in callers and "fit" in callers, callers
    assert "generating 12 procedural motions" in caplog.text
    assert Path(result["data_path"]) == data.path and data.path.parent == tmp_path / "data"


def test_prepare_only_makes_the_dataset_and_trains_nothing(tmp_path, fake_synthesis):
    from rbmcap.training.run import build_datamodule, train

    cfg = _absent_data(tmp_path, "prepare_only=true")
    result = train(cfg, tmp_path / "run")
    assert [c[0] for c in fake_synthesis.calls] == ["generate", "synthesize"]
    assert result == {"data_path": str(build_datamodule(cfg).path), "prepared_only": True}
    assert build_datamodule(cfg).has_dataset() and not (tmp_path / "run").exists()


def test_generation_uses_the_overridden_marker_set_and_the_check_sees_it(tmp_path, fake_synthesis):
    """The recipe carries the composed (overridden) set; data made with another definition of
    the same name (here: the plain rbm14 copy) is refused, not trained on."""
    from rbmcap.errors import ConfigError
    from rbmcap.training.run import train

    cfg = _absent_data(tmp_path, "markers.markers.4.parent=chest")
    with pytest.raises(ConfigError, match="another definition of marker set 'rbm14'"):
        train(cfg, tmp_path / "run")
    ((_, _, markers),) = [c for c in fake_synthesis.calls if c[0] == "synthesize"]
    assert markers["markers"][4] | {"anchor": None} == {
        "name": "left_hand",
        "vertex": 2000,
        "parent": "chest",
        "anchor": None,
    }
