"""Motions done on the spot: squats, arm raises, reaches, jumping jacks, bends and kicks.

Each is a few repetitions with random timing, depth and side; the feet stay planted (and leave
the floor only in jumping jacks), see :func:`ground_and_plant`.
"""

from __future__ import annotations

import numpy as np

from rbmcap.motion.procedural.base import (
    SIDES,
    Built,
    PoseTrack,
    ease,
    repetitions,
    smooth_noise,
)


def _timeline(
    rng: np.random.Generator, fps: float, reps: int, rise, hold, fall, rest
) -> tuple[np.ndarray, list[float], list[tuple[float, float, float]]]:
    """Frame times and repetition start times; each timing argument is a (low, high) range."""
    starts, timings, clock = [], [], rng.uniform(0.4, 0.8)
    for _ in range(reps):
        r, h, f = rng.uniform(*rise), rng.uniform(*hold), rng.uniform(*fall)
        starts.append(clock)
        timings.append((r, h, f))
        clock += r + h + f + rng.uniform(*rest)
    t = np.arange(round((clock + 0.3) * fps)) / fps
    return t, starts, timings


def _pulses(t: np.ndarray, starts, timings) -> list[np.ndarray]:
    return [repetitions(t, [s], *tm) for s, tm in zip(starts, timings, strict=True)]


def _stance(track: PoseTrack, abduction=4.0, turn_out=8.0, knee=3.0) -> None:
    """Feet flat and slightly apart: hip abduction balanced at the ankle."""
    for side in SIDES:
        track.hip(side, abduction=abduction, rotation=turn_out)
        track.knee(side, knee)
        track.ankle(side, eversion=-abduction)


def squat(rng: np.random.Generator, fps: float, kin) -> Built:
    """Squat down and stand up 2-5 times (thigh, shank and trunk angles from a depth)."""
    reps = int(rng.integers(2, 6))
    t, starts, timings = _timeline(rng, fps, reps, (0.9, 1.5), (0.0, 0.6), (0.9, 1.4), (0.3, 0.9))
    depths = rng.uniform(0.45, 1.0, reps)
    d = sum(p * dep for p, dep in zip(_pulses(t, starts, timings), depths, strict=True))
    thigh, shank, trunk = 90 * d, 28 * d, 25 * d
    track = PoseTrack(len(t))
    abd, turn_out = rng.uniform(6, 14), rng.uniform(8, 20)
    for side in SIDES:
        track.hip(side, flexion=thigh + trunk, abduction=abd, rotation=turn_out)
        track.knee(side, thigh + shank + 2)
        track.ankle(side, dorsiflexion=shank, eversion=-abd)
    arms_forward = rng.uniform(0.0, 1.0) < 0.6
    for side in SIDES:
        if arms_forward:
            track.shoulder(side, lowered=82, forward=5 + 80 * d)
            track.elbow(side, 10 + 20 * d)
        else:  # hands on the hips
            track.shoulder(side, lowered=55, forward=-10)
            track.elbow(side, 95)
    track.spine(flexion=2 + 12 * d)
    track.neck(flexion=-10 * d)
    track.root(rng.uniform(0, 360), pitch=4 + trunk)
    return Built(track, None, {"repetitions": reps, "depths": depths, "arms_forward": arms_forward})


def arm_raise(rng: np.random.Generator, fps: float, kin) -> Built:
    """Raise the arms sideways, to the front or one at a time, 2-4 times."""
    reps = int(rng.integers(2, 5))
    t, starts, timings = _timeline(rng, fps, reps, (0.8, 1.4), (0.1, 0.8), (0.8, 1.4), (0.2, 0.8))
    styles = rng.choice(["lateral", "frontal", "single"], size=reps)
    track = PoseTrack(len(t))
    _stance(track)
    lowered = {s: np.full(len(t), 80.0) for s in SIDES}
    forward = {s: np.full(len(t), 4.0) for s in SIDES}
    collar = {s: np.zeros(len(t)) for s in SIDES}
    for pulse, style in zip(_pulses(t, starts, timings), styles, strict=True):
        top = rng.uniform(0.7, 1.0)
        if style == "lateral":
            for s in SIDES:
                lowered[s] -= 150 * top * pulse
                collar[s] += 15 * top * pulse
        elif style == "frontal":
            for s in SIDES:
                forward[s] += 150 * top * pulse
                lowered[s] += 6 * pulse
        else:
            s = SIDES[int(rng.integers(2))]
            forward[s] += 140 * top * pulse
    for s in SIDES:
        track.shoulder(s, lowered=lowered[s], forward=forward[s], collar=collar[s])
        track.elbow(s, 8 + smooth_noise(rng, t, 3, 3))
    track.spine(flexion=2 + smooth_noise(rng, t, 2, 3))
    track.neck(flexion=smooth_noise(rng, t, 4, 3))
    track.root(rng.uniform(0, 360), pitch=5)
    return Built(track, None, {"repetitions": reps, "styles": styles.tolist()})


