"""Gait: walking and running, curved walks and turning on the spot, from footsteps and leg IK.

A gait here is planned the way the feet see it, so stance feet cannot slide:

1. a pelvis path on the floor (speed easing in from standing and out to a stop, heading turning
   at a constant rate) and a step schedule (alternating lift-off / strike times, the duty factor
   deciding how long each foot stays down: > 0.5 walks with double support, < 0.5 runs with
   flight);
2. a footprint per step, under the hip at the middle of that foot's stance;
3. each foot rolls over its footprint (heel rock after strike, flat, toe rock before lift-off)
   and swings between footprints along a smooth arc;
4. the pelvis rides as high as both legs reach (a vaulting gait; a hop in flight for running);
5. two-bone leg IK (knee pointing along the foot) gives hip, knee and ankle rotations; arms and
   trunk swing against the legs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import roma
import torch
from scipy.ndimage import gaussian_filter1d

from rbmcap.geometry.rotations import axis_rotmat
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.motion.procedural.base import SIDES, Built, J, PoseTrack, ease, smooth_noise

_UPRIGHT = roma.rotvec_to_rotmat(torch.tensor([np.pi / 2, 0.0, 0.0], dtype=torch.float64))


@dataclass
class GaitParams:
    """One gait's parameters (lengths in metres, angles in degrees, times in seconds)."""

    duration: float
    cadence: float  # strides (two steps) per second
    stride: float  # stride length at full speed
    duty: float  # fraction of a stride each foot is down
    width: float = 0.16  # lateral distance between the footprints' centres
    clearance: float = 0.07  # extra lift of the ankle mid-swing
    heel_strike: float = 15.0  # toes-up pitch at heel strike (full speed)
    toe_off: float = 25.0  # heel-up pitch at lift-off (full speed)
    toe_out: float = 6.0
    hop: float = 0.0  # pelvis rise in flight (running)
    dip: float = 0.0  # pelvis drop at mid-stance (running)
    turn_rate: float = 0.0  # deg/s once at speed
    turn_total: float = 0.0  # deg, for turning on the spot (spread over the stepping)
    ramp: float = 1.0  # speed eases in and out over this long
    lead: float = 0.5  # standing still before the first step
    arm_swing: float = 15.0
    elbow: float = 15.0
    trunk_lean: float = 3.0

    @property
    def period(self) -> float:
        """Seconds per stride."""
        return 1.0 / self.cadence

    @property
    def swing_time(self) -> float:
        """Seconds each foot is in the air per stride."""
        return (1.0 - self.duty) * self.period

    @property
    def stop(self) -> float:
        """No step strikes after this time (s): the motion ends standing."""
        return self.duration - 0.5


def walk(rng: np.random.Generator, fps: float, kin: MotionKinematics) -> Built:
    """Start from standing, walk 0.9-1.6 m/s, stop."""
    p = GaitParams(
        duration=rng.uniform(5.0, 9.0),
        cadence=rng.uniform(0.85, 1.05),
        stride=rng.uniform(1.05, 1.5),
        duty=rng.uniform(0.6, 0.64),
        width=rng.uniform(0.13, 0.2),
        clearance=rng.uniform(0.05, 0.08),
        arm_swing=rng.uniform(10, 22),
        elbow=rng.uniform(10, 25),
        trunk_lean=rng.uniform(1, 5),
    )
    return _gait(rng, fps, kin, p)


def walk_turn(rng: np.random.Generator, fps: float, kin: MotionKinematics) -> Built:
    """Walk along a curve, turning left or right at 15-45 degrees a second."""
    p = GaitParams(
        duration=rng.uniform(5.0, 9.0),
        cadence=rng.uniform(0.85, 1.0),
        stride=rng.uniform(0.95, 1.35),
        duty=rng.uniform(0.6, 0.64),
        width=rng.uniform(0.14, 0.2),
        turn_rate=float(rng.choice([-1.0, 1.0]) * rng.uniform(15, 45)),
        arm_swing=rng.uniform(10, 20),
        elbow=rng.uniform(10, 25),
    )
    return _gait(rng, fps, kin, p)


