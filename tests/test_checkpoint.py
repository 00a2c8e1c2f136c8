"""Checkpoints: every unusable file is one line naming it; a usable one gives inference its
model and frame rate, fine-tuning its weights, and packing a file that keeps what they need."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.training import compose_train

from rbmcap.checkpoint import PACKED_KEYS, load_weights, pack, read_checkpoint
from rbmcap.errors import FormatError, ModelError
from rbmcap.inference import Predictor
from rbmcap.inference.capture import model_fps
from rbmcap.paths import resolve_checkpoint

SHIPPED = "standin-rbm14-stream"
"""The smaller shipped model: the checkpoint these tests start from."""


@pytest.fixture
def shipped() -> dict:
    """A fresh copy of the shipped checkpoint, to spoil."""
    return read_checkpoint(SHIPPED)


def _refused(error: type[Exception], path: Path, match: str) -> None:
    """``path`` fails to load with ``error``: one line naming the file and saying ``match``."""
    with pytest.raises(error, match=match) as caught:
        Predictor.from_checkpoint(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: "), message


def test_a_missing_file_is_one_line_naming_it(tmp_path):
    _refused(ModelError, tmp_path / "none.ckpt", "no such checkpoint")


def test_a_truncated_checkpoint_is_one_line_naming_it(tmp_path):
    path = tmp_path / "cut.ckpt"
    raw = resolve_checkpoint(SHIPPED).read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    _refused(FormatError, path, "not an rbmcap checkpoint")


@pytest.mark.parametrize("content", [b"epoch,loss\n1,0.5\n", b""])
def test_a_file_that_is_no_checkpoint_is_one_line_naming_it(tmp_path, content):
    path = tmp_path / "notes.ckpt"
    path.write_bytes(content)
    _refused(FormatError, path, "not an rbmcap checkpoint")


def test_a_checkpoint_without_weights_is_one_line_naming_it(tmp_path):
    path = tmp_path / "bare.ckpt"
    torch.save({"state_dict": {}}, path)
    _refused(FormatError, path, r"not an rbmcap checkpoint \(no 'hyper_parameters' mapping\)")


@pytest.mark.parametrize("key", ["fps", "plate_fit", "markers"])
def test_a_checkpoint_missing_a_required_key_is_one_line_naming_it(tmp_path, shipped, key):
    del shipped["hyper_parameters"]["model"][key]
    path = tmp_path / "old.ckpt"
    torch.save(shipped, path)
    _refused(ModelError, path, f"hyper-parameters lack model.{key}$")


def test_a_checkpoint_without_the_model_section_is_refused(tmp_path, shipped):
    """The flat layout (the model's configuration beside the training's) is not read."""
    hp = shipped["hyper_parameters"]
    shipped["hyper_parameters"] = {**hp.pop("model"), **hp}
    path = tmp_path / "flat.ckpt"
    torch.save(shipped, path)
    _refused(ModelError, path, "hyper-parameters lack model$")


def test_a_weight_outside_the_model_is_refused(tmp_path, shipped):
    shipped["state_dict"]["loss.scale"] = torch.ones(1)
    path = tmp_path / "stray.ckpt"
    torch.save(shipped, path)
    _refused(ModelError, path, "its weights do not fit the network")


def test_a_checkpoint_without_plate_names_is_refused(tmp_path, shipped):
    del shipped["hyper_parameters"]["model"]["markers"]["names"]
    path = tmp_path / "unnamed.ckpt"
    torch.save(shipped, path)
    _refused(ModelError, path, "hyper-parameter 'model.markers' has an unusable value")


@pytest.mark.parametrize("fps", [30.0, 120.0])
def test_the_model_frame_rate_is_the_one_its_checkpoint_records(tmp_path, shipped, fps):
    shipped["hyper_parameters"]["model"]["fps"] = fps
    path = tmp_path / "rate.ckpt"
    torch.save(shipped, path)
    predictor = Predictor.from_checkpoint(path)
    assert predictor.fps == fps and model_fps(predictor) == fps


def test_the_shipped_models_record_their_60_hz_training_rate():
    for name in ("standin-rbm14", SHIPPED):
        assert read_checkpoint(name)["hyper_parameters"]["model"]["fps"] == 60.0, name


def test_fine_tuning_starts_from_the_saved_weights(standin):
    from rbmcap.training.run import build_model, configured_markers

    cfg = compose_train("experiment=standin_rbm14_stream")
    module = build_model(cfg, standin, configured_markers(cfg))
    assert load_weights(module.model, SHIPPED) == resolve_checkpoint(SHIPPED)
    saved = read_checkpoint(SHIPPED)["state_dict"]
    now = module.state_dict()  # the training module's names: the model's under "model."
    assert now.keys() == saved.keys()
    for name, value in saved.items():
        assert torch.equal(now[name], value), name


def test_packing_keeps_what_inference_needs_and_drops_training_state(tmp_path, shipped):
    shipped["optimizer_states"] = [{"state": {}, "param_groups": []}]
    shipped["lr_schedulers"] = [{"last_epoch": 3}]
    packed = read_checkpoint(pack(shipped, tmp_path / "packed.ckpt"))
    assert set(packed) <= set(PACKED_KEYS)
    assert packed["hyper_parameters"] == shipped["hyper_parameters"]
    assert all(torch.equal(v, shipped["state_dict"][k]) for k, v in packed["state_dict"].items())


def test_checkpoints_load_without_lightning_or_training(checkpoint):
    """A shipped model and one that training wrote are built from :mod:`rbmcap.model` alone."""
    code = (
        "import sys\n"
        "from rbmcap.inference import Predictor\n"
        f"for spec in ({SHIPPED!r}, {str(checkpoint)!r}):\n"
        "    Predictor.from_checkpoint(spec)\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] == 'lightning'"
        " or m.startswith('rbmcap.training')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
