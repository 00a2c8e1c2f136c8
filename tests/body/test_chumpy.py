"""Official SMPL pickles hold chumpy objects: rbmcap reads them without chumpy."""

from __future__ import annotations

import pickle
import sys
import types

import numpy as np
import scipy.sparse as sp
import torch

from rbmcap.body import convert_model, load_body_model, read_model_arrays, standin_path
from rbmcap.cli.main import main


def _write_chumpy_pickle(path):
    """Pickle model arrays the way the official files do: chumpy ``Ch`` objects, a scipy
    sparse regressor, protocol 2, with a throw-away ``chumpy`` module that is removed again."""
    module = types.ModuleType("chumpy")
    ch_module = types.ModuleType("chumpy.ch")

    class Ch:
        def __init__(self, x):
            self.x = np.asarray(x)
            self._dirty_vars = set()

    Ch.__module__ = "chumpy.ch"
    Ch.__qualname__ = "Ch"
    ch_module.Ch = Ch
    module.ch = ch_module
    sys.modules["chumpy"], sys.modules["chumpy.ch"] = module, ch_module
    try:
        arrays = dict(np.load(standin_path()))
        payload = {
            "v_template": Ch(arrays["v_template"]),
            "shapedirs": Ch(arrays["shapedirs"]),
            "posedirs": arrays["posedirs"],
            "weights": Ch(arrays["weights"]),
            "J_regressor": sp.csc_matrix(arrays["J_regressor"]),
            "J": Ch(arrays["J"]),
            "kintree_table": arrays["kintree_table"],
            "f": arrays["f"],
            "bs_type": "lrotmin",
        }
        with open(path, "wb") as fh:
            pickle.dump(payload, fh, protocol=2)
    finally:
        del sys.modules["chumpy"], sys.modules["chumpy.ch"]
    return arrays


def test_chumpy_pickle_reads_without_chumpy(tmp_path):
    arrays = _write_chumpy_pickle(tmp_path / "basicmodel_neutral_lbs_10_207_0_v1.1.0.pkl")
    assert "chumpy" not in sys.modules
    got = read_model_arrays(tmp_path / "basicmodel_neutral_lbs_10_207_0_v1.1.0.pkl")
    np.testing.assert_array_equal(got["shapedirs"], arrays["shapedirs"])
    np.testing.assert_array_equal(got["J_regressor"], arrays["J_regressor"])
    body = load_body_model(tmp_path)  # found by its official file name
    ref = load_body_model("standin")
    pose = 0.3 * torch.randn(2, 24, 3, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(body(pose).vertices, ref(pose).vertices, atol=1e-6)


def test_convert_writes_a_plain_npz_that_loads(tmp_path):
    _write_chumpy_pickle(tmp_path / "model.pkl")
    out = convert_model(tmp_path / "model.pkl", tmp_path / "out" / "model.npz")
    with np.load(out, allow_pickle=False) as data:
        assert data["v_template"].dtype == np.float64
        assert "bs_type" in data.files
    assert load_body_model(out).num_vertices == load_body_model("standin").num_vertices


def test_cli_convert(tmp_path, capsys):
    _write_chumpy_pickle(tmp_path / "model.pkl")
    assert (
        main(["body", "convert", str(tmp_path / "model.pkl"), "--out", str(tmp_path / "m.npz")])
        == 0
    )
    assert (tmp_path / "m.npz").is_file()
