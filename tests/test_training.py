"""Training: every network runs through Lightning, the module can overfit, checkpoints load
safely, and train.py's wiring trains, checkpoints and resumes."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir

from rbmcap.body.joints import JointModel
from rbmcap.configfiles import conf_dir
from rbmcap.markers.markerset import load_marker_set
from rbmcap.training.data import RBMDataModule
from rbmcap.training.module import RBMRegressor
from rbmcap.training.run import marker_description, plate_rest_frames

CONF = str(conf_dir())
SMALL = {
    "mlp": {"hidden_dim": 64, "num_blocks": 2},
    "bigru": {"hidden_dim": 32, "num_layers": 1},
    "transformer": {"d_model": 32, "nhead": 4, "num_layers": 1, "dim_feedforward": 64},
    "causal_transformer": {"d_model": 32, "nhead": 4, "num_layers": 1, "dim_feedforward": 64},
    "causal_gru": {"hidden_dim": 32, "num_layers": 1},
}


def _module(standin, network: str, features: str = "kinematic", **kwargs) -> RBMRegressor:
    markers = load_marker_set("rbm14")
    rest_pos, rest_rot = plate_rest_frames(standin, markers)
    joints = JointModel.from_body(standin)
    return RBMRegressor(
        markers=marker_description(markers),
        plate_rest_rot=rest_rot,
        plate_rest_pos=rest_pos,
        joint_template=joints.joint_template,
        joint_shapedirs=joints.joint_shapedirs,
        body_id=standin.identity,
        features=features,
        network={"name": network, **SMALL[network]},
        **kwargs,
    )


@pytest.mark.parametrize("network", list(SMALL))
def test_fast_dev_run_for_every_network(standin, tiny_dataset, network):
    model = _module(standin, network, augment={"marker_dropout": 0.3, "dropout_span": 10})
    data = RBMDataModule(tiny_dataset, window=30, train_stride=30, batch_size=4)
    trainer = L.Trainer(fast_dev_run=True, accelerator="cpu", logger=False,
                        enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    trainer.fit(model, datamodule=data)
    out = model(*(torch.zeros(1, 5, 14, 3), torch.eye(3).expand(1, 5, 14, 3, 3),
                  torch.ones(1, 5, 14, dtype=torch.bool)))  # fmt: skip
    assert out["rotmats"].shape == (1, 5, 24, 3, 3) and out["trans"].shape == (1, 5, 3)
    assert model.is_causal == (network.startswith("causal") or network == "mlp")  # per-frame


def test_a_tiny_run_overfits_one_batch(standin, tiny_dataset):
    torch.manual_seed(0)
    model = _module(standin, "mlp", features="kinematic")
    model.net.train()
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
    model = _module(standin, "transformer")
    trainer = L.Trainer(max_steps=1, limit_val_batches=1, accelerator="cpu", logger=False,
                        enable_progress_bar=False, default_root_dir=tmp_path,
                        enable_model_summary=False)  # fmt: skip
    trainer.fit(model, datamodule=RBMDataModule(tiny_dataset, window=30, batch_size=2))
    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    raw = torch.load(path, weights_only=True)  # safe loading: no DictConfig, no pickled classes
    assert raw["hyper_parameters"]["features"] == "kinematic"
    again = RBMRegressor.load_from_checkpoint(path, weights_only=True)
    x = (
        torch.randn(1, 8, 14, 3),
        torch.eye(3).expand(1, 8, 14, 3, 3),
        torch.ones(1, 8, 14, dtype=torch.bool),
    )
    model.eval(), again.eval()
    assert torch.allclose(model(*x)["trans"], again(*x)["trans"])


def test_train_py_wiring_trains_checkpoints_and_resumes(tmp_path, tiny_dataset, monkeypatch):
    from rbmcap.training.run import train

    monkeypatch.setenv("RBMCAP_ROOT", str(tmp_path))
    overrides = [
        f"data.path={tiny_dataset}", "data.window=30", "data.batch_size=4",
        "model=mlp", "model.hidden_dim=64", "model.num_blocks=1",
        "trainer.max_epochs=1", "+trainer.limit_train_batches=3", "+trainer.limit_val_batches=2",
        "trainer.enable_progress_bar=false", "logger=csv",
    ]  # fmt: skip
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("train", overrides=overrides)
        first = train(cfg, tmp_path / "run1")
        assert first["best_val_mpjpe_mm"] > 0 and Path(first["last_checkpoint"]).is_file()
        metrics = (tmp_path / "run1" / "csv" / "version_0" / "metrics.csv").read_text()
        assert "val/mpjpe_mm" in metrics and "val/joint_angle_deg" in metrics
        cfg = compose("train", overrides=[*overrides, "trainer.max_epochs=2",
                                          f"ckpt_path={first['last_checkpoint']}"])  # fmt: skip
        second = train(cfg, tmp_path / "run2")
    assert second["epochs"] == 2
    json.dumps(second)  # plain data


def test_marker_set_mismatch_is_refused(tmp_path, tiny_dataset):
    from rbmcap.errors import ConfigError
    from rbmcap.training.run import train

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("train", overrides=[f"data.path={tiny_dataset}", "markers=rbm_d"])
    with pytest.raises(ConfigError, match="marker set 'rbm14'"):
        train(cfg, tmp_path)


def test_every_experiment_config_composes():
    names = [p.stem for p in (Path(CONF) / "experiment").glob("*.yaml")]
    assert {"demo", "paper_rbm14", "paper_rbm14_mse", "paper_rbm14_raw"} <= set(names)
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        for name in names:
            cfg = compose("train", overrides=[f"experiment={name}"])
            assert cfg.model.name and cfg.features in ("raw", "paper", "canonical", "kinematic")
        assert (
            compose("train", overrides=["experiment=paper_rbm14_mse"]).loss.rotation
            == "axis_angle_mse"
        )
        assert compose("train", overrides=["experiment=paper_rbm14_raw"]).features == "raw"
        assert compose("train", overrides=["experiment=paper_rbm_a"]).markers.name == "rbm_a"
        ddp = compose("train", overrides=["trainer=ddp"]).trainer
        assert ddp.strategy == "ddp" and ddp.accelerator == "gpu"


def test_wandb_logger_never_touches_the_network(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from rbmcap.training.run import build_loggers

    monkeypatch.setenv("WANDB_MODE", "disabled")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    cfg = OmegaConf.create({"logger": {"name": "wandb", "project": "rbmcap-test"}})
    (logger,) = build_loggers(cfg, tmp_path)
    logger.log_metrics({"x": 1.0})  # disabled mode: a no-op run, no network
