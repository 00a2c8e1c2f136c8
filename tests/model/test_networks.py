"""Specifications of the sequence networks: shapes, size, causality, streaming, trainability."""

from __future__ import annotations

import pytest
import roma
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.config.packaged import conf_file
from rbmcap.config.safe_yaml import load_yaml_mapping
from rbmcap.errors import ConfigError, DataError
from rbmcap.model import (
    NETWORKS,
    BiGRU,
    CausalGRU,
    RelPosTransformer,
    ResidualMLP,
    build_network,
    geodesic_loss,
    rotation_6d_to_matrix,
)
from rbmcap.model.networks import relative_position_bucket

# Realistic sizes: 14 plates of paper features + mask in, 24 6D joints + 10 betas + trans out.
IN_DIM, OUT_DIM = 14 * 9 + 3 + 14, 24 * 6 + 10 + 3
CAUSAL = {
    "mlp": True,
    "bigru": False,
    "transformer": False,
    "causal_transformer": True,
    "causal_gru": True,
}


def _configured(name: str) -> dict:
    """The packaged reference hyper-parameters (``rbmcap/conf/model/<name>.yaml``)."""
    values = load_yaml_mapping(conf_file("model", f"{name}.yaml"))
    assert values.pop("name") == name
    return values


# Small hyper-parameters for behavioural tests (behaviour does not depend on width).
_RELPOS_SMALL = {"d_model": 32, "nhead": 4, "num_layers": 2, "dim_feedforward": 64}
SMALL = {
    "mlp": {**_configured("mlp"), "hidden_dim": 32, "num_blocks": 2},
    "bigru": {**_configured("bigru"), "hidden_dim": 16},
    "transformer": {**_configured("transformer"), **_RELPOS_SMALL},
    "causal_transformer": {**_configured("causal_transformer"), **_RELPOS_SMALL},
    "causal_gru": {**_configured("causal_gru"), "hidden_dim": 16},
}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors gain nothing from intra-op threads, and when other processes share the
    cores, spinning OpenMP workers make these tests 10-30x slower; run them on one thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same global RNG state (initial weights, dropout)."""
    torch.manual_seed(0)


def _inputs(seed: int, *shape: int) -> torch.Tensor:
    """Standard normal inputs of ``shape`` from their own seeded generator."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _small(name: str, in_dim: int = 10, out_dim: int = 7) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_network(name, in_dim, out_dim, **SMALL[name]).eval()


@pytest.fixture(scope="module")
def default_networks():
    torch.manual_seed(0)
    return {
        name: build_network(name, IN_DIM, OUT_DIM, **_configured(name)).eval() for name in NETWORKS
    }


def test_registry_knows_every_network_family():
    assert set(NETWORKS) == {"mlp", "bigru", "transformer", "causal_transformer", "causal_gru"}
    assert set(SMALL) == set(NETWORKS)
    assert isinstance(build_network("mlp", 4, 2, **SMALL["mlp"]), ResidualMLP)
    assert isinstance(build_network("bigru", 4, 2, **SMALL["bigru"]), BiGRU)
    assert isinstance(build_network("transformer", 4, 2, **SMALL["transformer"]), RelPosTransformer)
    net = build_network("causal_transformer", 4, 2, **SMALL["causal_transformer"])
    assert isinstance(net, RelPosTransformer)
    assert isinstance(build_network("causal_gru", 4, 2, **SMALL["causal_gru"]), CausalGRU)


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_default_networks_have_a_few_million_parameters(name, default_networks):
    count = default_networks[name].num_parameters()
    assert 500_000 <= count <= 4_000_000, f"{name}: {count}"


@pytest.mark.parametrize("name", sorted(NETWORKS))
@pytest.mark.parametrize("T", [1, 7, 120])
def test_networks_map_every_frame_of_any_window(name, T, default_networks):
    x = _inputs(1, 2, T, IN_DIM)
    with torch.no_grad():
        y = default_networks[name](x)
    assert y.shape == (2, T, OUT_DIM)
    assert torch.isfinite(y).all()


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_is_causal_flag_matches_behaviour(name):
    net = _small(name)
    x = _inputs(2, 1, 12, 10)
    x2 = x.clone()
    x2[:, 8:] += 1.0
    with torch.no_grad():
        changed_before_8 = (net(x)[:, :8] - net(x2)[:, :8]).abs().max().item() > 1e-4
    assert net.is_causal is CAUSAL[name]
    assert changed_before_8 is not net.is_causal


@pytest.mark.parametrize("name", [n for n, causal in CAUSAL.items() if causal])
@settings(max_examples=15, deadline=None)
@given(T=st.integers(2, 40), data=st.data())
def test_causal_outputs_ignore_future_inputs(name, T, data):
    t = data.draw(st.integers(0, T - 2), label="t")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    g = torch.Generator().manual_seed(seed)
    net = _small(name)
    x = torch.randn(2, T, 10, generator=g)
    x_future_changed = x.clone()
    x_future_changed[:, t + 1 :] = 10 * torch.randn(2, T - t - 1, 10, generator=g)
    with torch.no_grad():
        y, y2 = net(x), net(x_future_changed)
    torch.testing.assert_close(y[:, : t + 1], y2[:, : t + 1], atol=1e-6, rtol=0)


