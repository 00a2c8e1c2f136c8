"""The pretrained model shipped in the package: resolved by name, small, and as accurate on the
fixed check set as its card says."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rbmcap.cli.main import main
from rbmcap.errors import EXIT_MODEL, ModelError
from rbmcap.inference import Predictor
from rbmcap.inference.pretrained import check_accuracy, model_card
from rbmcap.io.capture import Capture
from rbmcap.paths import pretrained_dir, pretrained_names, resolve_checkpoint

NAME = "standin-rbm14"


@pytest.mark.parametrize("name", pretrained_names())
def test_each_shipped_model_is_under_10_mb_with_its_card(name):
    assert NAME in pretrained_names()
    path = resolve_checkpoint(name)
    assert path.parent == pretrained_dir() and path.stat().st_size <= 10 * 2**20
    card = model_card(name)
    assert card["command"] and card["trained_on"] and card["check"]["mpjpe_mm"]["mean"] > 0


@pytest.mark.parametrize("name", pretrained_names())
def test_each_loads_by_name_and_meets_its_recorded_accuracy(name):
    predictor = Predictor.from_checkpoint(name)
    assert predictor.marker_set == "rbm14" and predictor.body_id.startswith("standin")
    recorded = model_card(name)["check"]["mpjpe_mm"]
    measured = check_accuracy(predictor)
    print(f"check set: measured {measured['mean']:.2f} mm, recorded {recorded['mean']:.2f} mm")
    assert measured.keys() == recorded.keys()
    for key, value in recorded.items():
        assert measured[key] == pytest.approx(value, abs=0.5), key


def test_an_unknown_name_is_one_model_error_listing_the_shipped_ones():
    with pytest.raises(ModelError, match=f"no such checkpoint.*{NAME}"):
        Predictor.from_checkpoint("standin-rbm99")


def test_cli_lists_the_cards_and_infer_names_the_shipped_ones(capsys, tmp_path):
    assert main(["pretrained", "list", "--json"]) == 0
    cards = json.loads(capsys.readouterr().out)
    assert cards[NAME]["check"]["mpjpe_mm"]["mean"] == model_card(NAME)["check"]["mpjpe_mm"]["mean"]
    cap = Capture(
        fps=60.0,
        names=["head"],
        pos=np.zeros((2, 1, 3)),
        rot=np.tile(np.eye(3), (2, 1, 1, 1)),
        valid=np.ones((2, 1), bool),
    )
    path = cap.save(tmp_path / "cap.npz")
    code = main(["infer", "--ckpt", "no-such-model", str(path), "--out", str(tmp_path / "m.npz")])
    err = capsys.readouterr().err
    assert code == EXIT_MODEL and "no-such-model" in err and NAME in err
    assert not (tmp_path / "m.npz").exists()
