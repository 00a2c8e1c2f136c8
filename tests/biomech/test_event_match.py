"""Matching detected gait events to a reference's: same side and kind, nearest first, each event
used once, and what is left over reported on both sides."""

from __future__ import annotations

import pytest

from rbmcap.biomech.event_match import EventMatch, match_events
from rbmcap.biomech.events import GaitEvent


def ev(side: str, kind: str, time: float) -> GaitEvent:
    return GaitEvent(side, kind, round(time * 100), time)


def test_each_reference_event_takes_the_nearest_detected_event_of_its_side_and_kind():
    reference = [ev("Left", "Foot Strike", 1.00), ev("Right", "Foot Off", 1.20)]
    detected = [
        ev("Right", "Foot Strike", 1.00),  # other side
        ev("Left", "Foot Off", 1.01),  # other kind
        ev("Left", "Foot Strike", 1.04),
        ev("Left", "Foot Strike", 0.99),
        ev("Right", "Foot Off", 1.17),
    ]
    matches = match_events(detected, reference)
    assert matches[0] == EventMatch(reference[0], detected[3])
    assert matches[0].difference_ms == pytest.approx(-10.0)
    assert matches[1].difference_ms == pytest.approx(-30.0)
    leftover = [m.detected for m in matches[2:]]
    assert all(m.reference is None and m.difference_ms is None for m in matches[2:])
    assert leftover == [detected[0], detected[1], detected[2]]  # in time order


def test_a_detected_event_answers_one_reference_event_only():
    reference = [ev("Left", "Foot Strike", 1.00), ev("Left", "Foot Strike", 1.10)]
    detected = [ev("Left", "Foot Strike", 1.08)]
    matches = match_events(detected, reference)
    assert matches[0].detected is None and matches[0].difference_ms is None
    assert matches[1].detected == detected[0]
    assert len(matches) == 2


def test_events_further_apart_than_the_gap_do_not_match():
    reference = [ev("Left", "Foot Off", 1.0)]
    detected = [ev("Left", "Foot Off", 1.3)]
    assert [m.detected for m in match_events(detected, reference)] == [None, detected[0]]
    assert match_events(detected, reference, max_gap_s=0.5)[0].difference_ms == pytest.approx(300)


def test_nothing_to_match_gives_nothing():
    assert match_events([], []) == []