def run(rng: np.random.Generator, fps: float, kin: MotionKinematics) -> Built:
    """Jog to run (2.3-3.6 m/s) from standing and back, with flight between foot contacts."""
    p = GaitParams(
        duration=rng.uniform(4.5, 7.0),
        cadence=rng.uniform(1.35, 1.5),
        stride=rng.uniform(1.7, 2.4),
        duty=rng.uniform(0.36, 0.42),
        width=rng.uniform(0.08, 0.14),
        clearance=rng.uniform(0.12, 0.18),
        heel_strike=8.0,
        toe_off=30.0,
        hop=rng.uniform(0.03, 0.06),
        dip=rng.uniform(0.04, 0.07),
        ramp=1.3,
        arm_swing=rng.uniform(22, 32),
        elbow=rng.uniform(75, 95),
        trunk_lean=rng.uniform(6, 10),
    )
    return _gait(rng, fps, kin, p)


def turn_in_place(rng: np.random.Generator, fps: float, kin: MotionKinematics) -> Built:
    """Step on the spot while turning 90-200 degrees."""
    p = GaitParams(
        duration=rng.uniform(3.5, 6.0),
        cadence=rng.uniform(0.9, 1.15),
        stride=0.0,
        duty=rng.uniform(0.6, 0.66),
        width=rng.uniform(0.16, 0.22),
        clearance=rng.uniform(0.04, 0.07),
        turn_total=float(rng.choice([-1.0, 1.0]) * rng.uniform(90, 200)),
        ramp=0.6,
        arm_swing=5.0,
        elbow=18.0,
    )
    return _gait(rng, fps, kin, p)


# ------------------------------------------------------------------------------ planning
@dataclass
class _Step:
    foot: int  # 0 left, 1 right
    lift: float  # lift-off time (-inf: planted from the start)
    strike: float  # strike time
    heel: np.ndarray  # (2,) heel pivot on the floor after the strike
    yaw: float  # foot heading after the strike, radians


class _Route(NamedTuple):
    """The pelvis's way over the floor, per frame."""

    gait_on: np.ndarray  # (T,) 0 standing … 1 at full speed
    speed: np.ndarray  # (T,) m/s
    start_heading: float  # radians, before the first frame's turn
    heading: np.ndarray  # (T,) radians; 0 faces -Y
    path: np.ndarray  # (T, 2) pelvis on the floor, from (0, 0)


def _gait(rng: np.random.Generator, fps: float, kin: MotionKinematics, p: GaitParams) -> Built:
    t = np.arange(round(p.duration * fps)) / fps
    n = len(t)
    route = _plan_route(rng, t, fps, p)
    geometry = _FootGeometry(kin, p.toe_out)
    steps = _plan_steps(geometry, t, route, p)
    ratio = np.clip(route.speed / max(p.stride * p.cadence, 1e-9), 0.0, 1.0)
    ankles, foot_rot, toe_ext, in_stance = geometry.trajectories(t, steps, p, ratio)
    # Gait phase, 0 at each left heel strike (the left foot first strikes 1.5 - duty strides
    # after the right foot's first lift-off).
    phase = (t - p.lead) * p.cadence - (1.5 - p.duty)
    root_rot = _pelvis_rotation(route.heading, phase, route.gait_on, p)
    pelvis = _pelvis_position(geometry, route, phase, in_stance, root_rot, ankles, p, fps)
    track = PoseTrack(n)
    track.rot[:, J["pelvis"]] = root_rot
    geometry.solve_legs(track, pelvis, root_rot, ankles, foot_rot, toe_ext)
    _upper_body(track, rng, t, phase, route.gait_on, p)
    trans = pelvis - kin.rest_joints[0]
    params = {k: v for k, v in vars(p).items() if v}
    params["steps"] = len(steps) - 2
    return Built(track, None, params, trans=trans, stance=in_stance)


