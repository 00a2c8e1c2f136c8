"""A motion's angles against a capture's: the figures, the knee's swing peaks, the cycles."""

from __future__ import annotations

import numpy as np
import pytest

from rbmcap.biomech.angles import AngleTable
from rbmcap.errors import DataError
from rbmcap.evaluation.capture_angles import compare_angles, on_capture_frames, swing_peaks


def _table(knee: np.ndarray, fps: float = 100.0) -> AngleTable:
    three = np.stack([knee, 0.5 * knee, np.zeros_like(knee)], axis=1)
    return AngleTable(
        {"LKneeAngles": three},
        {"LKneeAngles": ("flexion", "adduction", "internal rotation")},
        fps,
        "plug-in-gait",
    )


def test_an_offset_shows_in_the_rms_and_not_once_removed():
    t = np.linspace(0, 2 * np.pi, 200)
    theirs = 30 + 30 * np.sin(t)
    ours = theirs + 4.0
    reference = {"LKneeAngles": np.stack([theirs, 0.5 * theirs, np.zeros_like(t)], axis=1)}
    rows = compare_angles(_table(ours), reference, 100.0)
    flexion = rows[0]
    assert flexion.rms == pytest.approx(4.0)
    assert flexion.rms_without_offset == pytest.approx(0.0, abs=1e-9)
    assert flexion.offset == pytest.approx(4.0)
    assert flexion.correlation == pytest.approx(1.0)
    assert rows[1].rms == pytest.approx(2.0)


def test_an_angle_of_the_opposite_sign_scores_worse_in_every_figure():
    t = np.linspace(0, 2 * np.pi, 200)
    theirs = 20 + 30 * np.sin(t)
    reference = {"LKneeAngles": np.stack([theirs, 0.5 * theirs, np.zeros_like(t)], axis=1)}
    right = compare_angles(_table(theirs + 4.0), reference, 100.0)[0]
    flipped = compare_angles(_table(-theirs), reference, 100.0)[0]
    assert right.rms == pytest.approx(4.0) and flipped.rms > 50.0
    assert right.rms_without_offset == pytest.approx(0.0, abs=1e-9)
    assert flipped.rms_without_offset > 40.0
    assert flipped.correlation == pytest.approx(-1.0) and right.correlation == pytest.approx(1.0)


def test_frames_the_capture_lacks_are_left_out():
    theirs = np.full((50, 3), 10.0)
    theirs[10:20] = np.nan
    rows = compare_angles(_table(np.full(50, 12.0)), {"LKneeAngles": theirs}, 100.0)
    assert rows[0].frames == 40
    assert rows[0].rms == pytest.approx(2.0)


def test_a_motion_at_another_rate_is_read_at_the_captures_frames():
    ours = _table(np.arange(60, dtype=float), fps=60.0)  # one degree per motion frame
    at_100 = on_capture_frames(ours, 100.0, 100)["LKneeAngles"][:, 0]
    np.testing.assert_allclose(at_100[:99], np.arange(99) * 0.6, atol=1e-9)
    assert np.isnan(at_100[99])  # past the motion's last frame


def test_the_knee_peak_of_each_cycle_is_its_largest_flexion():
    flexion = np.concatenate([np.linspace(0, 60, 50), np.linspace(60, 0, 50), np.full(50, 5.0)])
    assert swing_peaks(flexion, [0, 100, 149]) == [(0, 100, 60.0), (100, 149, 5.0)]


def test_nothing_in_common_is_one_clear_error():
    with pytest.raises(DataError, match="no angle set in common"):
        compare_angles(_table(np.zeros(5)), {"RHipAngles": np.zeros((5, 3))}, 100.0)
