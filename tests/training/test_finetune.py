"""Fine-tuning pieces: starting from another checkpoint's weights (``init_from``) and
oversampling the training windows of chosen sequences (``data.oversample``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.training import compose_train, probe_training_start, tiny_run

from rbmcap.config.packaged import conf_dir
from rbmcap.dataset import RBMDataset
from rbmcap.errors import ConfigError
from rbmcap.training.data import RBMDataModule, WindowDataset
from rbmcap.training.run import build_model, configured_markers, load_initial_weights


def test_init_from_starts_a_fresh_run_from_the_weights(tmp_path, tiny_dataset, monkeypatch):
    from rbmcap.training.run import train

    monkeypatch.setenv("RBMCAP_ROOT", str(tmp_path))
    probe = probe_training_start(monkeypatch)
    overrides = tiny_run(tiny_dataset, "logger=none")
    first = train(compose_train(*overrides, "seed=1"), tmp_path / "run1")
    saved = torch.load(first["last_checkpoint"], weights_only=True)["state_dict"]
    train(compose_train(*overrides, f"init_from={first['last_checkpoint']}"), tmp_path / "run2")
    assert (probe.step, probe.epoch) == (0, 0)  # a new run: step, epoch and schedule afresh
    for name, value in saved.items():
        torch.testing.assert_close(probe.weights[name], value, rtol=0, atol=0, msg=name)
    other = compose_train(
        *overrides, "model.hidden_dim=32", f"init_from={first['last_checkpoint']}"
    )
    with pytest.raises(ConfigError, match="another architecture"):
        train(other, tmp_path / "run3")


def test_no_experiment_starts_from_a_checkpoint():
    """Every experiment trains from scratch: none defaults to init_from (which would make a
    shipped model the product of its own next stage), and the shipped ones compose."""
    names = sorted(p.stem for p in (conf_dir() / "experiment").glob("*.yaml"))
    assert {"standin_rbm14", "standin_rbm14_stream"} <= set(names)
    for name in names:
        assert compose_train(f"experiment={name}").init_from is None, name


def test_init_from_resolves_a_shipped_model(standin, caplog, tmp_path):
    cfg = compose_train("experiment=standin_rbm14")
    model = build_model(cfg, standin, configured_markers(cfg))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with caplog.at_level("WARNING", logger="rbmcap.train"):
        load_initial_weights(model, "standin-rbm14")
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) > 10
    assert "features" not in caplog.text
    # features of another width (the shipped model reads reach): one clear error
    cfg = compose_train("experiment=standin_rbm14", "features=kinematic")
    with pytest.raises(ConfigError, match="init_from=standin-rbm14: another architecture"):
        load_initial_weights(build_model(cfg, standin, configured_markers(cfg)), "standin-rbm14")
    # features of the same width (anchored and kinematic): the weights load, and the run says
    # the inputs differ
    caplog.clear()
    cfg = compose_train("experiment=standin_rbm14", "features=anchored")
    anchored = build_model(cfg, standin, configured_markers(cfg))
    kinematic = build_model(
        compose_train("experiment=standin_rbm14", "features=kinematic"),
        standin,
        configured_markers(cfg),
    )
    path = tmp_path / "anchored.ckpt"
    torch.save(
        {"state_dict": anchored.state_dict(), "hyper_parameters": dict(anchored.hparams)}, path
    )
    with caplog.at_level("WARNING", logger="rbmcap.train"):
        load_initial_weights(kinematic, path)
    assert "trained on anchored features; this run uses kinematic" in caplog.text


def test_oversampled_sequences_repeat_their_windows(tiny_dataset):
    names = [s.name for s in RBMDataset(tiny_dataset, "train").sequences]
    plain = WindowDataset(tiny_dataset, "train", 30, 15)
    boosted = WindowDataset(tiny_dataset, "train", 30, 15, {names[0]: 3, names[1]: 2})
    per_seq = np.bincount(plain.windows.sequence_positions(), minlength=len(names))
    assert len(boosted) == len(plain) + 2 * per_seq[0] + per_seq[1]
    first = boosted.windows.sequence_positions()[boosted.index]
    assert np.bincount(first, minlength=len(names))[0] == 3 * per_seq[0]
    a, b = boosted[0], plain[0]  # window 0 (of the first sequence) comes first, thrice
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(boosted[2]["pos"], plain[0]["pos"])
    module = RBMDataModule(tiny_dataset, window=30, batch_size=2, oversample={names[0]: 3})
    strided = WindowDataset(tiny_dataset, "train", 30, 30)  # the module's stride: its window
    assert (
        len(module.dataset("train"))
        == len(strided) + 2 * (strided.windows.sequence_positions() == 0).sum()
    )
    assert len(module.dataset("val")) == len(WindowDataset(tiny_dataset, "val", 30, 30))


@pytest.mark.parametrize(
    ("oversample", "needle"),
    [
        ({"no-such-*": 2}, "matches no sequence"),
        ({"*": 0}, "expected a whole number >= 1"),
        ({"*": 1.5}, "expected a whole number >= 1"),
    ],
)
def test_bad_oversampling_is_a_config_error(tiny_dataset, oversample, needle):
    with pytest.raises(ConfigError, match=needle):
        WindowDataset(tiny_dataset, "train", 30, 15, oversample)


def test_pack_writes_the_command_and_data_recipe_a_run_recorded(tmp_path, tiny_dataset):
    """A checkpoint keeps the command line that trained it and its data recipe; pack writes
    them onto the card unasked, and refuses (writing nothing) a checkpoint that kept neither."""
    import yaml

    from rbmcap.errors import DataError
    from rbmcap.inference.pretrained import pack_checkpoint
    from rbmcap.training.run import train

    line = "rbmcap-train experiment=standin_rbm14"
    cfg = compose_train(*tiny_run(tiny_dataset, "logger=none"))
    run = train(cfg, tmp_path / "run", command=line)
    _dst, card = pack_checkpoint(run["last_checkpoint"], "tiny", {}, tmp_path / "shipped")
    assert card["command"] == f"OMP_NUM_THREADS=1 {line}"
    assert card["data"]["path"] == str(tiny_dataset) and card["data"]["markers"] == "rbm14"
    assert "realistic realism" in card["trained_on"]
    on_disk = yaml.safe_load((tmp_path / "shipped" / "tiny.yaml").read_text())
    assert on_disk["command"] == card["command"] and on_disk["data"] == card["data"]
    given = pack_checkpoint(run["last_checkpoint"], "t2", {"command": "by hand"}, tmp_path / "s2")
    assert given[1]["command"] == "by hand"

    bare = torch.load(run["last_checkpoint"], weights_only=True)
    del bare["rbmcap_run"]
    torch.save(bare, tmp_path / "bare.ckpt")
    with pytest.raises(DataError, match="records no command"):
        pack_checkpoint(tmp_path / "bare.ckpt", "bare", {}, tmp_path / "s3")
    assert not (tmp_path / "s3" / "bare.ckpt").exists()


def test_one_command_trains_the_same_weights_twice(tmp_path, tiny_dataset):
    """A shipped model is reproducible from its card's command: two runs of one configuration
    (one torch thread, as the cards say) end with bit-identical weights."""
    from rbmcap.training.run import train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = compose_train(*tiny_run(tiny_dataset, "logger=none"))
        runs = [train(cfg, tmp_path / f"run{i}") for i in range(2)]
    finally:
        torch.set_num_threads(threads)
    a, b = (torch.load(r["last_checkpoint"], weights_only=True)["state_dict"] for r in runs)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_learning_rate_ramps_up_then_decays_in_steps():
    from rbmcap.training.schedule import lr_factor

    f = [lr_factor(s, 1000, warmup=0.03, decay=0.8, decay_every=0.1) for s in range(1000)]
    assert f[0] == pytest.approx(1 / 30) and f[14] == pytest.approx(0.5)
    assert f[29] == f[99] == 1.0 and f[100] == pytest.approx(0.8)
    assert f[999] == pytest.approx(0.8**9)
    plain = [lr_factor(s, 1000, warmup=0.0, decay=0.8, decay_every=0.1) for s in range(1000)]
    assert plain[0] == 1.0 and plain[250] == pytest.approx(0.64)
