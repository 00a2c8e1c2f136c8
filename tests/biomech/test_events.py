"""Gait events from kinematics: on procedural walks whose footsteps are known, on Vicon's own
markers of a real walk against the events Vicon marked, and where there is no walking."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers.shared import PIG

from rbmcap.biomech.event_match import match_events
from rbmcap.biomech.events import GaitEvent, detect_events_from_points, detect_gait_events
from rbmcap.io.c3d import read_c3d
from rbmcap.io.gait.events import read_c3d_events
from rbmcap.motion import SMPLMotion
from rbmcap.motion.procedural import generate

FPS = 100.0
WALK = PIG / "PiG_Motion-FlatFoot-One.c3d"


def footsteps(params: dict) -> list[GaitEvent]:
    """The procedural gait's own contacts: the right foot lifts first at ``lead``, then a lift
    every half stride, each foot striking ``swing`` seconds after it lifts (as
    ``rbmcap.motion.procedural.gait`` plans its steps)."""
    period = 1.0 / params["cadence"]
    swing = (1.0 - params["duty"]) * period
    lift, side, out = params["lead"], "Right", []
    while lift + swing <= params["duration"] - 0.5:
        out += [
            GaitEvent(side, "Foot Off", -1, lift),
            GaitEvent(side, "Foot Strike", -1, lift + swing),
        ]
        lift += 0.5 * period
        side = "Left" if side == "Right" else "Right"
    return out


@pytest.fixture(scope="module")
def walk(standin):
    motion = generate("walk", seed=3, fps=FPS, body=standin)
    return motion, footsteps(motion.source["params"]), detect_gait_events(motion, standin)


def at_full_speed(events: list[GaitEvent], params: dict) -> list[GaitEvent]:
    """Events of the steady walk, not of starting from standing or stopping."""
    start = params["lead"] + params["ramp"] if "ramp" in params else params["lead"] + 1.0
    return [e for e in events if start <= e.time <= params["duration"] - 1.5]


def test_foot_strikes_land_on_the_procedural_walks_heel_strikes(walk):
    motion, truth, detected = walk
    strikes = [e for e in truth if e.kind == "Foot Strike"]
    matches = match_events(detected, at_full_speed(strikes, motion.source["params"]))
    assert len([m for m in matches if m.reference]) >= 6
    for m in matches:
        if m.reference is not None:
            assert m.detected is not None, m.reference
            assert abs(m.difference_ms) <= 20.0, m


def test_foot_offs_follow_the_procedural_walks_lift_offs(walk):
    """The generator lifts the toe at rest and eases it forward, so the toe is furthest behind
    the pelvis (Zeni's foot off) a few frames after the lift, never before it."""
    motion, truth, detected = walk
    offs = [e for e in truth if e.kind == "Foot Off"]
    matches = match_events(detected, at_full_speed(offs, motion.source["params"]))
    assert len([m for m in matches if m.reference]) >= 6
    for m in matches:
        if m.reference is not None:
            assert m.detected is not None, m.reference
            assert -10.0 <= m.difference_ms <= 100.0, m


def test_steady_walking_alternates_strikes_and_offs_on_each_foot(walk):
    motion, _, detected = walk
    for side in ("Left", "Right"):
        kinds = [e.kind for e in at_full_speed(detected, motion.source["params"]) if e.side == side]
        assert len(kinds) >= 4
        assert all(a != b for a, b in itertools.pairwise(kinds)), kinds


def test_a_body_standing_still_has_no_events(standin):
    motion = SMPLMotion(poses=np.zeros((120, 24, 3)), trans=np.zeros((120, 3)), fps=FPS)
    motion.poses[:, 0] = [np.pi / 2, 0.0, 0.0]  # upright, Z up
    assert detect_gait_events(motion, standin) == []


def vicon_feet(path):
    c = read_c3d(path)
    point = {n: c.points[:, i] for i, n in enumerate(c.point_names)}
    heel = np.stack([point["LHEE"], point["RHEE"]], 1)
    toe = np.stack([point["LTOE"], point["RTOE"]], 1)
    pelvis = np.mean([point[n] for n in ("LASI", "RASI", "LPSI", "RPSI")], axis=0)
    return heel, toe, pelvis, c.fps


def rotate_z(x: np.ndarray, degrees: float) -> np.ndarray:
    a = np.radians(degrees)
    rot = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
    return x @ rot.T


@pytest.mark.skipif(
    not WALK.is_file(), reason="the Plug-in Gait walk (../shared/data/pig) is absent"
)
def test_vicon_markers_of_the_real_walk_give_vicons_events_within_20_ms():
    reference = read_c3d_events(WALK)
    matches = match_events(detect_events_from_points(*vicon_feet(WALK)), reference)
    found = [m for m in matches if m.reference is not None]
    assert len(found) == len(reference) == 8
    for m in found:
        assert m.detected is not None and abs(m.difference_ms) <= 20.0 + 1e-6, m


@pytest.mark.skipif(
    not WALK.is_file(), reason="the Plug-in Gait walk (../shared/data/pig) is absent"
)
@pytest.mark.parametrize("degrees", [90.0, 217.0])
def test_the_walking_direction_comes_from_the_data(degrees):
    heel, toe, pelvis, fps = vicon_feet(WALK)
    turned = [rotate_z(x, degrees) for x in (heel, toe, pelvis)]
    assert detect_events_from_points(*turned, fps) == detect_events_from_points(
        heel, toe, pelvis, fps
    )
