"""Skeleton animations of SMPL motions (matplotlib → GIF), for people to check motion by eye.

The camera follows the pelvis over a floor grid (0.5 m squares) when the body travels, and looks
from the side of its overall travel so walking is seen in profile (from the front-left when the
body stays in place); the subject's left side is drawn blue,
the right red, the body's shadow grey on the floor, and the pelvis's path as a trail.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed; must precede pyplot

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.animation import FuncAnimation, PillowWriter

from rbmcap.motion.kinematics import MotionKinematics, standin_body
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

_LEFT, _RIGHT, _MID = "#1f5fbf", "#c8312b", "#333333"
HALF_WIDTH = 1.0
"""Metres of floor shown either side of the camera's centre (the picture is 2·HALF_WIDTH tall)."""
_GRID = 0.5
FLOOR_COLOUR, SHADOW_COLOUR = "#dddddd", "#c4c4c4"
ELEVATION_DEG = 12.0
"""The camera's height above the floor's plane, as an angle seen from the centre."""


def frame_indices(num_frames: int, fps: float, out_fps: float, max_frames: int) -> np.ndarray:
    """Frames to draw: every k-th so the GIF plays at about ``out_fps`` in real time, thinned
    further (and then no longer real time) if that would exceed ``max_frames``."""
    step = max(1, round(fps / out_fps))
    step = max(step, int(np.ceil(num_frames / max_frames)))
    return np.arange(0, num_frames, step)


def render_motion(
    motion: SMPLMotion,
    out: str | Path,
    *,
    body=None,
    out_fps: float = 15.0,
    max_frames: int = 150,
    size_px: int = 360,
) -> Path:
    """Write an animated GIF of ``motion``'s skeleton.

    Args:
        motion: the motion.
        out: the ``.gif`` path.
        body: body model giving the skeleton (default the stand-in) at the motion's betas.
        out_fps: about this many pictures per second of motion; the GIF plays in real time.
        max_frames: at most this many pictures (longer motions are thinned further).
        size_px: width and height of the picture.

    Returns:
        The written path.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    body = (body if body is not None else standin_body()).with_joint_offsets(motion.joint_offsets)
    kin = MotionKinematics(body, motion.betas)
    joints, _ = kin.pose(motion.poses, motion.trans)
    idx = frame_indices(motion.num_frames, motion.fps, out_fps, max_frames)
    step = int(idx[1] - idx[0]) if len(idx) > 1 else 1
    playback = motion.fps / step  # real time, however thinned
    view_azim = camera_azimuth(joints)
    dpi = 80
    fig = plt.figure(figsize=(size_px / dpi, size_px / dpi), dpi=dpi)
    ax = fig.add_subplot(projection="3d")
    fig.subplots_adjust(0, 0, 1, 1)
    centres = camera_centres(joints)

    def draw(k: int):
        _draw_frame(ax, joints, idx[k], centres[idx[k]], view_azim, motion)
        return []

    anim = FuncAnimation(fig, draw, frames=len(idx), blit=False)
    tmp = out.with_name(f".{out.name}.tmp.gif")
    try:
        anim.save(tmp, writer=PillowWriter(fps=playback))
        tmp.replace(out)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
    return out


def _draw_frame(ax, joints: np.ndarray, i: int, centre: np.ndarray, azim: float, motion) -> None:
    """Draw frame ``i`` of ``joints`` (T, 24, 3) m on the 3-D axes: floor grid around ``centre``
    (2,), the pelvis trail, bones with their floor shadows, the head, and a time label."""
    colours = [bone_colour(j) for j in range(24)]
    ax.cla()
    lo, hi = centre - HALF_WIDTH, centre + HALF_WIDTH
    _floor_grid(ax, lo, hi)
    trail = joints[: i + 1, 0]
    keep = np.all((trail[:, :2] >= lo) & (trail[:, :2] <= hi), axis=1)
    ax.plot(trail[keep, 0], trail[keep, 1], 0.0, color="#9a9a9a", lw=1)
    for j, p in enumerate(SMPL_PARENTS):
        if p < 0:
            continue
        seg = joints[i, [p, j]]
        ax.plot(seg[:, 0], seg[:, 1], [0.0, 0.0], color=SHADOW_COLOUR, lw=2.5)  # shadow
        ax.plot(seg[:, 0], seg[:, 1], seg[:, 2], color=colours[j], lw=3)
    ax.scatter(*joints[i].T, s=6, color=_MID, depthshade=False)
    head = joints[i, SMPL_JOINT_NAMES.index("head")]
    ax.scatter(*head, s=140, color=_MID, depthshade=False)
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_zlim(0.0, 2 * HALF_WIDTH)
    ax.set_box_aspect((1, 1, 1), zoom=1.3)
    ax.view_init(elev=ELEVATION_DEG, azim=azim)
    ax.set_axis_off()
    label = f"{motion.name}  {i / motion.fps:5.2f} s"
    ax.text2D(0.03, 0.95, label, transform=ax.transAxes, fontsize=9)


def bone_colour(j: int) -> str:
    """Colour of SMPL joint ``j``'s bone (to its parent): the subject's left blue, right red,
    the middle dark grey."""
    name = SMPL_JOINT_NAMES[j]
    return _LEFT if name.startswith("left") else _RIGHT if name.startswith("right") else _MID


def camera_centres(joints: np.ndarray) -> np.ndarray:
    """(T, 2) floor point the camera looks at in each frame of ``joints`` (T, 24, 3): the
    pelvis when the body travels, otherwise its mean position (the floor keeps still)."""
    path = joints[:, 0, :2]
    centres = path.copy()
    if np.linalg.norm(path - path.mean(0), axis=-1).max() < 0.6:
        centres[:] = path.mean(0)
    return centres


def camera_azimuth(joints: np.ndarray) -> float:
    """matplotlib azimuth (degrees) of a camera beside the main direction of travel, or in
    front and to the left of the body when it stays in place."""
    travel = joints[-1, 0, :2] - joints[0, 0, :2]
    if np.linalg.norm(travel) > 0.5:
        camera = np.array([-travel[1], travel[0]])
    else:
        left = joints[0, SMPL_JOINT_NAMES.index("left_hip"), :2]
        left = left - joints[0, SMPL_JOINT_NAMES.index("right_hip"), :2]
        facing = np.array([left[1], -left[0]])  # left × up
        camera = facing + 0.6 * left
    return float(np.degrees(np.arctan2(camera[1], camera[0])))


def floor_grid_segments(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(K, 2, 3) floor lines (z = 0) of the grid squares inside the rectangle ``lo``…``hi``
    (2,) m, lines along y first, then along x."""
    xs = np.arange(np.ceil(lo[0] / _GRID) * _GRID, hi[0] + 1e-9, _GRID)
    ys = np.arange(np.ceil(lo[1] / _GRID) * _GRID, hi[1] + 1e-9, _GRID)
    along_y = [[[x, lo[1], 0.0], [x, hi[1], 0.0]] for x in xs]
    along_x = [[[lo[0], y, 0.0], [hi[0], y, 0.0]] for y in ys]
    return np.array(along_y + along_x, dtype=np.float64).reshape(-1, 2, 3)


def _floor_grid(ax, lo: np.ndarray, hi: np.ndarray) -> None:
    for seg in floor_grid_segments(lo, hi):
        ax.plot(seg[:, 0], seg[:, 1], seg[:, 2], color=FLOOR_COLOUR, lw=0.8)
