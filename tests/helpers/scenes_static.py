"""A capture session with known truth for the fit-over-frames calibration.

The subject (the stand-in body with a drawn shape) holds a 2 s static, eases into a real CMU walk
(``shared/data/cmu-iclone``, retargeted with the ``iclone_cc`` joint map, 60 Hz) and walks:

- the static is one of :data:`STATICS`: ``tpose`` (zero body pose), ``apose`` (arms 40° below
  horizontal) or ``sides`` (arms 82° down, at the sides), standing where the walk starts: its
  first root position and heading, upright (the clip's pelvis is pitched up to 18° in the walk,
  which its spine and neck make up for; a zero-pose static would lean that much), the pelvis
  height set so the lowest point of the body is as high as in the walk (feet on the floor);
  :data:`BLEND_FRAMES` frames then turn every joint from the static pose to the walk's first
  frame (a real subject does not jump into the walk);
- the plates are synthesised with the ``realistic`` realism preset (placement, soft tissue,
  noise, gaps), then physical offsets are applied on top, ``R_phys = R R_off``,
  ``p_phys = p + R t_off``: ``large``: every plate up to 30° about a random axis and up to 5 cm,
  and the plates :data:`FLIPPED` turned 180° about a random axis and moved 15 cm (clusters on
  wands, segment frames inside the limb); ``small``: up to 15° and 3 cm, none flipped.

Relative to the clean virtual plates the true offset is the placement composed with the applied
offset (:func:`true_offsets`; the soft-tissue wobble is time-varying noise on top). The clean
capture (the same realistic plates without the physical offsets: what a perfect calibration
would hand the network, as ``offset_free_mpjpe`` in ``tests/io/test_capture_roundtrip.py`` defines
it) and the uncalibrated capture (the physical plates as they are) are the references a
calibration is measured between; ``ideal`` keeps the plates with no realism at all.

Helpers make the bad inputs a calibration must catch (:func:`swap_plates`, :func:`slip_plate`,
:func:`hide_plate`), and measure what a calibration gives (:func:`predict`, :func:`mpjpe_mm`,
:func:`offset_errors`). Scenes are built once per process (:func:`static_then_walk` is cached):
treat them as read-only.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
import pytest
import roma
import torch

from helpers.shared import ICLONE

FPS = 60.0
WALK_CLIP = "005_01"  # subject 5, "walk" (clips.csv): 299 frames (~5 s) at 60 Hz
STATICS = {"tpose": 0.0, "apose": 40.0, "sides": 82.0}
"""Static pose → angle (degrees) of each arm (shoulder to wrist) below the body's horizontal."""
BLEND_FRAMES = 30
FLIPPED = ("left_forearm", "right_shin", "head")
"""Plates of the ``large`` offsets turned 180° and moved 15 cm."""
LEFT_SHOULDER, RIGHT_SHOULDER, LEFT_WRIST, RIGHT_WRIST = 16, 17, 20, 21


@dataclass
class StaticSession:
    """What was captured and what is true (the fields of ``helpers.scenes.Session`` and more).

    Attributes:
        body: the stand-in body model; betas: (B,) the subject's shape.
        poses: (T, 24, 3) true axis-angle poses; trans: (T, 3) m; joints: (T, 24, 3) m true joints.
        synth: a clean :class:`Synthesizer` (rbm14, no realism); real: the realistic one.
        capture: the physical plates (a :class:`~rbmcap.io.capture.Capture`), uncalibrated.
        clean: the realistic plates without the physical offsets, as a Capture.
        ideal: clean virtual plates (Observations); observed: realistic plates before offsets.
        pert: the realism draw; offsets: (R_off (N, 3, 3), t_off (N, 3) m) applied on top.
        static: frames [a, b) of the static; motion: frames [a, b) after it (blend and walk).
        kind: the static's name (:data:`STATICS`); offsets_kind: 'large' or 'small'.
    """

    body: object
    betas: np.ndarray
    poses: np.ndarray
    trans: np.ndarray
    joints: np.ndarray
    synth: object
    real: object
    capture: object
    clean: object
    ideal: object
    observed: object
    pert: object
    offsets: tuple
    static: tuple[int, int]
    motion: tuple[int, int]
    kind: str
    offsets_kind: str

    @property
    def uncalibrated(self):
        """The physical plates with no calibration applied (the capture itself)."""
        return self.capture

    @property
    def names(self) -> list[str]:
        return list(self.synth.markers.names)