_REACH = {
    # target: shoulder forward, lowered, elbow, trunk flexion, trunk twist toward the arm, side bend
    "forward": (85, 84, 15, 15, 10, 0),
    "up": (155, 80, 8, -5, 0, 0),
    "side": (0, 5, 10, 5, 0, 20),
    "across": (80, 86, 25, 10, -30, 0),
    "down": (60, 86, 10, 40, 5, 0),
}


def reach(rng: np.random.Generator, fps: float, kin) -> Built:
    """Reach forward, up, sideways, across the body or down, 2-4 times with either hand."""
    reps = int(rng.integers(2, 5))
    t, starts, timings = _timeline(rng, fps, reps, (0.7, 1.2), (0.3, 0.9), (0.7, 1.2), (0.2, 0.7))
    targets = rng.choice(list(_REACH), size=reps)
    sides = rng.choice(SIDES, size=reps)
    track = PoseTrack(len(t))
    _stance(track)
    n = len(t)
    arm = {
        s: {"forward": np.full(n, 4.0), "lowered": np.full(n, 78.0), "elbow": np.full(n, 15.0)}
        for s in SIDES
    }
    flex, twist, bend = np.zeros(n), np.zeros(n), np.zeros(n)
    for pulse, target, side in zip(_pulses(t, starts, timings), targets, sides, strict=True):
        fwd, low, elb, tflex, ttwist, tbend = _REACH[target]
        k = rng.uniform(0.8, 1.0) * pulse
        sign = 1.0 if side == "left" else -1.0
        a = arm[side]
        a["forward"] += k * (fwd - 4)
        a["lowered"] += k * (low - 78)
        a["elbow"] += k * (elb - 15)
        flex += k * tflex
        twist += -sign * k * ttwist  # turning the chest towards the reaching side
        bend += sign * k * tbend
    for s in SIDES:
        track.shoulder(s, forward=arm[s]["forward"], lowered=arm[s]["lowered"])
        track.elbow(s, arm[s]["elbow"])
    track.spine(flexion=2 + 0.7 * flex, twist=twist, side_bend=bend)
    track.neck(flexion=0.3 * flex, twist=0.5 * twist)
    track.root(rng.uniform(0, 360), pitch=4 + 0.3 * flex)
    for s in SIDES:
        track.hip(s, flexion=0.3 * flex)
    return Built(track, None, {"targets": targets.tolist(), "sides": sides.tolist()})


def jumping_jack(rng: np.random.Generator, fps: float, kin) -> Built:
    """4-8 jumping jacks: hop the feet apart while the arms swing overhead, and back."""
    reps = int(rng.integers(4, 9))
    period = rng.uniform(0.9, 1.3)
    hop = rng.uniform(0.04, 0.09)
    spread = rng.uniform(10, 16)
    lead = rng.uniform(0.5, 1.0)
    duration = lead + reps * period + 0.8
    t = np.arange(round(duration * fps)) / fps
    phase = np.clip((t - lead) / period, 0, reps)
    c = phase % 1.0
    active = (phase > 0) & (phase < reps)
    opened = np.where(active, ease((c - 0.12) / 0.2) * ease((0.82 - c) / 0.2), 0.0)
    jump = np.where(active, np.sin(np.pi * np.clip((c % 0.5 - 0.1) / 0.24, 0, 1)), 0.0)
    flight = hop * jump
    landing = np.where(active, np.exp(-(((c % 0.5) - 0.37) ** 2) / 0.004), 0.0)
    track = PoseTrack(len(t))
    for side in SIDES:
        track.hip(side, flexion=8 * landing, abduction=2 + spread * opened, rotation=6)
        track.knee(side, 4 + 22 * landing + 6 * jump)
        track.ankle(side, dorsiflexion=10 * landing - 25 * jump, eversion=-(2 + spread * opened))
        track.shoulder(side, lowered=80 - 155 * opened, forward=4, collar=20 * opened)
        track.elbow(side, 12 + 10 * (1 - opened))
    track.spine(flexion=3 + 4 * landing)
    track.root(rng.uniform(0, 360), pitch=4 + 4 * landing)
    return Built(track, flight, {"repetitions": reps, "period_s": period, "hop_m": hop})