def _plan_route(rng: np.random.Generator, t: np.ndarray, fps: float, p: GaitParams) -> _Route:
    """Speed easing in after the first lift-off and out before the last strike, the heading
    turning with it from a random start, and the path they trace."""
    start, period, swing_time = p.lead, p.period, p.swing_time
    last_strike = start + np.floor((p.stop - swing_time - start) / (0.5 * period)) * 0.5 * period
    last_strike += swing_time
    gait_on = ease((t - start) / p.ramp) * ease((last_strike - 0.2 * period - t) / p.ramp)
    speed = p.stride * p.cadence * gait_on
    turn_rate = np.radians(p.turn_rate) * gait_on
    if p.turn_total:
        turn_rate = turn_rate + np.radians(p.turn_total) * gait_on / max(gait_on.sum() / fps, 1e-9)
    heading0 = rng.uniform(0, 2 * np.pi)
    heading = heading0 + np.cumsum(turn_rate) / fps
    forward = np.stack([np.sin(heading), -np.cos(heading)], -1)  # heading 0 faces -Y
    path = np.cumsum(speed[:, None] * forward, axis=0) / fps
    path -= path[0]
    return _Route(gait_on, speed, heading0, heading, path)


def _plan_steps(
    geometry: _FootGeometry, t: np.ndarray, route: _Route, p: GaitParams
) -> list[_Step]:
    """Both feet planted at the start, then alternating steps, the right foot first, every half
    stride from ``p.lead`` until a strike would come after ``p.stop``."""

    def at(x: np.ndarray, time: float) -> np.ndarray:
        return np.array([np.interp(time, t, x[:, c]) for c in range(x.shape[1])])

    path, heading = route.path, route.heading
    steps: list[_Step] = []
    for f in (0, 1):
        footprint = geometry.footprint(f, path[0], route.start_heading, p.width)
        steps.append(_Step(f, -np.inf, -np.inf, *footprint))
    lift = p.lead
    foot = 1
    while lift + p.swing_time <= p.stop:
        strike = lift + p.swing_time
        mid = strike + 0.5 * p.duty * p.period
        yaw = float(np.interp(mid, t, heading))
        steps.append(
            _Step(foot, lift, strike, *geometry.footprint(foot, at(path, mid), yaw, p.width))
        )
        lift += 0.5 * p.period
        foot = 1 - foot
    return steps


def _pelvis_position(geometry, route: _Route, phase, in_stance, root_rot, ankles, p, fps):
    """(T, 3) pelvis: over the path, swaying towards the stance foot, hopping in flight and
    dipping at mid-stance (running), no higher than both legs reach."""
    gait_on, heading = route.gait_on, route.heading
    sway = 0.02 * gait_on * np.cos(2 * np.pi * (phase - 0.3))  # over the stance foot
    left = np.stack([np.cos(heading), np.sin(heading)], -1)
    pelvis = np.zeros((len(phase), 3))
    pelvis[:, :2] = route.path + sway[:, None] * left
    stance_any = in_stance.any(1)
    flight = np.where(stance_any, 0.0, 1.0)
    flight = gaussian_filter1d(flight, max(1.0, 0.03 * fps))
    single = in_stance.sum(1) == 1
    mid_stance = gaussian_filter1d(single.astype(float), max(1.0, 0.04 * fps)) * gait_on
    pelvis[:, 2] = geometry.stand_height * 0.995 + p.hop * flight - p.dip * mid_stance
    pelvis[:, 2] = geometry.reachable_height(pelvis, root_rot, ankles)
    pelvis[:, 2] = gaussian_filter1d(pelvis[:, 2], max(1.0, 0.02 * fps), mode="nearest")
    pelvis[:, 2] = geometry.reachable_height(pelvis, root_rot, ankles)
    return pelvis