def require_clips(clip: str = WALK_CLIP) -> None:
    """Skip the calling test where the CMU clips are absent (rbmcap never needs them)."""
    if not (ICLONE / f"{clip}.bvh").is_file():
        pytest.skip(f"iClone clips not found at {ICLONE}")


@functools.cache
def _body():
    from rbmcap.body import load_body_model

    return load_body_model("standin")


@functools.cache
def _synths():
    from rbmcap.markers.synth import Synthesizer

    body = _body()
    return Synthesizer(body, "rbm14"), Synthesizer(body, "rbm14", "realistic")


@functools.cache
def walk_motion(walk_frames: int | None, seed: int, clip: str = WALK_CLIP):
    """The CMU walk ``clip`` on the stand-in with a drawn shape (seeded), 60 Hz, its first
    ``walk_frames`` frames (all when None)."""
    from rbmcap.motion import read_bvh, retarget_bvh
    from rbmcap.motion.procedural import sample_betas

    require_clips(clip)
    body = _body()
    betas = sample_betas(np.random.default_rng(seed), body.num_betas)[: body.num_betas]
    bvh = read_bvh(ICLONE / f"{clip}.bvh")
    if walk_frames is not None:  # one more: a leading T-pose frame is dropped by the map
        bvh = dataclasses.replace(bvh, frames=bvh.frames[: walk_frames + 1])
    motion = retarget_bvh(bvh, "iclone_cc", body=body, betas=betas, fps=FPS, name=clip)
    return motion if walk_frames is None else motion[:walk_frames]


def arm_angle_deg(joints: np.ndarray, up: np.ndarray) -> np.ndarray:
    """(..., 2) angles (degrees) of the left and right arm (shoulder → wrist) below the plane
    normal to ``up`` (3,); joints (..., 24, 3)."""
    out = []
    for s, w in ((LEFT_SHOULDER, LEFT_WRIST), (RIGHT_SHOULDER, RIGHT_WRIST)):
        d = joints[..., w, :] - joints[..., s, :]
        out.append(np.degrees(np.arcsin(-(d @ up) / np.linalg.norm(d, axis=-1))))
    return np.stack(out, axis=-1)


def static_pose(kind: str, betas: np.ndarray) -> np.ndarray:
    """(24, 3) body pose of the static ``kind`` (root zero): the shoulders turned about the body's
    forward axis so each arm points :data:`STATICS` [kind] degrees below horizontal."""
    body = _body()
    pose = np.zeros((24, 3), np.float32)
    target = STATICS[kind]
    if target == 0.0:
        return pose
    rest = body.rest_joints(torch.as_tensor(betas, dtype=torch.float32)).numpy()
    # SMPL's canonical frame: Y up, facing +Z, the subject's left +X; +Z rotations lift +X to +Y
    now = arm_angle_deg(rest, np.array([0.0, 1.0, 0.0]))
    for k, (joint, sign) in enumerate(((LEFT_SHOULDER, -1.0), (RIGHT_SHOULDER, 1.0))):
        pose[joint, 2] = sign * np.radians(target - now[k])
    return pose


def upright_heading(rotvec: np.ndarray) -> np.ndarray:
    """(3,) root rotation vector standing upright (SMPL's Y on world Z) and facing where the root
    ``rotvec`` (3,) faces, horizontally."""
    r = roma.rotvec_to_rotmat(torch.as_tensor(rotvec, dtype=torch.float64)).numpy()
    forward = r[:, 2] * np.array([1.0, 1.0, 0.0])
    forward /= np.linalg.norm(forward)
    up = np.array([0.0, 0.0, 1.0])
    upright = np.stack([np.cross(up, forward), up, forward], axis=1)  # SMPL: X = Y × Z (left)
    return roma.rotmat_to_rotvec(torch.as_tensor(upright)).numpy()


