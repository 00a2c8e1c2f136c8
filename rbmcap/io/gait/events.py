"""Gait events in files: a C3D's ``EVENT`` group read, and events (or their matches) written as CSV.

A C3D keeps its events in the ``EVENT`` group: ``USED`` (the count), ``CONTEXTS`` (``Left``,
``Right``, ``General``), ``LABELS`` (``Foot Strike``, ``Foot Off``…) and ``TIMES``, one (minutes,
seconds) pair per event, time ``60 * minutes + seconds`` counted from the recording's frame 1 (time
``(f - 1) / rate`` for its 1-based frame f). ``TIMES`` may be a (2, N) array (the C3D convention,
and the reading of a (2, 2) array), an (N, 2) array, or a flat list ``m0, s0, m1, s1, …``. The
data start at that recording's frame ``TRIAL:ACTUAL_START_FIELD`` (two 16-bit words, low first),
else at the ``POINT`` header's first frame; an event's 0-based frame into the data is
``round(seconds * rate) + 1 - first`` and its time ``frame / rate``, the same frame and time
:func:`rbmcap.biomech.events.detect_gait_events` gives for a motion made from the file.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np

from rbmcap.atomic import write_text_atomic
from rbmcap.biomech.event_match import EventMatch
from rbmcap.biomech.events import GaitEvent
from rbmcap.errors import FormatError
from rbmcap.io.c3d import _open  # ezc3d behind c3d's checks and worker process

EVENT_COLUMNS = ("side", "kind", "frame", "time_s")
MATCH_COLUMNS = (
    "side",
    "kind",
    "reference_frame",
    "reference_time_s",
    "detected_frame",
    "detected_time_s",
    "difference_ms",
)


def read_c3d_events(path: str | os.PathLike) -> list[GaitEvent]:
    """The events of a C3D file's ``EVENT`` group, sorted by time (see the module docstring).

    Returns:
        One :class:`GaitEvent` per event (``side`` from ``CONTEXTS``, ``kind`` from ``LABELS``),
        frames 0-based into the file's point data; an empty list when the file has no
        ``EVENT`` group or it holds no event.

    Raises:
        FormatError: the file cannot be read, or its ``EVENT`` group is malformed (missing
            ``CONTEXTS``/``LABELS``/``TIMES``, counts that disagree, times not finite).
    """
    path = Path(path)
    c = _open(path)
    group = c["parameters"].get("EVENT")
    if not group:
        return []
    contexts, labels, seconds = _event_arrays(path, group)
    rate, first = _rate_and_first_frame(c)
    frames = np.rint(seconds * rate).astype(np.int64) + 1 - first
    events = [
        GaitEvent(side, kind, int(f), float(f / rate))
        for side, kind, f in zip(contexts, labels, frames, strict=True)
    ]
    return sorted(events, key=lambda e: (e.time, e.side, e.kind))


def _event_arrays(path: Path, group: dict) -> tuple[list[str], list[str], np.ndarray]:
    """``CONTEXTS``, ``LABELS`` and times (s) of the used events of an ``EVENT`` group: the first
    ``USED`` of each (all three at least that long), or, without ``USED``, all of them (all three
    the same length)."""

    def value(name: str):
        if name not in group:
            raise FormatError(f"{path}: malformed EVENT group: no EVENT:{name}")
        return group[name]["value"]

    used = group.get("USED", {}).get("value")
    contexts = [str(s).strip() for s in value("CONTEXTS")]
    labels = [str(s).strip() for s in value("LABELS")]
    try:
        times = np.asarray(value("TIMES"), dtype=np.float64)
        count = int(np.asarray(used).ravel()[0]) if used is not None else None
    except (TypeError, ValueError, IndexError):
        raise FormatError(f"{path}: malformed EVENT group: unreadable TIMES or USED") from None
    if count == 0:
        return [], [], np.zeros(0)
    pairs = _time_pairs(times)
    if pairs is None:
        raise FormatError(
            f"{path}: malformed EVENT group: TIMES of shape {times.shape}, expected (2, N), "
            "(N, 2) or 2N values (minutes, seconds pairs)"
        )
    lengths = (len(contexts), len(labels), len(pairs))
    there_are = f"{lengths[0]} CONTEXTS, {lengths[1]} LABELS and {lengths[2]} TIMES"
    if count is None and len(set(lengths)) > 1:
        raise FormatError(f"{path}: malformed EVENT group: no USED, and there are {there_are}")
    if count is not None and not 0 <= count <= min(lengths):
        raise FormatError(
            f"{path}: malformed EVENT group: USED is {count} but there are {there_are}"
        )
    count = lengths[0] if count is None else count
    seconds = pairs[:count, 0] * 60.0 + pairs[:count, 1]
    if not np.isfinite(seconds).all():
        raise FormatError(f"{path}: malformed EVENT group: TIMES holds NaN or infinite values")
    return contexts[:count], labels[:count], seconds


def _time_pairs(times: np.ndarray) -> np.ndarray | None:
    """The (N, 2) (minutes, seconds) pairs of an ``EVENT:TIMES`` value, or None when its shape is
    none of the C3D layouts.

    Args:
        times: ``EVENT:TIMES`` as ezc3d gives it, in one of three layouts: a (2, N) array (row 0
            minutes, row 1 seconds: the C3D convention), an (N, 2) array (one row per event), or
            2N values ``m0, s0, m1, s1, …`` (a one-dimensional parameter; the (2, N) array's
            order in the file).

    A (2, 2) array fits both two-dimensional layouts; it is read as (2, N), columns as events.

    >>> _time_pairs(np.array([0.0, 3.5, 1.0, 0.25])).tolist()
    [[0.0, 3.5], [1.0, 0.25]]
    >>> _time_pairs(np.array([[0.0, 1.0], [3.5, 0.25]])).tolist()
    [[0.0, 3.5], [1.0, 0.25]]
    """
    if times.ndim == 1 and times.size % 2 == 0:
        return times.reshape(-1, 2)
    if times.ndim == 2 and times.shape[0] == 2:
        return times.T
    if times.ndim == 2 and times.shape[1] == 2:
        return times
    return None


def _rate_and_first_frame(c: dict) -> tuple[float, int]:
    """Point rate (Hz) and the 1-based recording frame the point data start at."""
    params, header = c["parameters"], c["header"]["points"]
    rate = params.get("POINT", {}).get("RATE", {}).get("value")
    rate = float(np.asarray(rate).ravel()[0]) if rate is not None else float(header["frame_rate"])
    start = params.get("TRIAL", {}).get("ACTUAL_START_FIELD", {}).get("value")
    if start is not None and np.asarray(start).size:
        words = [int(w) & 0xFFFF for w in np.asarray(start).ravel()[:2]]
        return rate, words[0] + (words[1] << 16 if len(words) > 1 else 0)
    return rate, int(header["first_frame"]) + 1  # ezc3d's header first frame is 0-based


def events_csv(events: list[GaitEvent]) -> str:
    """CSV text of events: a header row (:data:`EVENT_COLUMNS`) then one row per event."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(EVENT_COLUMNS)
    for e in events:
        w.writerow([e.side, e.kind, e.frame, f"{e.time:.4f}"])
    return out.getvalue()


def matches_csv(matches: list[EventMatch]) -> str:
    """CSV text of event matches (:data:`MATCH_COLUMNS`); empty cells where a side is missing."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(MATCH_COLUMNS)
    for m in matches:
        r, d, diff = m.reference, m.detected, m.difference_ms
        one = r or d
        gap = "" if diff is None else f"{diff:.1f}"
        w.writerow([one.side, one.kind, *_frame_time(r), *_frame_time(d), gap])
    return out.getvalue()


def _frame_time(e: GaitEvent | None) -> list[str]:
    return ["", ""] if e is None else [str(e.frame), f"{e.time:.4f}"]


def write_events_csv(path: str | os.PathLike, events: list[GaitEvent] | list[EventMatch]) -> Path:
    """Write events (:func:`events_csv`) or event matches (:func:`matches_csv`) to ``path``
    atomically; returns the path."""
    if events and isinstance(events[0], EventMatch):
        return write_text_atomic(path, matches_csv(events))  # type: ignore[arg-type]
    return write_text_atomic(path, events_csv(events))  # type: ignore[arg-type]
