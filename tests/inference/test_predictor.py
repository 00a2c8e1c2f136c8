"""Predictor: chunked whole-sequence inference and frame-by-frame streaming."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.observations import random_observations
from helpers.training import small_model

from rbmcap.body.params import SMPLParams
from rbmcap.errors import DataError
from rbmcap.inference import Predictor


def test_chunked_prediction_of_a_per_frame_network_equals_one_pass(standin):
    model = small_model(standin, "mlp").eval()
    pos, rot, valid = random_observations(237, hidden=0.1)
    chunked = Predictor(model, chunk=50, overlap=10, smoothing=0).predict(pos, rot, valid)
    with torch.no_grad():
        full = model(*(torch.as_tensor(x)[None] for x in (pos, rot, valid)))
    assert isinstance(chunked, SMPLParams)
    np.testing.assert_allclose(chunked.rotmats.numpy(), full["rotmats"][0].numpy(), atol=1e-5)
    # trans depends on the betas (through the pelvis rest position), which each chunk averages
    # over its own frames: equal up to that small shape difference
    np.testing.assert_allclose(chunked.trans.numpy(), full["trans"][0].numpy(), atol=5e-3)
    assert chunked.poses.shape == (237, 24, 3) and chunked.betas.shape == (10,)


def test_short_sequences_and_exact_chunk_multiples(standin):
    model = small_model(standin, "transformer").eval()
    p = Predictor(model, chunk=40, overlap=5)
    for t in (1, 7, 40, 70, 80):
        out = p.predict(*random_observations(t, hidden=0.1))
        assert out.rotmats.shape == (t, 24, 3, 3) and torch.isfinite(out.trans).all()


def test_streaming_a_causal_gru_equals_the_whole_window(standin):
    model = small_model(standin, "causal_gru").eval()
    pos, rot, valid = random_observations(25, hidden=0.1)
    session = Predictor(model).stream()
    streamed = [session.push(pos[i], rot[i], valid[i]) for i in range(25)]
    with torch.no_grad():
        full = model(*(torch.as_tensor(x)[None] for x in (pos, rot, valid)))
    got = np.stack([r for r, _ in streamed])
    np.testing.assert_allclose(got, full["rotmats"][0].numpy(), atol=1e-4)


def test_streaming_a_window_model_answers_every_frame(standin):
    session = Predictor(small_model(standin, "causal_transformer").eval()).stream(context=8)
    pos, rot, valid = random_observations(12, hidden=0.1)
    for i in range(12):
        r, t = session.push(pos[i], rot[i], valid[i])
        assert r.shape == (24, 3, 3) and t.shape == (3,)


def test_wrong_marker_count_is_a_clear_error(standin):
    p = Predictor(small_model(standin, "mlp"))
    pos, rot, valid = random_observations(5, hidden=0.1)
    with pytest.raises(DataError, match="marker set 'rbm14'"):
        p.predict(pos[:, :10], rot[:, :10], valid[:, :10])