def _lowest_point(poses, trans, betas) -> np.ndarray:
    """(T,) height of the lowest mesh vertex per frame (m)."""
    body = _body()
    with torch.no_grad():
        out = body.forward(
            torch.as_tensor(poses, dtype=torch.float32),
            torch.as_tensor(betas, dtype=torch.float32),
            torch.as_tensor(trans, dtype=torch.float32),
        )
    return out.vertices[..., 2].amin(-1).numpy()


def _blend(pose0, trans0, pose1, trans1, n: int):
    """``n`` frames easing from (pose0, trans0) to (pose1, trans1), both ends excluded."""
    from rbmcap.geometry import rotmat_slerp

    w = np.arange(1, n + 1) / (n + 1)
    w = 0.5 - 0.5 * np.cos(np.pi * w)  # eased: no velocity jump at either end
    r0 = roma.rotvec_to_rotmat(torch.as_tensor(pose0, dtype=torch.float64))
    r1 = roma.rotvec_to_rotmat(torch.as_tensor(pose1, dtype=torch.float64))
    wt = torch.as_tensor(w)[:, None].expand(n, 24)
    poses = roma.rotmat_to_rotvec(rotmat_slerp(r0[None], r1[None], wt)).numpy()
    trans = trans0[None] * (1 - w[:, None]) + trans1[None] * w[:, None]
    return poses.astype(np.float32), trans.astype(np.float32)


def uniform_offsets(n: int, rng, max_deg: float, max_m: float):
    """(R (n, 3, 3), t (n, 3)) float64: rotations about random axes by angles uniform in
    [0, max_deg], positions uniform in the ball of radius max_m."""
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    angle = np.deg2rad(rng.uniform(0.0, max_deg, (n, 1)))
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    t = direction * max_m * rng.uniform(0.0, 1.0, (n, 1)) ** (1 / 3)
    return roma.rotvec_to_rotmat(torch.as_tensor(axis * angle)), torch.as_tensor(t)


def physical_offsets(names: list[str], kind: str, seed: int):
    """The offsets applied on top of the realistic plates (see the module docstring)."""
    rng = np.random.default_rng(seed)
    if kind == "small":
        return uniform_offsets(len(names), rng, 15.0, 0.03)
    if kind != "large":
        raise ValueError(f"offsets {kind!r}: 'large' or 'small'")
    r_off, t_off = uniform_offsets(len(names), rng, 30.0, 0.05)
    for name in FLIPPED:
        i = names.index(name)
        axis = rng.normal(size=3)
        direction = rng.normal(size=3)
        r_off[i] = roma.rotvec_to_rotmat(torch.as_tensor(axis / np.linalg.norm(axis) * np.pi))
        t_off[i] = torch.as_tensor(direction / np.linalg.norm(direction) * 0.15)
    return r_off, t_off


@functools.cache
def static_then_walk(
    static: str = "tpose",
    static_frames: int = 120,
    walk_frames: int | None = None,
    offsets: str = "large",
    seed: int = 0,
    offsets_seed: int = 13,
    clip: str = WALK_CLIP,
) -> StaticSession:
    """The session of the module docstring: ``static_frames`` frames of the static ``static``,
    :data:`BLEND_FRAMES` frames into the walk, then ``walk_frames`` frames of it (all when None);
    ``seed`` draws the subject's shape and the realism, ``offsets_seed`` the physical offsets.
    Skips the calling test where the clips are absent. Cached: the same arguments give the same
    (shared) object."""
    from rbmcap.io.capture import Capture

    if static not in STATICS:
        raise ValueError(f"static {static!r}: one of {', '.join(STATICS)}")
    walk = walk_motion(walk_frames, seed, clip)
    betas = walk.betas.astype(np.float32)
    clean, real = _synths()
    body = clean.body

    hold = np.repeat(static_pose(static, betas)[None], static_frames, 0)
    hold[:, 0] = upright_heading(walk.poses[0, 0])
    floor = float(np.median(_lowest_point(walk.poses, walk.trans, betas)))
    t0 = walk.trans[0].astype(np.float32).copy()
    t0[2] += floor - _lowest_point(hold[:1], t0[None], betas)[0]
    blend_p, blend_t = _blend(hold[-1], t0, walk.poses[0], walk.trans[0], BLEND_FRAMES)
    poses = np.concatenate([hold, blend_p, walk.poses]).astype(np.float32)
    trans = np.concatenate([np.repeat(t0[None], static_frames, 0), blend_t, walk.trans]).astype(
        np.float32
    )

    key = f"{clip}-{static}"
    obs = real(poses, trans, betas, fps=FPS, seed=seed, key=key)
    ideal = clean(poses, trans, betas, fps=FPS)
    names = list(real.markers.names)
    r_off, t_off = physical_offsets(names, offsets, offsets_seed)
    rot = torch.as_tensor(obs.rot, dtype=torch.float64)
    r_phys = rot @ r_off
    p_phys = torch.as_tensor(obs.pos, dtype=torch.float64) + (rot @ t_off[..., None])[..., 0]
    capture = Capture(
        fps=FPS,
        names=names,
        pos=p_phys.numpy(),
        rot=r_phys.numpy(),
        valid=obs.valid,
        source=f"{key}.npz",
    )
    clean_capture = Capture(
        fps=FPS, names=names, pos=obs.pos, rot=obs.rot, valid=obs.valid, source=f"{key}-clean.npz"
    )
    t = len(poses)
    return StaticSession(
        body=body,
        betas=betas,
        poses=poses,
        trans=trans,
        joints=true_joints(poses, trans, betas),
        synth=clean,
        real=real,
        capture=capture,
        clean=clean_capture,
        ideal=ideal,
        observed=obs,
        pert=real.perturbation(t, FPS, seed, key),
        offsets=(r_off, t_off),
        static=(0, static_frames),
        motion=(static_frames, t),
        kind=static,
        offsets_kind=offsets,
    )