def _pelvis_rotation(heading, phase, gait_on, p: GaitParams) -> torch.Tensor:
    """(T, 3, 3) world pelvis orientation: heading, forward tilt, rotation with the steps."""
    twist = -np.radians(5.0 if p.duty > 0.5 else 8.0) * gait_on * np.cos(2 * np.pi * phase)
    drop = np.radians(3.0) * gait_on * np.sin(4 * np.pi * phase)  # hip drop on the swing side
    tilt = np.radians(4.0 + (p.trunk_lean - 3.0) * 0.5 * gait_on)
    canon = (
        axis_rotmat("y", torch.from_numpy(twist))
        @ axis_rotmat("x", torch.from_numpy(np.broadcast_to(tilt, phase.shape).copy()))
        @ axis_rotmat("z", torch.from_numpy(drop))
    )
    return axis_rotmat("z", torch.from_numpy(heading)) @ _UPRIGHT @ canon


def _upper_body(track: PoseTrack, rng, t, phase, gait_on, p: GaitParams) -> None:
    for side, shift in zip(SIDES, (0.0, 0.5), strict=True):
        ph = (phase + shift) % 1.0
        forward = -p.arm_swing * np.cos(2 * np.pi * (ph - 0.05)) * gait_on
        track.shoulder(side, lowered=78.0, forward=forward + 4)
        bend = 0.4 * p.arm_swing * (1 + np.sin(2 * np.pi * (ph - 0.3)))
        track.elbow(side, p.elbow * (0.5 + 0.5 * gait_on) + gait_on * bend)
    track.spine(
        flexion=2 + p.trunk_lean * gait_on,
        twist=(5.0 if p.duty > 0.5 else 9.0) * gait_on * np.cos(2 * np.pi * phase),
    )
    track.neck(
        flexion=rng.uniform(-4, 6) + smooth_noise(rng, t, 3, 2), twist=smooth_noise(rng, t, 6, 4)
    )


