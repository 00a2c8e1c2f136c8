"""Gait: walking and running cycles, curved walks and turning on the spot.

Joint angle curves follow the shape of normal sagittal-plane gait data (hip, knee, ankle, toe
against the gait-cycle phase, 0 = this foot's heel strike), built from periodic bumps so any speed
and cadence stays smooth. Forward progress is not prescribed: the feet are planted by
:func:`ground_and_plant`, so the body travels exactly as far as its legs carry it.
"""

from __future__ import annotations

import numpy as np

from rbmcap.motion.procedural.base import SIDES, Built, PoseTrack, bump, envelope, smooth_noise


def _legs_walk(track: PoseTrack, phase: np.ndarray, amp: np.ndarray, stride: float) -> None:
    for side, shift in zip(SIDES, (0.0, 0.5), strict=True):
        p = (phase + shift) % 1.0
        hip = 10 + 20 * stride * np.cos(2 * np.pi * (p - 0.92))
        knee = 5 + 14 * stride * bump(p, 0.13, 10) + 52 * bump(p, 0.71, 4.5)
        ankle = -6 * bump(p, 0.04, 25) + 9 * bump(p, 0.42, 6) - 16 * stride * bump(p, 0.62, 14)
        ankle = ankle + 4 * bump(p, 0.82, 6)
        track.hip(side, flexion=amp * hip, abduction=1.5, rotation=4)
        track.knee(side, amp * knee + 3)
        track.ankle(side, dorsiflexion=amp * ankle)
        track.toes(side, amp * 22 * stride * bump(p, 0.56, 14))


def _arms_swing(
    track: PoseTrack, phase: np.ndarray, amp: np.ndarray, swing: float, elbow: float
) -> None:
    for side, shift in zip(SIDES, (0.0, 0.5), strict=True):
        p = (phase + shift) % 1.0
        forward = -swing * np.cos(2 * np.pi * (p - 0.05))  # opposite to the same-side leg
        track.shoulder(side, lowered=78.0, forward=amp * forward + 4)
        track.elbow(side, elbow + amp * 0.4 * swing * (1 + np.sin(2 * np.pi * (p - 0.3))))


def walk(rng: np.random.Generator, fps: float, kin, turn_rate: float = 0.0) -> Built:
    """Start from standing, walk, stop. ``turn_rate`` (deg/s) curves the path."""
    duration = rng.uniform(5.0, 9.0)
    cadence = rng.uniform(0.82, 1.05)  # strides per second
    stride = rng.uniform(0.75, 1.25)
    t = np.arange(int(round(duration * fps))) / fps
    amp = envelope(t, duration, 1.0)
    phase = np.cumsum(np.full_like(t, cadence / fps)) + rng.uniform(0, 1)
    track = PoseTrack(len(t))
    _legs_walk(track, phase, amp, stride)
    _arms_swing(track, phase, amp, swing=rng.uniform(8, 20) * stride, elbow=rng.uniform(10, 25))
    p = phase % 1.0
    track.spine(flexion=3 + amp * 2 * bump(p, 0.1, 3), twist=amp * 4 * np.cos(2 * np.pi * p))
    track.neck(flexion=rng.uniform(-5, 8) + smooth_noise(rng, t, 3, 2), twist=smooth_noise(rng, t, 8, 4))
    heading = rng.uniform(0, 360) + np.cumsum(turn_rate * amp / fps)
    lean = -0.25 * turn_rate * amp * stride  # lean into the curve
    track.root(heading, pitch=4 + 2 * amp, roll=lean, twist=-amp * 5 * np.cos(2 * np.pi * p))
    params = {"duration_s": duration, "cadence_hz": cadence, "stride_scale": stride}
    if turn_rate:
        params["turn_rate_deg_s"] = turn_rate
    return Built(track, None, params)