# ------------------------------------------------------------------------------ bad inputs
def swap_plates(capture, a: str, b: str):
    """The capture with the plates named ``a`` and ``b`` exchanged (a left/right mix-up)."""
    names = [b if n == a else a if n == b else n for n in capture.names]
    return dataclasses.replace(capture, names=names)


def slip_plate(capture, name: str, at: int, shift_m: float = 0.03, direction=(0.0, 1.0, 0.0)):
    """The capture with plate ``name`` moved by ``shift_m`` along ``direction`` of its own frame
    from frame ``at`` on (its offset changes mid-take)."""
    i = capture.index(name)
    pos = capture.pos.copy()
    d = np.asarray(direction, np.float64) / np.linalg.norm(direction) * shift_m
    pos[at:, i] += capture.rot[at:, i] @ d
    pos[~capture.valid] = 0.0
    return dataclasses.replace(capture, pos=pos)


def hide_plate(capture, name: str, frames: tuple[int, int]):
    """The capture with plate ``name`` not seen (valid False) in frames [a, b)."""
    valid = capture.valid.copy()
    valid[frames[0] : frames[1], capture.index(name)] = False
    pos, rot = capture.pos.copy(), capture.rot.copy()
    pos[~valid], rot[~valid] = 0.0, np.eye(3)
    return dataclasses.replace(capture, pos=pos, rot=rot, valid=valid)


# ------------------------------------------------------------------------------ measures
def true_joints(poses, trans, betas, joint_offsets=None) -> np.ndarray:
    """(T, 24, 3) m joints of the stand-in body (float32 model, float64 out), its joints moved by
    ``joint_offsets`` (24, 3) where given."""
    with torch.no_grad():
        out = (
            _body()
            .with_joint_offsets(joint_offsets)
            .forward(
                torch.as_tensor(poses, dtype=torch.float32),
                torch.as_tensor(betas, dtype=torch.float32),
                torch.as_tensor(trans, dtype=torch.float32),
            )
        )
    return out.joints[..., :24, :].double().numpy()


@functools.cache
def predictor(name: str = "standin-rbm14"):
    from rbmcap.inference import Predictor

    return Predictor.from_checkpoint(name)


def predict(capture, calib=None):
    """The network's SMPL motion of ``capture`` (with ``calib`` applied when given)."""
    return predictor().predict_capture(capture, calib)


def mpjpe_mm(motion, session: StaticSession, frames: tuple[int, int] | None = None) -> float:
    """Mean over frames [a, b) (all when None) of the mean distance (mm) between the motion's 24
    joints and the true ones."""
    betas = np.asarray(motion.betas, np.float32)[: _body().num_betas]
    joints = true_joints(motion.poses, motion.trans, betas, motion.joint_offsets)
    a, b = frames or (0, len(joints))
    return float(np.linalg.norm(joints[a:b] - session.joints[a:b], axis=-1).mean() * 1000)