class _FootGeometry:
    """The body's feet and legs at its rest shape: footprints, foot roll and leg IK."""

    def __init__(self, kin: MotionKinematics, toe_out: float) -> None:
        self.kin = kin
        rest = kin.rest_joints
        self.rest = rest
        self.toe_out = np.radians(toe_out)
        self.stand_height = rest[0, 1] - kin.sole_height
        verts = kin.body.v_template.detach().double().numpy()  # zero-shape layout suffices here
        self.heel, self.ball, self.ankle, self.hip, self.leg_len = [], [], [], [], []
        for f, side in enumerate(SIDES):
            a, k, h, b = (J[f"{side}_{n}"] for n in ("ankle", "knee", "hip", "foot"))
            sole_z = verts[kin.sole_vertices[kin.sole_side == f], 2]
            heel = np.array([rest[a, 0], kin.sole_height, sole_z.min() + 0.01])
            ball = np.array([rest[b, 0], kin.sole_height, rest[b, 2]])
            self.heel.append(heel)
            self.ball.append(ball)
            self.ankle.append(rest[a])
            self.hip.append(rest[h] - rest[0])
            self.leg_len.append(
                np.linalg.norm(rest[k] - rest[h]) + np.linalg.norm(rest[a] - rest[k])
            )

    def foot_rotation(self, f: int, yaw, pitch) -> torch.Tensor:
        """(T, 3, 3) world rotation of foot f turned to ``yaw``, toes up by ``pitch`` (radians)."""
        yaw, pitch = np.broadcast_arrays(np.asarray(yaw, float), np.asarray(pitch, float))
        out = np.sign(0.5 - f) * self.toe_out
        return (
            axis_rotmat("z", torch.tensor(yaw, dtype=torch.float64))
            @ _UPRIGHT
            @ axis_rotmat("y", torch.full(yaw.shape, out, dtype=torch.float64))
            @ axis_rotmat("x", -torch.tensor(pitch, dtype=torch.float64))
        )

    def footprint(self, f: int, centre: np.ndarray, yaw: float, width: float):
        """Heel pivot (2,) and yaw of foot f placed beside ``centre`` (the foot's middle under
        a point ``width / 2`` to its side)."""
        left = np.array([np.cos(yaw), np.sin(yaw)])
        rot = self.foot_rotation(f, yaw, 0.0).numpy()
        middle = 0.5 * (self.heel[f] + self.ball[f])
        heel_from_middle = rot @ (self.heel[f] - middle)
        spot = centre + (0.5 - f) * width * left
        return spot + heel_from_middle[:2], yaw

    def ankle_in_stance(self, f: int, heel_xy: np.ndarray, yaw, pitch) -> np.ndarray:
        """(T, 3) ankle position of foot f rolling over its footprint at ``pitch`` (toes up > 0
        pivots on the heel, heel up < 0 on the ball)."""
        heel = np.array([heel_xy[0], heel_xy[1], 0.0])
        flat = self.foot_rotation(f, yaw, 0.0).numpy()
        rot = self.foot_rotation(f, yaw, pitch).numpy()
        ball = heel + flat @ (self.ball[f] - self.heel[f])
        on_heel = heel + rot @ (self.ankle[f] - self.heel[f])
        on_ball = ball + rot @ (self.ankle[f] - self.ball[f])
        return np.where(np.asarray(pitch)[..., None] >= 0, on_heel, on_ball)

    def trajectories(self, t, steps: list[_Step], p: GaitParams, ratio: np.ndarray):
        """Ankle targets (T, 2, 3), foot rotations (T, 2, 3, 3), toe extension (T, 2) degrees
        and stance flags (T, 2) from the footsteps."""
        n = len(t)
        ankles = np.zeros((n, 2, 3))
        rots = torch.zeros(n, 2, 3, 3, dtype=torch.float64)
        toes = np.zeros((n, 2))
        stance = np.zeros((n, 2), dtype=bool)
        hs_max, to_max = np.radians(p.heel_strike), np.radians(p.toe_off)
        for f in (0, 1):
            mine = [s for s in steps if s.foot == f]
            for i, step in enumerate(mine):
                nxt = mine[i + 1] if i + 1 < len(mine) else None
                end = nxt.lift if nxt else np.inf
                down = (t >= step.strike) & (t < end)
                idx = np.nonzero(down)[0]
                if len(idx):
                    r = ratio[idx]
                    hs = hs_max * r
                    to = np.radians(6.0) + (to_max - np.radians(6.0)) * r
                    since = t[idx] - step.strike
                    until = end - t[idx] if np.isfinite(end) else np.full(len(idx), np.inf)
                    roll_in = max(0.12 * p.duty / p.cadence, 1e-3) if p.cadence else 1.0
                    roll_out = max(0.35 * p.duty / p.cadence, 1e-3) if p.cadence else 1.0
                    pitch = hs * (1 - ease(since / roll_in)) - to * (1 - ease(until / roll_out))
                    ankles[idx, f] = self.ankle_in_stance(f, step.heel, step.yaw, pitch)
                    rots[idx, f] = self.foot_rotation(f, step.yaw, pitch)
                    toes[idx, f] = np.degrees(np.maximum(-pitch, 0))
                    stance[idx, f] = True
                if nxt is None:
                    continue
                swing = np.nonzero((t >= nxt.lift) & (t < nxt.strike))[0]
                if not len(swing):
                    continue
                r0, r1 = ratio[swing[0]], ratio[swing[-1]]
                pitch0 = -(np.radians(6.0) + (to_max - np.radians(6.0)) * r0)
                pitch1 = hs_max * r1
                a0 = self.ankle_in_stance(f, step.heel, step.yaw, pitch0)
                a1 = self.ankle_in_stance(f, nxt.heel, nxt.yaw, pitch1)
                u = (t[swing] - nxt.lift) / (nxt.strike - nxt.lift)
                e = ease(u)[:, None]
                lift = (p.clearance * (0.4 + 0.6 * max(r0, r1)) + 0.02) * np.sin(np.pi * u) ** 1.5
                ankles[swing, f] = a0 + (a1 - a0) * e
                ankles[swing, f, 2] += lift
                yaw = step.yaw + (nxt.yaw - step.yaw) * ease(u)
                rots[swing, f] = self.foot_rotation(f, yaw, pitch0 + (pitch1 - pitch0) * ease(u))
                toes[swing, f] = np.degrees(-pitch0) * (1 - ease(u / 0.35))  # toes relax
        return ankles, rots, toes, stance

    def reachable_height(self, pelvis, root_rot, ankles) -> np.ndarray:
        """Pelvis heights (T,) no higher than both ankles can be reached with 99.5% of the leg."""
        z = pelvis[:, 2].copy()
        for f in (0, 1):
            hip = pelvis + (root_rot @ torch.from_numpy(self.hip[f])).numpy()
            horiz = np.linalg.norm(hip[:, :2] - ankles[:, f, :2], axis=-1)
            reach = np.sqrt(np.maximum((0.995 * self.leg_len[f]) ** 2 - horiz**2, 0.0))
            z = np.minimum(z, ankles[:, f, 2] + reach - (hip[:, 2] - pelvis[:, 2]))
        return z

    def solve_legs(self, track: PoseTrack, pelvis, root_rot, ankles, foot_rot, toe_ext) -> None:
        """Hip, knee, ankle and toe rotations putting each ankle on its target, knee forward."""
        rest = torch.from_numpy(self.rest)
        for f, side in enumerate(SIDES):
            h, k, a = J[f"{side}_hip"], J[f"{side}_knee"], J[f"{side}_ankle"]
            hip = torch.from_numpy(pelvis) + root_rot @ torch.from_numpy(self.hip[f])
            target = torch.from_numpy(ankles[:, f])
            knee_dir = foot_rot[:, f] @ torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
            g_thigh, g_shank = _leg_ik(hip, target, knee_dir, rest[k] - rest[h], rest[a] - rest[k])
            track.rot[:, h] = root_rot.transpose(-1, -2) @ g_thigh
            track.rot[:, k] = g_thigh.transpose(-1, -2) @ g_shank
            track.rot[:, a] = g_shank.transpose(-1, -2) @ foot_rot[:, f]
            track.toes(side, toe_ext[:, f])


