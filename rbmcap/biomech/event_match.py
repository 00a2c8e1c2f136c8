"""Detected gait events against a reference (a C3D's ``EVENT`` group): which event answers which,
and by how many milliseconds."""

from __future__ import annotations

from dataclasses import dataclass

from rbmcap.biomech.events import GaitEvent

MAX_GAP_S = 0.25
"""A detected event further than this (s) from a reference event of its side and kind is not its
match: a quarter of a normal walking stride."""


@dataclass(frozen=True)
class EventMatch:
    """One reference event and the detected event that answers it, or an unmatched one.

    Attributes:
        reference: the reference event, or None for a detected event that matches none.
        detected: the detected event, or None for a reference event that was not found.
        difference_ms: ``(detected.time - reference.time) * 1000`` (positive: detected late);
            None when either is missing.
    """

    reference: GaitEvent | None
    detected: GaitEvent | None

    @property
    def difference_ms(self) -> float | None:
        if self.reference is None or self.detected is None:
            return None
        return (self.detected.time - self.reference.time) * 1000.0


def match_events(
    detected: list[GaitEvent], reference: list[GaitEvent], max_gap_s: float = MAX_GAP_S
) -> list[EventMatch]:
    """Match each reference event to the nearest detected event of the same side and kind.

    Pairs are taken closest first, each event in at most one pair, and none further apart than
    ``max_gap_s`` seconds (times compared as given: both must count from the same first frame).

    Returns:
        One :class:`EventMatch` per reference event, in reference time order (``detected`` None
        where none was found), then one per detected event left over (``reference`` None), in
        time order.
    """
    pairs = sorted(
        (abs(d.time - r.time), i, j)
        for i, r in enumerate(reference)
        for j, d in enumerate(detected)
        if (d.side, d.kind) == (r.side, r.kind) and abs(d.time - r.time) <= max_gap_s
    )
    of_reference: dict[int, int] = {}
    used: set[int] = set()
    for _, i, j in pairs:
        if i not in of_reference and j not in used:
            of_reference[i] = j
            used.add(j)
    ref_order = sorted(range(len(reference)), key=lambda i: reference[i].time)
    out = [
        EventMatch(reference[i], detected[of_reference[i]] if i in of_reference else None)
        for i in ref_order
    ]
    left = sorted(
        (j for j in range(len(detected)) if j not in used), key=lambda j: detected[j].time
    )
    return out + [EventMatch(None, detected[j]) for j in left]