def mpjpe_split(motion, session: StaticSession) -> dict[str, float]:
    """MPJPE (mm) over the whole take, the static and the motion frames."""
    return {
        "whole": mpjpe_mm(motion, session),
        "static": mpjpe_mm(motion, session, session.static),
        "motion": mpjpe_mm(motion, session, session.motion),
    }


def true_offsets(session: StaticSession) -> tuple[torch.Tensor, torch.Tensor]:
    """(R (N, 3, 3), t (N, 3) m) float64: the physical plates' offsets from the clean virtual
    plates, wobble aside: the realism's placement composed with the applied offset."""
    pert, (r_off, t_off) = session.pert, session.offsets
    r_place = roma.rotvec_to_rotmat(torch.as_tensor(pert.place_rotvec))
    t_place = torch.as_tensor(pert.place_offset)
    return r_place @ r_off, t_place + (r_place @ t_off[..., None])[..., 0]


SEGMENT_AXES = {
    "head": (12, 15),
    "chest": (9, 12),
    "left_upper_arm": (16, 18),
    "left_forearm": (18, 20),
    "left_hand": (20, 22),
    "left_thigh": (1, 4),
    "left_shin": (4, 7),
    "left_foot": (7, 10),
    "right_upper_arm": (17, 19),
    "right_forearm": (19, 21),
    "right_hand": (21, 23),
    "right_thigh": (2, 5),
    "right_shin": (5, 8),
    "right_foot": (8, 11),
}
"""Plate → (joint, joint) of its segment's long axis (SMPL joints)."""
LEAF_PLATES = ("head", "left_hand", "right_hand", "left_foot", "right_foot")
"""Plates on a segment with no plate below it: any turn about its joint is a pose change."""


def _closest_turn(est_p, est_r, true_p, true_r, centre, axis=None):
    """The rotation Q about ``centre`` (about ``axis`` only, when given) bringing the plate
    (est_p (3,), est_r (3, 3)) closest to (true_p, true_r): minimises (Δp / 3 mm)² + (Δθ / 2°)².
    Returns (turn angle deg, position error mm, rotation error deg) at the best Q."""
    from rbmcap.geometry import rotmat_geodesic_angle

    def errors(q):
        pos = (q @ (est_p - centre) + centre - true_p).norm(dim=-1) * 1000
        return pos, torch.rad2deg(rotmat_geodesic_angle(q @ est_r, true_r))

    if axis is not None:  # one angle: a dense grid
        phi = torch.deg2rad(torch.arange(-180.0, 180.0, 0.25, dtype=torch.float64))
        pos, rot = errors(roma.rotvec_to_rotmat(phi[:, None] * axis)[:, None])
        pos, rot = pos[:, 0], rot[:, 0]
        k = int(((pos / 3.0) ** 2 + (rot / 2.0) ** 2).argmin())
        return float(torch.rad2deg(phi[k]).abs()), float(pos[k]), float(rot[k])
    best = None
    for start in (torch.zeros(3, dtype=torch.float64), roma.rotmat_to_rotvec(true_r @ est_r.T)):
        w = start.clone().requires_grad_(True)
        opt = torch.optim.LBFGS([w], max_iter=100, line_search_fn="strong_wolfe")

        def closure(w=w, opt=opt):
            opt.zero_grad()
            q = roma.rotvec_to_rotmat(w)
            pos = (q @ (est_p - centre) + centre - true_p).norm() * 1000
            chord = (q @ est_r - true_r).pow(2).sum().clamp_min(1e-18).sqrt()  # ≈ √2 θ
            loss = (pos / 3.0) ** 2 + (torch.rad2deg(chord / np.sqrt(2)) / 2.0) ** 2
            loss.backward()
            return loss

        opt.step(closure)
        with torch.no_grad():
            pos, rot = errors(roma.rotvec_to_rotmat(w))
            cost = float((pos / 3.0) ** 2 + (rot / 2.0) ** 2)
            if best is None or cost < best[0]:
                best = (cost, float(torch.rad2deg(w.norm())), float(pos), float(rot))
    return best[1:]


