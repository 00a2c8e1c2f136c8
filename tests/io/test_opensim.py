"""OpenSim's files as rbmcap writes them: OpenSim's own API reads the .trc and the .mot with the
right units, rate, column names and values; the Z-up world turns into OpenSim's Y-up one; bad
input is one error line."""

from __future__ import annotations

import numpy as np
import pytest

from rbmcap.errors import DataError
from rbmcap.io.opensim.files import read_mot, write_mot, write_trc, zup_to_yup

NAMES = ["R.ASIS", "L.ASIS", "V.Sacral"]


@pytest.fixture
def positions():
    rng = np.random.default_rng(0)
    return rng.normal(0.0, 1.0, (7, 3, 3))


def _opensim():
    """OpenSim's API as rbmcap loads it (no opensim.log in the working folder), or a skip."""
    pytest.importorskip("opensim")
    from rbmcap.io.opensim.api import load_opensim

    return load_opensim()


def test_heights_become_opensims_y_and_handedness_is_kept():
    up, forward, left = zup_to_yup(np.eye(3))
    assert np.allclose(zup_to_yup([0.0, 0.0, 1.7]), [0.0, 1.7, 0.0])
    assert np.isclose(np.linalg.det(np.stack([up, forward, left])), 1.0)


@pytest.mark.parametrize("units, scale", [("mm", 1000.0), ("m", 1.0)])
def test_opensim_reads_the_trc_with_its_units_rate_and_names(tmp_path, positions, units, scale):
    opensim = _opensim()
    path = write_trc(tmp_path / "m.trc", NAMES, positions, 120.0, units=units)
    table = opensim.TimeSeriesTableVec3(str(path))
    assert list(table.getColumnLabels()) == NAMES
    assert table.getTableMetaDataAsString("Units") == units
    assert float(table.getTableMetaDataAsString("DataRate")) == 120.0
    assert table.getNumRows() == 7
    assert np.allclose(list(table.getIndependentColumn()), np.arange(7) / 120.0, atol=1e-6)
    got = np.array(
        [[[table.getRowAtIndex(t)[j][k] for k in range(3)] for j in range(3)] for t in range(7)]
    )
    assert np.allclose(got, positions * scale, atol=1e-5)
    data = opensim.MarkerData(str(path))
    assert data.getUnits().getAbbreviation() == units and data.getDataRate() == 120.0


def test_opensim_reads_the_mot_in_degrees_with_its_columns(tmp_path):
    opensim = _opensim()
    values = np.column_stack([np.linspace(0, 90, 5), np.linspace(0.1, 0.5, 5)])
    path = write_mot(tmp_path / "c.mot", ["knee_angle_r", "pelvis_tx"], values, 50.0)
    storage = opensim.Storage(str(path))
    assert storage.isInDegrees() and storage.getSize() == 5
    labels = storage.getColumnLabels()
    assert [labels.get(i) for i in range(labels.size())] == ["time", "knee_angle_r", "pelvis_tx"]
    table = opensim.TimeSeriesTable(str(path))
    assert np.allclose(table.getDependentColumn("knee_angle_r").to_numpy(), values[:, 0])
    assert np.allclose(list(table.getIndependentColumn()), np.arange(5) / 50.0)
    names, back = read_mot(path)
    assert names[1:] == ["knee_angle_r", "pelvis_tx"] and np.allclose(back[:, 1:], values)


@pytest.mark.parametrize(
    "names, shape, match",
    [
        (NAMES, (0, 3, 3), "expected"),
        (["A", "A", "B"], (2, 3, 3), "duplicates"),
        (["A B", "C", "D"], (2, 3, 3), "whitespace"),
        (NAMES, (2, 2, 3), "expected"),
    ],
)
def test_bad_markers_are_one_data_error_and_write_nothing(tmp_path, names, shape, match):
    with pytest.raises(DataError, match=match) as info:
        write_trc(tmp_path / "m.trc", names, np.zeros(shape), 60.0)
    assert "\n" not in str(info.value) and not any(tmp_path.iterdir())


def test_nan_coordinates_are_refused(tmp_path):
    with pytest.raises(DataError, match="NaN"):
        write_mot(tmp_path / "c.mot", ["a"], np.array([[np.nan]]), 60.0)
    assert not any(tmp_path.iterdir())
