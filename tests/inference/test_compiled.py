"""The stream's frame step compiled ahead of time: it answers as the model does offline, it is
compiled once per model and then read from the cache, and when it cannot compile it says so in
one line and leaves nothing behind."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.observations import random_observations
from helpers.training import small_model

import rbmcap.inference.compiled as compiled
from rbmcap.errors import ConfigError, ModelError
from rbmcap.inference import Predictor
from rbmcap.inference.stream import FrameStep
from rbmcap.paths import cache_dir

STREAM = ("features=reach", "plate_fit.enabled=true")  # the most operations of any features


def _stream_model(standin, seed: int = 3):
    model = small_model(standin, "causal_gru", *STREAM).eval()
    with torch.no_grad():  # an output layer that is not zero, so the network's answer counts
        for p in model.net.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(seed)))
    return model


def _program(model):
    session = Predictor(model).stream()
    example = (*session._first_frame(), model.net.initial_state(1))
    from rbmcap.inference.stream import frame_step

    _, sums = frame_step(model, *example, backend="eager")
    args = (*example, sums[0], torch.ones((), dtype=torch.float64), *sums[1:])
    with torch.no_grad(), compiled.frozen(model):
        return torch.export.export(FrameStep(model), args, strict=False)


def test_an_unknown_backend_is_a_config_error(standin):
    model = small_model(standin, "causal_gru", *STREAM).eval()
    with pytest.raises(ConfigError, match="unknown stream backend 'jit'"):
        Predictor(model).stream(backend="jit")


def test_the_package_is_keyed_by_the_step_and_its_weights(standin):
    model = _stream_model(standin)
    path = compiled.package_path(_program(model))
    assert path.parent == cache_dir() / "stream" and path.suffix == ".pt2"
    assert compiled.package_path(_program(model)) == path  # the same model: the same package
    assert compiled.package_path(_program(_stream_model(standin, seed=4))) != path  # weights


def test_a_failed_compile_is_one_model_error_and_leaves_no_package(standin, monkeypatch, tmp_path):
    monkeypatch.setenv("RBMCAP_CACHE", str(tmp_path))

    def no_compiler(program, package_path):
        open(package_path, "wb").write(b"half a library")
        raise RuntimeError("InductorError: CppCompileError: C++ compile error\n  g++: not found")

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", no_compiler)
    with pytest.raises(ModelError) as err:
        Predictor(_stream_model(standin)).stream(backend="compiled")
    message = str(err.value)
    assert message.startswith(f"compiling the stream step into {tmp_path / 'stream'}")
    assert "failed (it needs a C++ compiler and a writable cache" in message
    assert "CppCompileError" in message and "\n" not in message
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


@pytest.mark.slow
def test_a_compiled_stream_answers_as_offline_and_compiles_once(standin, monkeypatch, tmp_path):
    """Rotations and translation to 1e-5 against the whole sequence offline, with plates coming
    and going; a second session of the same model loads the cached package (no compile)."""
    monkeypatch.setenv("RBMCAP_CACHE", str(tmp_path))
    model = _stream_model(standin)
    pos, rot, valid = random_observations(40)
    session = Predictor(model).stream(backend="compiled")
    streamed = [session.push(pos[i], rot[i], valid[i]) for i in range(40)]
    with torch.no_grad():
        offline = model(*(torch.as_tensor(x)[None] for x in (pos, rot, valid)))
    np.testing.assert_allclose(
        np.stack([r for r, _ in streamed]), offline["rotmats"][0].numpy(), atol=1e-5, rtol=0
    )
    np.testing.assert_allclose(
        np.stack([t for _, t in streamed]), offline["trans"][0].numpy(), atol=1e-5, rtol=0
    )
    assert len(list((tmp_path / "stream").glob("*.pt2"))) == 1

    def no_compile(*args):
        raise AssertionError("compiled again")

    monkeypatch.setattr(compiled, "_compile", no_compile)
    again = Predictor(model).stream(backend="compiled")
    rotmats, trans = again.push(pos[0], rot[0], valid[0])
    np.testing.assert_allclose(rotmats, streamed[0][0], atol=1e-6, rtol=0)
    np.testing.assert_allclose(trans, streamed[0][1], atol=1e-6, rtol=0)
