"""A body-model ``.pkl`` resolves only numpy, scipy sparse and chumpy globals: any other global is
refused before it runs, so loading a model folder (or the one a checkpoint names) runs no code."""

from __future__ import annotations

import builtins
import os
import pickle
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from rbmcap.body import load_body_model, read_model_arrays, standin_path
from rbmcap.errors import FormatError


class _Payload:
    """Unpickles into a call of ``function(argument)``: what a malicious pickle carries."""

    def __init__(self, function, argument: str) -> None:
        self.function, self.argument = function, argument

    def __reduce__(self):
        return self.function, (self.argument,)


def _payloads(marker):
    return {
        "os.system": _Payload(os.system, f"touch {marker}"),
        "builtins.exec": _Payload(builtins.exec, f"open({str(marker)!r}, 'w').close()"),
    }


def _model_arrays() -> dict:
    return dict(np.load(standin_path()))


@pytest.mark.parametrize("kind", ["os.system", "builtins.exec"])
@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_a_pickle_that_would_run_code_is_refused_and_the_code_never_runs(tmp_path, kind, protocol):
    marker = tmp_path / "payload-ran"
    model = _model_arrays()
    model["bs_style"] = _payloads(marker)[kind]
    path = tmp_path / "smpl" / "SMPL_NEUTRAL.pkl"
    path.parent.mkdir()
    path.write_bytes(pickle.dumps(model, protocol=protocol))
    with pytest.raises(FormatError) as err:
        read_model_arrays(path)
    message = str(err.value)
    assert "\n" not in message
    assert str(path) in message
    assert ("posix.system" if kind == "os.system" else "builtins.exec") in message
    with pytest.raises(FormatError):
        load_body_model(tmp_path)  # found in a model folder by its file name: refused the same
    assert not marker.exists()


def test_a_payload_at_the_top_of_the_pickle_is_refused(tmp_path):
    marker = tmp_path / "payload-ran"
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(_payloads(marker)["os.system"], protocol=2))
    with pytest.raises(FormatError, match=r"refused to unpickle posix\.system"):
        read_model_arrays(path)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_model_pickle_of_numpy_and_scipy_objects_loads_at_every_protocol(tmp_path, protocol):
    arrays = _model_arrays()
    model = dict(arrays)
    model["J_regressor"] = sp.csc_matrix(arrays["J_regressor"])
    model["J_regressor_prior"] = sp.csr_matrix(arrays["J_regressor"])
    model["scale"] = np.float32(1.0)
    model["vert_sym_idxs"] = {0, 1}
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(model, protocol=protocol))
    got = read_model_arrays(path)
    np.testing.assert_array_equal(got["J_regressor"], arrays["J_regressor"])
    np.testing.assert_array_equal(got["J_regressor_prior"], arrays["J_regressor"])
    np.testing.assert_array_equal(got["v_template"], arrays["v_template"])


def test_numpy_1_and_old_scipy_module_names_load_without_warnings(tmp_path):
    """numpy 1 wrote ``numpy.core`` in its pickles; scipy before 1.8, ``scipy.sparse.csc``."""
    arrays = _model_arrays()
    model = dict(arrays, J_regressor=sp.csc_matrix(arrays["J_regressor"]))
    data = pickle.dumps(model, protocol=0)  # text opcodes: module names are plain lines
    renames = [(b"numpy._core.", b"numpy.core."), (b"scipy.sparse._csc", b"scipy.sparse.csc")]
    for new, old in renames:
        assert new in data
        data = data.replace(new, old)
    path = tmp_path / "model.pkl"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = read_model_arrays(path)
    np.testing.assert_array_equal(got["J_regressor"], arrays["J_regressor"])