def _bone_frame(bone: torch.Tensor, hinge: torch.Tensor) -> torch.Tensor:
    """Orthonormal frame [hinge⊥, bone, hinge⊥ × bone] (columns) of a bone and its hinge axis."""
    u = bone / bone.norm(dim=-1, keepdim=True)
    m = hinge - (hinge * u).sum(-1, keepdim=True) * u
    m = m / m.norm(dim=-1, keepdim=True)
    return torch.stack([m, u, torch.cross(m, u, dim=-1)], dim=-1)


def _leg_ik(hip, target, knee_dir, rest_thigh, rest_shank):
    """Global thigh and shank rotations (T, 3, 3) reaching ``target`` from ``hip``, the knee
    bending towards ``knee_dir``; the rest leg's hinge is its x axis."""
    l1, l2 = rest_thigh.norm(), rest_shank.norm()
    d = target - hip
    dist = d.norm(dim=-1, keepdim=True).clamp((l1 - l2).abs() + 1e-4, l1 + l2 - 1e-5)
    d_hat = d / d.norm(dim=-1, keepdim=True)
    pole = knee_dir - (knee_dir * d_hat).sum(-1, keepdim=True) * d_hat
    pole = pole / pole.norm(dim=-1, keepdim=True)
    cos_hip = (l1**2 + dist**2 - l2**2) / (2 * l1 * dist)
    sin_hip = (1 - cos_hip.clamp(-1, 1) ** 2).sqrt()
    knee = hip + l1 * (cos_hip * d_hat + sin_hip * pole)
    ankle = hip + d_hat * dist
    hinge = torch.cross(pole, d_hat, dim=-1)  # the subject's left for a forward knee
    x_axis = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    g_thigh = _bone_frame(knee - hip, hinge) @ _bone_frame(rest_thigh, x_axis).transpose(-1, -2)
    g_shank = _bone_frame(ankle - knee, hinge) @ _bone_frame(rest_shank, x_axis).transpose(-1, -2)
    return g_thigh, g_shank
