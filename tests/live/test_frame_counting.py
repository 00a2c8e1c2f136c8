"""Frame numbers as a live session places them (:class:`~rbmcap.live.frames.FrameCounter`):
``lost``, ``late``, ``duplicates`` and ``restarts`` mean what docs/live.md says they mean under
loss, reordering, duplicates, a sender that restarts and frame numbers that wrap, and exactly the
frames in order come back to be posed."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.live.frames import LATE_FRAMES, FrameCounter, LiveStats, number_step

FPS = 240.0
W = LATE_FRAMES
MAX_DELAY = 20
"""The most frames a packet may arrive after its time (reordering, a duplicate's copy)."""


@dataclass
class Packet:
    frame: int  # as the source gives it (int32, uint32 or a plain int)
    timestamp: float
    received: float


def counted(packets, fps: float = FPS) -> tuple[LiveStats, list[tuple[int, int]]]:
    """The counters after ``packets``, and (number as given, unwrapped) of each frame in order."""
    stats = LiveStats()
    counter = FrameCounter(stats)
    counter.fps = fps
    in_order = []
    for packet in packets:
        in_order += [(p.frame, number) for p, number in counter.count(packet)]
    return stats, in_order


def _counts(stats: LiveStats) -> dict:
    keys = ("received", "lost", "late", "duplicates", "restarts")
    return {k: getattr(stats, k) for k in keys}


def _as_given(number: int, kind: str) -> int:
    """A frame number as a source of ``kind`` sends it: NatNet's int32, QTM's uint32."""
    if kind == "int32":
        return (number + 2**31) % 2**32 - 2**31
    if kind == "uint32":
        return number % 2**32
    return number


def _packets(numbers, kind: str = "plain", times=None) -> list[Packet]:
    times = range(len(numbers)) if times is None else times
    return [
        Packet(_as_given(n, kind), n / FPS, t / FPS) for n, t in zip(numbers, times, strict=True)
    ]


# ------------------------------------------------------------------------- one case each


def test_frames_in_order_with_a_gap_count_the_gap_lost():
    stats, in_order = counted(_packets([5, 6, 7, 10, 11], times=[0, 1, 2, 5, 6]))
    assert _counts(stats) == dict(received=5, lost=2, late=0, duplicates=0, restarts=0)
    assert [n for n, _ in in_order] == [5, 6, 7, 10, 11]


def test_a_stream_reaching_the_client_on_two_sockets_counts_duplicates_only():
    """Every frame twice, the second copy a frame or two behind (a stream sent to the data
    port and to the client's address): copies of recent frames, not late, lost or restarts."""
    numbers = list(range(100, 160))
    arrivals = []
    for k, n in enumerate(numbers):
        arrivals.append((k, n))
        arrivals.append((k + 1 + k % 2, n))  # the copy, one or two frames later
    arrivals.sort(key=lambda a: a[0])
    stats, in_order = counted([Packet(n, n / FPS, t / FPS) for t, n in arrivals])
    assert _counts(stats) == dict(received=120, lost=0, late=0, duplicates=60, restarts=0)
    assert [n for n, _ in in_order] == numbers


def test_a_packet_filling_a_gap_is_late_and_no_longer_lost():
    stats, in_order = counted(_packets([0, 1, 2, 4, 3, 5, 6]))
    assert _counts(stats) == dict(received=7, lost=0, late=1, duplicates=0, restarts=0)
    assert [n for n, _ in in_order] == [0, 1, 2, 4, 5, 6]


def test_natnet_and_qtm_frame_numbers_wrap_as_one_step():
    for kind, top in (("int32", 2**31), ("uint32", 2**32)):
        numbers = list(range(top - 5, top + 5))
        stats, in_order = counted(_packets(numbers, kind))
        assert _counts(stats) == dict(received=10, lost=0, late=0, duplicates=0, restarts=0)
        unwrapped = [u for _, u in in_order]
        assert unwrapped == list(range(unwrapped[0], unwrapped[0] + 10))


def test_a_jump_forward_further_than_the_source_could_send_is_a_restart_not_lost():
    """A billion frames ahead a frame later cannot have been lost: the sender numbers afresh."""
    numbers = [10, 11, 12, 1_000_000_000, 1_000_000_001, 1_000_000_002]
    stats, in_order = counted(_packets(numbers, times=range(6)))
    assert _counts(stats) == dict(received=6, lost=0, late=0, duplicates=0, restarts=1)
    assert [n for n, _ in in_order] == numbers


def test_a_long_outage_counts_every_frame_the_source_sent_meanwhile_lost():
    stats, _ = counted(_packets([0, 1, 2, 2402, 2403], times=[0, 1, 2, 2402, 2403]))
    assert _counts(stats) == dict(received=5, lost=2399, late=0, duplicates=0, restarts=0)


def test_a_restart_is_a_step_back_that_the_next_frame_continues():
    """Far back, or to a number near zero below where the stream began: the frame after it
    confirms the new numbering, and both are in order."""
    numbers = [5000, 5001, 5002, 3, 4, 5]
    stats, in_order = counted(_packets(numbers))
    assert _counts(stats) == dict(received=6, lost=0, late=0, duplicates=0, restarts=1)
    assert [n for n, _ in in_order] == numbers
    numbers = [10, 11, 12, 15, 16, 0, 1, 2]
    stats, in_order = counted(_packets(numbers))
    assert _counts(stats) == dict(received=8, lost=2, late=0, duplicates=0, restarts=1)
    assert [n for n, _ in in_order] == numbers


def test_a_lone_frame_from_far_back_is_late_not_a_restart():
    stats, in_order = counted(_packets([5000, 5001, 17, 5002, 5003]))
    assert _counts(stats) == dict(received=5, lost=0, late=1, duplicates=0, restarts=0)
    assert [n for n, _ in in_order] == [5000, 5001, 5002, 5003]


def test_the_same_number_at_another_time_is_not_a_duplicate():
    """A sender restarted at a number the stream passed recently: its frames carry other times."""
    before = [Packet(n, n / FPS, n / FPS) for n in range(100, 140)]
    after = [Packet(n, (n - 120) / FPS, (n + 20) / FPS) for n in range(120, 160)]
    stats, in_order = counted(before + after)
    assert _counts(stats) == dict(received=80, lost=0, late=0, duplicates=0, restarts=1)
    assert [n for n, _ in in_order] == list(range(100, 140)) + list(range(120, 160))


def test_a_sender_restarted_on_the_numbers_and_times_just_passed_is_a_restart():
    """A sender that starts again from its first frame, a second later, sends the very numbers
    and timestamps the stream began with: they are not copies of those frames."""
    first = [Packet(n, n / FPS, n / FPS) for n in range(0, 200)]
    again = [Packet(n, n / FPS, 1.0 + n / FPS) for n in range(0, 300)]
    stats, in_order = counted(first + again)
    assert _counts(stats) == dict(received=500, lost=0, late=0, duplicates=0, restarts=1)
    assert [n for n, _ in in_order] == list(range(200)) + list(range(300))


def test_after_set_up_frames_skipped_are_not_lost_and_a_stale_copy_is_not_in_order():
    stats = LiveStats()
    counter = FrameCounter(stats)
    counter.fps = FPS
    assert counter.count(Packet(0, 0.0, 0.0))
    counter.pause()
    for n in range(400, 410):  # what the socket held through set-up
        counter.count(Packet(n, n / FPS, 1.0))
    counter.resume()
    # a copy of one of them, then frames after set-up, one skipped meanwhile and one from far
    # back among them
    later = [Packet(n, n / FPS, 1.01) for n in (405, 800, 790, 801, 300, 802)]
    in_order = [p.frame for packet in later for p, _ in counter.count(packet)]
    assert in_order == [800, 801, 802]
    assert stats.lost == 0 and stats.restarts == 0 and stats.duplicates == 1 and stats.late == 2


# ------------------------------------------------------------------------- properties


@st.composite
def streams(draw):
    """A sender's frames in 1-3 numberings (restarted between them) and how the network
    delivers them: some lost (one burst per numbering too), some late (up to
    :data:`MAX_DELAY` frames), some twice; numbers as NatNet (int32), QTM (uint32) or a file
    (plain) gives them, starting anywhere, near the wrap included.

    Returns (kind, loss, late, twice, burst, numberings), each numbering (its first number,
    how many frames, where its burst starts, a seed for the network)."""
    kind = draw(st.sampled_from(["int32", "uint32", "plain"]))
    top = {"int32": 2**31, "uint32": 2**32, "plain": 2**40}[kind]
    anywhere = st.integers(-(2**31) if kind == "int32" else 0, top - 1)
    start = draw(st.one_of(st.integers(top - 300, top - 1), anywhere))
    loss = draw(st.sampled_from([0.0, 0.02, 0.2]))
    late = draw(st.sampled_from([0.0, 0.05, 0.3]))
    twice = draw(st.sampled_from([0.0, 0.1, 1.0]))
    burst = draw(st.sampled_from([0, 40, 400]))
    numberings = []
    for e in range(draw(st.integers(1, 3))):
        if e:  # a clear renumbering: back below all the last numbering sent, or far ahead
            first, count, *_ = numberings[-1]
            jump = draw(st.integers(10**6, 2**29))
            start = first + count + burst + jump if draw(st.booleans()) else first - W - jump
        count = draw(st.integers(2, 300))
        burst_at = draw(st.integers(2, count + 1))
        numberings.append((start, count, burst_at, draw(st.integers(0, 2**32 - 1))))
    return kind, loss, late, twice, burst, numberings


def _deliver(scenario) -> tuple[list[Packet], list[tuple[int, int]]]:
    """The packets in arrival order, and each one's (numbering, true number)."""
    kind, loss, late, twice, burst, numberings = scenario
    arrivals = []
    clock = 0  # send time, in frames
    for e, (start, count, burst_at, seed) in enumerate(numberings):
        rng = random.Random(seed)
        sent = count + (burst if burst_at < count else 0)
        for k in range(sent):
            if burst_at <= k < burst_at + burst:
                continue
            if k >= 2 and rng.random() < loss:  # a numbering's first two always come first
                continue
            delay = rng.randint(1, MAX_DELAY) if k >= 2 and rng.random() < late else 0
            copies = [delay]
            if rng.random() < twice:
                copies.append(delay + rng.randint(1, MAX_DELAY))
            for d in copies:
                arrivals.append((clock + k + d, e, start + k, k))
        clock += sent + 2 * MAX_DELAY + 5  # all sent before a restart arrives before it
    arrivals.sort(key=lambda a: a[:2])
    packets = [Packet(_as_given(n, kind), k / FPS, t / FPS) for t, _, n, k in arrivals]
    return packets, [(e, n) for _, e, n, _ in arrivals]


def _expected(truth) -> tuple[dict, list[tuple[int, int]]]:
    """What docs/live.md says of each packet, from the true numbering of each: counts, and
    the (epoch, true number) of each frame in order."""
    counts = dict(received=len(truth), lost=0, late=0, duplicates=0, restarts=0)
    in_order = []
    by_epoch: dict[int, list[int]] = {}
    for e, n in truth:
        by_epoch.setdefault(e, []).append(n)
    counts["restarts"] = len(by_epoch) - 1
    for e, numbers in by_epoch.items():
        seen, top = set(), None
        for n in numbers:
            if n in seen:
                counts["duplicates"] += 1
            elif top is not None and n < top:
                counts["late"] += 1
            else:
                in_order.append((e, n))
                top = n
            seen.add(n)
        first = numbers[0]
        counts["lost"] += sum(1 for m in range(first + 1, top) if m not in seen)
    return counts, in_order


@settings(max_examples=300, deadline=None)
@given(scenario=streams())
def test_counters_mean_what_the_docs_say_under_loss_reordering_duplicates_restarts_and_wrap(
    scenario,
):
    packets, truth = _deliver(scenario)
    stats, in_order = counted(packets)
    counts, expected = _expected(truth)
    assert _counts(stats) == counts
    kind = scenario[0]
    assert [n for n, _ in in_order] == [_as_given(n, kind) for _, n in expected]
    # unwrapped numbers step as the true ones within a numbering, whatever the wrap
    for (given_number, unwrapped), (e, n), (e0, n0) in zip(
        in_order[1:], expected[1:], expected[:-1], strict=True
    ):
        assert (unwrapped - given_number) % 2**32 == 0
        if e == e0:
            previous = in_order[expected.index((e0, n0))][1]
            assert unwrapped - previous == n - n0


def test_number_step_is_the_signed_32_bit_difference():
    assert number_step(2**31 - 1, -(2**31)) == 1
    assert number_step(2**32 - 1, 0) == 1
    assert number_step(10, 3) == -7
    assert number_step(0, 2**31 - 1) == 2**31 - 1
