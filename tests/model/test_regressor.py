"""The model that poses frames (rbmcap.model.regressor): built from a configuration that is plain
data, refusing configurations it cannot build, and the same network inside its training module."""

from __future__ import annotations

import io

import pytest
import torch
from helpers.training import small_model, small_module

from rbmcap.errors import ConfigError
from rbmcap.model.regressor import PoseRegressor, RegressorConfig


@pytest.fixture(scope="module")
def config(standin) -> RegressorConfig:
    return small_model(standin, "mlp").config


def _frames(n: int = 14, t: int = 6) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(3)
    pos = 0.3 * torch.randn(1, t, n, 3, generator=gen)
    return pos, torch.eye(3).expand(1, t, n, 3, 3), torch.ones(1, t, n, dtype=torch.bool)


def test_the_configuration_is_plain_data_that_loads_safely(config):
    data = config.to_dict()
    assert isinstance(data["plate_rest_rot"], list) and isinstance(data["fps"], float)
    assert len(data["joint_shapedirs"]) == 24 and len(data["plate_rest_pos"]) == 14
    buffer = io.BytesIO()
    torch.save(data, buffer)
    buffer.seek(0)
    again = RegressorConfig.from_dict(torch.load(buffer, weights_only=True))
    assert again == config


def test_tensors_in_a_configuration_are_held_as_lists(config):
    data = config.to_dict()
    data["plate_rest_pos"] = torch.tensor(data["plate_rest_pos"])
    data["markers"] = {**data["markers"], "parents": tuple(data["markers"]["parents"])}
    assert RegressorConfig(**data) == config


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("fps"), r"^model: missing fps \(expected keys: markers, "),
        (lambda d: d.update(lr=1e-3), r"^model: unknown lr "),
        (lambda d: d.update(rotations="sideways"), r"rotations='sideways': expected 'global'"),
        (
            lambda d: d.update(features="raw", plate_fit={"enabled": True, "prior_weight": 0.01}),
            r"plate_fit needs heading-frame features",
        ),
    ],
)
def test_a_configuration_the_model_cannot_take_is_one_config_error(config, change, match):
    data = config.to_dict()
    change(data)
    with pytest.raises(ConfigError, match=match):
        PoseRegressor(RegressorConfig.from_dict(data))


def test_the_untrained_output_layer_starts_at_zero_only_over_the_prior(config):
    """With the kinematic prior and global rotations the network answers the prior itself."""
    prior = PoseRegressor(config)
    last = [m for m in prior.net.modules() if isinstance(m, torch.nn.Linear)][-1]
    assert not last.weight.any() and not last.bias.any()
    torch.manual_seed(0)
    local = PoseRegressor(RegressorConfig(**{**config.to_dict(), "rotations": "local"}))
    last = [m for m in local.net.modules() if isinstance(m, torch.nn.Linear)][-1]
    assert last.weight.any()


def test_the_training_module_answers_with_the_model_it_holds(standin):
    module = small_module(standin, "mlp").eval()
    model = PoseRegressor(module.model.config).eval()
    model.load_state_dict(module.model.state_dict())
    assert module.hparams["model"] == model.config.to_dict()
    with torch.no_grad():
        a, b = module(*_frames()), model(*_frames())
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)