def test_transformer_runs_on_a_window_longer_than_any_it_saw():
    net = _small("transformer")
    net.train()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        net(_inputs(3, 4, 16, 10)).square().mean().backward()
        opt.step()
    net.eval()
    with torch.no_grad():
        y = net(_inputs(4, 1, 500, 10))
    assert y.shape == (1, 500, 7) and torch.isfinite(y).all()


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_buckets_cover_any_offset(bidirectional):
    offsets = torch.arange(-1000, 1001)  # key - query, frames
    buckets = relative_position_bucket(
        offsets, bidirectional=bidirectional, num_buckets=32, max_distance=128
    )
    assert buckets.min() >= 0 and buckets.max() <= 31
    past = buckets[offsets <= 0].flip(0)  # distance 0, 1, 2, ... into the past
    assert (past.diff() >= 0).all(), "buckets grow with distance"
    exact = 8 if bidirectional else 16
    assert past[:exact].tolist() == list(range(exact)), "near offsets are exact"
    assert (past[128:] == past[-1]).all(), "offsets past max_distance share the last bucket"
    future = buckets[offsets > 0]
    if bidirectional:
        assert set(future.tolist()).isdisjoint(past.tolist()), "past and future are told apart"
    else:
        assert (future == 0).all()


def test_causal_gru_stepping_frame_by_frame_equals_forward():
    torch.manual_seed(1)
    net = build_network("causal_gru", IN_DIM, OUT_DIM, **_configured("causal_gru")).eval()
    x = _inputs(5, 3, 50, IN_DIM)
    with torch.no_grad():
        full = net(x)
        state, outputs = None, []
        for t in range(x.shape[1]):
            y_t, state = net.step(x[:, t], state)
            outputs.append(y_t)
    assert outputs[0].shape == (3, OUT_DIM)
    torch.testing.assert_close(torch.stack(outputs, dim=1), full, atol=1e-5, rtol=0)


def test_causal_gru_chunked_stream_equals_forward():
    net = _small("causal_gru")
    x = _inputs(6, 2, 30, 10)
    with torch.no_grad():
        first, state = net.forward_with_state(x[:, :13], net.initial_state(2))
        second, _ = net.forward_with_state(x[:, 13:], state)
        torch.testing.assert_close(torch.cat([first, second], dim=1), net(x), atol=1e-5, rtol=0)


def test_unknown_network_names_the_known_ones():
    with pytest.raises(ConfigError, match=r"mlp.*bigru.*transformer.*causal_gru"):
        build_network("lstm", 4, 2)


def test_unknown_or_invalid_hyper_parameters_are_config_errors():
    with pytest.raises(ConfigError, match="hidden_size"):
        build_network("bigru", 4, 2, **SMALL["bigru"], hidden_size=64)
    with pytest.raises(ConfigError, match="causal"):
        build_network("transformer", 4, 2, **SMALL["transformer"], causal=True)
    with pytest.raises(ConfigError, match="divide"):
        build_network("transformer", 4, 2, **{**SMALL["transformer"], "d_model": 30, "nhead": 4})
    with pytest.raises(ConfigError, match="dropout"):
        build_network("mlp", 4, 2, **{**SMALL["mlp"], "dropout": 1.5})
    with pytest.raises(ConfigError, match="in_dim"):
        build_network("causal_gru", 0, 2, **SMALL["causal_gru"])


def test_missing_hyper_parameters_are_named_not_defaulted():
    """The YAML files are the only home of the reference values: nothing falls back silently."""
    partial = {k: v for k, v in SMALL["transformer"].items() if k != "num_buckets"}
    with pytest.raises(ConfigError, match="needs hyper-parameter num_buckets"):
        build_network("transformer", 4, 2, **partial)


def test_wrong_input_shape_is_a_data_error():
    with pytest.raises(DataError, match=r"\(B, T, 10\)"):
        _small("mlp")(_inputs(7, 2, 5, 11))


def test_network_overfits_a_fixed_batch_of_rotations():
    """6D outputs decoded by Gram-Schmidt, geodesic loss: the whole rotation path can learn."""
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    joints = 4
    x = torch.randn(4, 8, 10, generator=g)
    target = roma.random_rotmat((4, 8, joints), generator=g)
    net = build_network("bigru", 10, joints * 6, hidden_dim=64, num_layers=1, dropout=0.0)
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)

    def loss() -> torch.Tensor:
        rot = rotation_6d_to_matrix(net(x).unflatten(-1, (joints, 6)))
        return geodesic_loss(rot, target)

    start = loss().item()
    for _ in range(300):
        opt.zero_grad()
        value = loss()
        value.backward()
        opt.step()
    assert loss().item() < 0.1 * start