def walk_turn(rng: np.random.Generator, fps: float, kin) -> Built:
    """Walk along a curve, turning left or right at 15-40 degrees a second."""
    rate = rng.choice([-1.0, 1.0]) * rng.uniform(15, 40)
    return walk(rng, fps, kin, turn_rate=float(rate))


def run(rng: np.random.Generator, fps: float, kin) -> Built:
    """Jog to run from standing and back, with flight phases between foot contacts."""
    duration = rng.uniform(4.0, 7.0)
    cadence = rng.uniform(1.3, 1.5)
    stride = rng.uniform(0.8, 1.2)
    hop = rng.uniform(0.03, 0.07)
    t = np.arange(int(round(duration * fps))) / fps
    amp = envelope(t, duration, 1.2)
    phase = np.cumsum(np.full_like(t, cadence / fps)) + rng.uniform(0, 1)
    track = PoseTrack(len(t))
    for side, shift in zip(SIDES, (0.0, 0.5), strict=True):
        p = (phase + shift) % 1.0
        hip = 17 + 28 * stride * np.cos(2 * np.pi * (p - 0.88))
        knee = 20 + 22 * bump(p, 0.15, 10) + 80 * stride * bump(p, 0.66, 4)
        ankle = 8 + 12 * bump(p, 0.15, 10) - 28 * bump(p, 0.38, 12)
        track.hip(side, flexion=amp * hip, abduction=1.5, rotation=3)
        track.knee(side, amp * knee + 3)
        track.ankle(side, dorsiflexion=amp * ankle)
        track.toes(side, amp * 25 * bump(p, 0.33, 14))
    _arms_swing(track, phase, amp, swing=rng.uniform(20, 32), elbow=15 + amp * 65)
    p = phase % 1.0
    track.spine(flexion=3 + amp * 6, twist=amp * 7 * np.cos(2 * np.pi * p))
    track.neck(flexion=-amp * 5 + smooth_noise(rng, t, 2, 2))
    track.root(rng.uniform(0, 360), pitch=4 + 6 * amp, twist=-amp * 8 * np.cos(2 * np.pi * p))
    # Flight between one foot's take-off (phase 0.35 of its cycle) and the other's strike (0.5).
    u = (p % 0.5 - 0.35) / 0.15
    flight = np.where((u > 0) & (u < 1), hop * np.sin(np.pi * np.clip(u, 0, 1)), 0.0)
    flight *= amp > 0.5
    params = {"duration_s": duration, "cadence_hz": cadence, "stride_scale": stride, "hop_m": hop}
    return Built(track, flight, params)


def turn_in_place(rng: np.random.Generator, fps: float, kin) -> Built:
    """Step on the spot while turning 90-200 degrees, then stand."""
    duration = rng.uniform(3.5, 6.0)
    total = rng.choice([-1.0, 1.0]) * rng.uniform(90, 200)
    cadence = rng.uniform(0.9, 1.2)
    t = np.arange(int(round(duration * fps))) / fps
    amp = envelope(t, duration, 0.6)
    phase = np.cumsum(np.full_like(t, cadence / fps))
    track = PoseTrack(len(t))
    for side, shift in zip(SIDES, (0.0, 0.5), strict=True):
        lift = amp * bump((phase + shift) % 1.0, 0.75, 5)
        track.hip(side, flexion=28 * lift, abduction=2, rotation=4)
        track.knee(side, 3 + 50 * lift)
        track.ankle(side, dorsiflexion=-10 * lift + 8 * lift**2)
    _arms_swing(track, phase, amp, swing=6, elbow=18)
    track.spine(flexion=3, twist=amp * 6 * np.sign(total))
    track.neck(twist=amp * 12 * np.sign(total))
    heading = rng.uniform(0, 360) + total * np.cumsum(amp) / max(np.sum(amp), 1e-9)
    track.root(heading, pitch=4)
    return Built(track, None, {"duration_s": duration, "turn_deg": total, "cadence_hz": cadence})
