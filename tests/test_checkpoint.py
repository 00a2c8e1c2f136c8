"""Checkpoints: every unusable file is one line naming it; a usable one gives inference its
model and frame rate, fine-tuning its weights, and packing a file that keeps what they need."""

from __future__ import annotations

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
    del shipped["hyper_parameters"][key]
    path = tmp_path / "old.ckpt"
    torch.save(shipped, path)
    _refused(ModelError, path, f"hyper-parameters lack {key}$")


def test_a_checkpoint_without_plate_names_is_refused(tmp_path, shipped):
    del shipped["hyper_parameters"]["markers"]["names"]
    path = tmp_path / "unnamed.ckpt"
    torch.save(shipped, path)
    _refused(ModelError, path, "hyper-parameter 'markers' has an unusable value")


def test_a_checkpoint_with_the_flat_optimiser_section_is_refused(tmp_path, shipped):
    shipped["hyper_parameters"]["optim"] = {
        "lr": 1e-3,
        "weight_decay": 0.0,
        "decay": 0.8,
        "decay_every": 0.1,
    }
    path = tmp_path / "flat.ckpt"
    torch.save(shipped, path)
    _refused(ModelError, path, "optim: missing optimizer, scheduler")


@pytest.mark.parametrize("fps", [30.0, 120.0])
def test_the_model_frame_rate_is_the_one_its_checkpoint_records(tmp_path, shipped, fps):
    shipped["hyper_parameters"]["fps"] = fps
    path = tmp_path / "rate.ckpt"
    torch.save(shipped, path)
    predictor = Predictor.from_checkpoint(path)
    assert predictor.fps == fps and model_fps(predictor) == fps


def test_the_shipped_models_record_their_60_hz_training_rate():
    for name in ("standin-rbm14", SHIPPED):
        assert read_checkpoint(name)["hyper_parameters"]["fps"] == 60.0, name


def test_fine_tuning_starts_from_the_saved_weights(standin):
    from rbmcap.training.run import build_model, configured_markers

    cfg = compose_train("experiment=standin_rbm14_stream")
    model = build_model(cfg, standin, configured_markers(cfg))
    assert load_weights(model, SHIPPED) == resolve_checkpoint(SHIPPED)
    saved = read_checkpoint(SHIPPED)["state_dict"]
    now = model.state_dict()
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