def bend(rng: np.random.Generator, fps: float, kin) -> Built:
    """Bend forward from the hips towards the toes, or sideways, 2-4 times."""
    reps = int(rng.integers(2, 5))
    t, starts, timings = _timeline(rng, fps, reps, (1.0, 1.8), (0.2, 1.0), (1.0, 1.8), (0.3, 0.8))
    kinds = rng.choice(["forward", "forward", "left", "right"], size=reps)
    n = len(t)
    pitch, spine_flex, side_bend = np.zeros(n), np.zeros(n), np.zeros(n)
    for pulse, kind in zip(_pulses(t, starts, timings), kinds, strict=True):
        depth = rng.uniform(0.6, 1.0)
        if kind == "forward":
            pitch += 65 * depth * pulse
            spine_flex += 45 * depth * pulse
        else:
            side_bend += (1 if kind == "left" else -1) * 35 * depth * pulse
    track = PoseTrack(len(t))
    for side in SIDES:
        track.hip(side, flexion=pitch, abduction=4, rotation=6)
        track.knee(side, 3 + 0.12 * pitch)
        track.ankle(side, eversion=-4)
    trunk = pitch + spine_flex  # arms hang straight down from a bent trunk
    for side in SIDES:
        m = 1 if side == "left" else -1
        track.shoulder(side, lowered=80 - 0.9 * m * side_bend, forward=4 + 0.9 * trunk)
        track.elbow(side, 10 + 0.1 * trunk)
    track.spine(flexion=2 + spine_flex, side_bend=side_bend)
    track.neck(flexion=0.25 * spine_flex - 5)
    track.root(rng.uniform(0, 360), pitch=4 + pitch)
    return Built(track, None, {"repetitions": reps, "kinds": kinds.tolist()})


def kick(rng: np.random.Generator, fps: float, kin) -> Built:
    """2-4 front kicks: chamber the knee, snap the leg out, pull it back, put it down."""
    reps = int(rng.integers(2, 5))
    chamber, snap = rng.uniform(0.3, 0.45), rng.uniform(0.15, 0.25)
    t, starts, timings = _timeline(
        rng, fps, reps, (chamber, chamber), (snap * 2, snap * 3), (0.35, 0.5), (0.4, 1.0)
    )
    sides = rng.choice(SIDES, size=reps)
    n = len(t)
    lift = {s: np.zeros(n) for s in SIDES}
    extend = {s: np.zeros(n) for s in SIDES}
    for start, (r, h, f), side in zip(starts, timings, sides, strict=True):
        lift[side] += repetitions(t, [start], r, h, f)
        extend[side] += repetitions(t, [start + r], h * 0.4, h * 0.2, h * 0.4)
    height = rng.uniform(60, 90)
    track = PoseTrack(len(t))
    for side in SIDES:
        other = lift["right" if side == "left" else "left"]
        track.hip(side, flexion=height * lift[side], abduction=3, rotation=5)
        track.knee(side, 4 + 95 * lift[side] * (1 - extend[side]) + 10 * other)
        track.ankle(side, dorsiflexion=-25 * lift[side] + 5 * other)
        track.shoulder(side, lowered=70, forward=35, twist=0)
        track.elbow(side, 100)
    total = lift["left"] + lift["right"]
    track.spine(flexion=2 - 10 * total)
    track.neck(flexion=5 * total)
    track.root(rng.uniform(0, 360), pitch=4 - 6 * total)
    return Built(track, None, {"repetitions": reps, "sides": sides.tolist(), "height_deg": height})
