"""A C3D's EVENT group read into gait events (frames counted from the file's first frame), a
malformed group as one FormatError, and events written as CSV."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.shared import PIG
from helpers.writers_c3d import write_c3d

from rbmcap.biomech.event_match import match_events
from rbmcap.biomech.events import GaitEvent
from rbmcap.errors import FormatError
from rbmcap.io.gait.events import read_c3d_events, write_events_csv

WALK = PIG / "PiG_Motion-FlatFoot-One.c3d"


def c3d_with_events(path, first_frame=10, actual_start_field=None, **event):
    """A 20-frame 100 Hz C3D starting at 0-based frame ``first_frame`` (in the header) with
    ``EVENT`` parameters ``event`` (name → value) and, when given, ``TRIAL:ACTUAL_START_FIELD``."""
    import ezc3d

    write_c3d(path, ["A"], np.zeros((20, 1, 3)), np.ones((20, 1), bool), first_frame=first_frame)
    c = ezc3d.c3d(str(path))
    for name, value in event.items():
        c.add_parameter("EVENT", name, value)
    if actual_start_field is not None:
        c.add_parameter("TRIAL", "ACTUAL_START_FIELD", list(actual_start_field))
    c.write(str(path))
    return path


def test_event_times_become_frames_from_the_files_first_frame(tmp_path):
    # Data from recording frame 11 (0-based 10); an event at 0.12 s is recording frame 13.
    path = c3d_with_events(
        tmp_path / "e.c3d",
        USED=[2],
        CONTEXTS=["Right", "Left"],
        LABELS=["Foot Off", "Foot Strike"],
        TIMES=np.array([[0.0, 0.0], [0.15, 0.12]]),
    )
    assert read_c3d_events(path) == [
        GaitEvent("Left", "Foot Strike", 2, 0.02),
        GaitEvent("Right", "Foot Off", 5, 0.05),
    ]


# Three events as (minutes, seconds); time 60.00 s is recording frame 6001, 0-based frame 6000.
PAIRS = np.array([[1.0, 0.12], [0.0, 60.05], [1.0, 0.17]])
LAYOUTS = {"2 x N": PAIRS.T, "N x 2": PAIRS, "flat pairs": PAIRS.ravel()}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_of_event_times_gives_the_same_frames(tmp_path, layout):
    path = c3d_with_events(
        tmp_path / "e.c3d",
        first_frame=6000,
        CONTEXTS=["Right", "Left", "Left"],
        LABELS=["Foot Off", "Foot Strike", "Foot Off"],
        TIMES=LAYOUTS[layout],
    )
    assert read_c3d_events(path) == [
        GaitEvent("Left", "Foot Strike", 5, 0.05),
        GaitEvent("Right", "Foot Off", 12, 0.12),
        GaitEvent("Left", "Foot Off", 17, 0.17),
    ]


def test_a_two_by_two_times_array_holds_one_event_per_column(tmp_path):
    # (2, 2) fits both (2, N) and (N, 2); the C3D convention reads row 0 as minutes.
    path = c3d_with_events(
        tmp_path / "e.c3d",
        first_frame=6000,
        USED=[2],
        CONTEXTS=["Right", "Left"],
        LABELS=["Foot Off", "Foot Strike"],
        TIMES=np.array([[1.0, 0.0], [0.12, 60.05]]),
    )
    assert [(e.side, e.frame) for e in read_c3d_events(path)] == [("Left", 5), ("Right", 12)]


def test_the_trials_actual_start_field_sets_the_first_frame_past_16_bits(tmp_path):
    # Recording frame 70001 = 4465 + 1 * 65536 starts the data, at 700 s (11 min 40 s).
    path = c3d_with_events(
        tmp_path / "e.c3d",
        first_frame=0,
        actual_start_field=[4465, 1],
        CONTEXTS=["Left"],
        LABELS=["Foot Strike"],
        TIMES=np.array([11.0, 40.07]),
    )
    assert read_c3d_events(path) == [GaitEvent("Left", "Foot Strike", 7, 0.07)]


def test_a_c3d_without_events_has_none(tmp_path):
    path = write_c3d(tmp_path / "n.c3d", ["A"], np.zeros((5, 1, 3)), np.ones((5, 1), bool))
    assert read_c3d_events(path) == []


@pytest.mark.parametrize(
    ("event", "says"),
    [
        ({"LABELS": ["Foot Off"], "TIMES": np.array([[0.0], [0.1]])}, "no EVENT:CONTEXTS"),
        (
            {
                "USED": [3],
                "CONTEXTS": ["Left"] * 3,
                "LABELS": ["Foot Off"] * 3,
                "TIMES": np.array([[0.0, 0.0], [0.1, 0.2]]),
            },
            "USED is 3",
        ),
        (
            {"CONTEXTS": ["Left"], "LABELS": ["Foot Off"], "TIMES": np.array([[0.0, 0.1, 0.2]])},
            "TIMES of shape",
        ),
        (
            {"CONTEXTS": ["Left"], "LABELS": ["Foot Off"], "TIMES": np.array([0.0, 0.1, 0.2])},
            r"TIMES of shape \(3,\)",
        ),
        (
            {
                "CONTEXTS": ["Left", "Right"],
                "LABELS": ["Foot Off", "Foot Off"],
                "TIMES": np.array([[0.0, 0.0, 0.0], [0.1, 0.2, 0.3]]),
            },
            "no USED, and there are 2 CONTEXTS, 2 LABELS and 3 TIMES",
        ),
    ],
)
def test_a_malformed_event_group_is_one_format_error(tmp_path, event, says):
    path = c3d_with_events(tmp_path / "bad.c3d", **event)
    with pytest.raises(FormatError, match=f"bad.c3d: malformed EVENT group: {says}"):
        read_c3d_events(path)


@pytest.mark.skipif(
    not WALK.is_file(), reason="the Plug-in Gait walk (../shared/data/pig) is absent"
)
def test_the_real_walks_eight_events_are_read_exactly():
    expected = [
        ("Left", "Foot Strike", 2),
        ("Right", "Foot Strike", 63),
        ("Left", "Foot Off", 77),
        ("Left", "Foot Strike", 131),
        ("Right", "Foot Off", 146),
        ("Right", "Foot Strike", 190),
        ("Left", "Foot Off", 206),
        ("Left", "Foot Strike", 254),
    ]
    events = read_c3d_events(WALK)
    assert [(e.side, e.kind, e.frame) for e in events] == expected
    assert [e.time for e in events] == pytest.approx([f / 100.0 for _, _, f in expected])


def test_events_and_matches_are_written_as_csv(tmp_path):
    events = [GaitEvent("Left", "Foot Strike", 2, 0.02), GaitEvent("Right", "Foot Off", 63, 0.63)]
    write_events_csv(tmp_path / "e.csv", events)
    assert (tmp_path / "e.csv").read_text().splitlines() == [
        "side,kind,frame,time_s",
        "Left,Foot Strike,2,0.0200",
        "Right,Foot Off,63,0.6300",
    ]
    matches = match_events([GaitEvent("Left", "Foot Strike", 3, 0.03)], events)
    write_events_csv(tmp_path / "m.csv", matches)
    assert (tmp_path / "m.csv").read_text().splitlines() == [
        "side,kind,reference_frame,reference_time_s,detected_frame,detected_time_s,difference_ms",
        "Left,Foot Strike,2,0.0200,3,0.0300,10.0",
        "Right,Foot Off,63,0.6300,,,",
    ]
