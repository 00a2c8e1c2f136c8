"""Reading the joint angles a C3D carries."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.shared import PIG, require
from helpers.writers_c3d import write_c3d

from rbmcap.errors import DataError
from rbmcap.io.gait.c3d_angles import read_c3d_angles


def test_points_named_angles_are_read_in_degrees_and_gaps_are_nan(tmp_path):
    values = np.zeros((6, 2, 3))
    values[:, 1] = [10.0, -5.0, 2.5]  # degrees, stored as a point
    valid = np.ones((6, 2), bool)
    valid[3, 1] = False
    path = write_c3d(tmp_path / "a.c3d", ["LASI", "LKneeAngles"], values / 1000, valid)
    angles = read_c3d_angles(path)
    assert list(angles.angles) == ["LKneeAngles"]
    knee = angles.angles["LKneeAngles"]
    assert np.isnan(knee[3]).all()
    np.testing.assert_allclose(knee[[0, 1, 2, 4, 5]], [[10.0, -5.0, 2.5]] * 5, atol=1e-3)


def test_a_c3d_without_angles_is_one_clear_error(tmp_path):
    path = write_c3d(tmp_path / "m.c3d", ["LASI"], np.zeros((5, 1, 3)), np.ones((5, 1), bool))
    with pytest.raises(DataError, match="no joint angles"):
        read_c3d_angles(path)


def test_the_plug_in_gait_walk_carries_its_angle_sets():
    angles = read_c3d_angles(require(PIG) / "PiG_Motion-FlatFoot-One.c3d")
    assert angles.fps == 100.0
    assert {"LHipAngles", "RKneeAngles", "LFootProgressAngles"} <= set(angles.angles)
    np.testing.assert_allclose(angles.angles["LKneeAngles"][100], [48.78, 15.94, 2.10], atol=0.01)
