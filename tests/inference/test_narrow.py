"""A stream's GRU with its weights held in a narrower type: the same gate equations as the GRU's
own step, close to the float32 answer, a quarter (int8) or half (bfloat16) of the bytes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.observations import random_observations
from helpers.training import small_model

from rbmcap.errors import ConfigError
from rbmcap.evaluation import options
from rbmcap.inference import Predictor
from rbmcap.inference.narrow import PRECISIONS, NarrowGRU, matrix_bytes, narrowed


def _trained_like(model):
    """``model`` with weights that are not the untrained ones (an output layer that is not
    zero), as a trained model's would be."""
    with torch.no_grad():
        for p in model.net.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(3)))
    return model.eval()


@pytest.fixture(scope="module")
def gru_model(standin):
    return _trained_like(small_model(standin, "causal_gru", "plate_fit.enabled=true"))


@pytest.mark.parametrize("precision, tol", [("bfloat16", 2e-2), ("int8", 3e-2)])
def test_the_narrow_step_is_the_grus_step_to_the_types_rounding(gru_model, precision, tol):
    """The same outputs and states as the GRU's own step over 20 frames, to the rounding of the
    narrow weights (relative to the outputs' scale), and the window forward equals stepping."""
    net = gru_model.net
    narrow = NarrowGRU(net, precision)
    x = torch.randn(2, 20, net.input_proj.in_features, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want, _ = net.forward_with_state(x)
        state = narrow.initial_state(2)
        got = []
        for t in range(20):
            y, state = narrow.step(x[:, t], state)
            got.append(y)
        got = torch.stack(got, dim=1)
        np.testing.assert_allclose(narrow(x).numpy(), got.numpy(), atol=1e-6, rtol=0)
    scale = want.abs().max().item()
    assert (got - want).abs().max().item() <= tol * scale
    assert state.dtype == torch.float32


def test_int8_and_bfloat16_hold_a_quarter_and_a_half_of_the_bytes(gru_model):
    full = matrix_bytes(gru_model.net)
    assert matrix_bytes(NarrowGRU(gru_model.net, "bfloat16")) == full // 2
    assert matrix_bytes(NarrowGRU(gru_model.net, "int8")) == full // 4


def test_a_narrow_stream_answers_close_to_the_full_one_and_leaves_the_model_alone(gru_model):
    """Streamed through the traced step: rotation elements within 0.05 of float32's on a small
    random network (a trained model's accuracy is measured by ``rbmcap eval --precision``), the
    caller's model untouched (its own network still a GRU), and float32 the model itself."""
    pos, rot, valid = random_observations(30)
    full = Predictor(gru_model).stream()
    narrow_predictor = Predictor(gru_model, precision="int8")
    narrow = narrow_predictor.stream()
    for i in range(30):
        want, _ = full.push(pos[i], rot[i], valid[i])
        got, _ = narrow.push(pos[i], rot[i], valid[i])
        assert np.abs(got - want).max() < 0.05
    assert isinstance(narrow_predictor.model.net, NarrowGRU)
    assert isinstance(gru_model.net.gru, torch.nn.GRU)
    assert narrowed(gru_model, "float32") is gru_model


def test_only_a_causal_gru_narrows_and_only_to_a_known_type(standin, gru_model):
    with pytest.raises(ConfigError, match="causal GRU"):
        narrowed(small_model(standin, "mlp").eval(), "int8")
    with pytest.raises(ConfigError, match="precision 'int4'"):
        narrowed(gru_model, "int4")


def test_the_command_lines_precisions_are_the_libraries():
    assert options.PRECISIONS == PRECISIONS