def offset_errors(calib, session: StaticSession) -> dict[str, np.ndarray]:
    """Per plate (marker-set order): ``pos_mm`` ‖t_est − t_true‖ (plate frame, mm) and ``rot_deg``
    the angle between R_est and R_true (degrees); and the same once the turn that the poses can
    take up is removed (``pos_mm_gauge_free``, ``rot_deg_gauge_free``; ``gauge_deg`` the turn),
    on the rest-pose body: a constant turn of a plate about its segment's long axis is matched
    by the segment's twist in every frame (SMPL's ball joints: the joint above turns, the one
    below turns back), and on a segment with no plate below it (:data:`LEAF_PLATES`) by any
    turn about its joint. Only a pose prior tells these apart: the gauge-free errors are what
    the plates themselves determine."""
    from rbmcap.geometry import rotmat_geodesic_angle

    r_true, t_true = true_offsets(session)
    names = session.names
    rv_est = np.stack([np.asarray(calib.plates[n].rotation, np.float64) for n in names])
    r_est = roma.rotvec_to_rotmat(torch.as_tensor(rv_est))
    t_est = torch.as_tensor(
        np.stack([np.asarray(calib.plates[n].position, np.float64) for n in names])
    )
    out = {
        "pos_mm": ((t_est - t_true).norm(dim=-1) * 1000).numpy(),
        "rot_deg": np.degrees(rotmat_geodesic_angle(r_est, r_true).numpy()),
    }
    rest = session.synth(np.zeros((1, 24, 3), np.float32), None, session.betas)
    p, r = (torch.as_tensor(x[0], dtype=torch.float64) for x in (rest.pos, rest.rot))
    joints = torch.as_tensor(rest.joints[0], dtype=torch.float64)
    est_p, est_r = p + (r @ t_est[..., None])[..., 0], r @ r_est
    true_p, true_r = p + (r @ t_true[..., None])[..., 0], r @ r_true
    found = []
    for i, n in enumerate(names):
        a, b = SEGMENT_AXES[n]
        axis = (
            None if n in LEAF_PLATES else (joints[b] - joints[a]) / (joints[b] - joints[a]).norm()
        )
        found.append(_closest_turn(est_p[i], est_r[i], true_p[i], true_r[i], joints[a], axis))
    turn, pos, rot = (np.array(x) for x in zip(*found))
    return out | {"gauge_deg": turn, "pos_mm_gauge_free": pos, "rot_deg_gauge_free": rot}


def oracle_calibration(session: StaticSession):
    """A calibration holding the truth: the subject's betas and :func:`true_offsets` (what a
    perfect fit could give; the soft-tissue wobble and the noise remain on the plates)."""
    from rbmcap.calibrate import Calibration, PlateOffset

    r, t = true_offsets(session)
    rv = roma.rotmat_to_rotvec(r).numpy()
    plates = {n: PlateOffset(rv[i], t[i].numpy()) for i, n in enumerate(session.names)}
    known = {
        "betas": session.betas.astype(np.float64),
        "plates": plates,
        "frames": session.static,
        "rotation": np.zeros(3),
        "translation": np.zeros(3),
    }
    fields = {f.name for f in dataclasses.fields(Calibration)}
    return Calibration(**{k: v for k, v in known.items() if k in fields})


def describe_offset_errors(err: dict[str, np.ndarray], names: list[str]) -> str:
    """One line: the worst plate for position and rotation and the means, then the same
    gauge-free (:func:`offset_errors`)."""

    def worst(pos, rot) -> str:
        ip, ir = int(np.argmax(pos)), int(np.argmax(rot))
        return (
            f"max {pos[ip]:.2f} mm ({names[ip]}), {rot[ir]:.2f} deg ({names[ir]}); "
            f"mean {pos.mean():.2f} mm, {rot.mean():.2f} deg"
        )

    turn = err["gauge_deg"]
    return (
        f"offsets: {worst(err['pos_mm'], err['rot_deg'])}; gauge-free (turns the poses take "
        f"up removed, at most {turn.max():.0f} deg, {names[int(np.argmax(turn))]}): "
        f"{worst(err['pos_mm_gauge_free'], err['rot_deg_gauge_free'])}"
    )
