"""Retarget a BVH skeleton's motion onto SMPL.

The method copies *global* segment orientations, not local Euler angles, so it does not care how
the BVH's joints are framed or how many helper joints it has:

1. A joint map (YAML, :class:`~rbmcap.motion.joint_map.JointMap`) names, for SMPL joint j, the
   BVH joint k whose rotation drives the same body segment (the bone from j towards its child).
2. Rest-pose alignment: Q_j is the rotation that turns SMPL's rest segment j onto the BVH's rest
   segment k — the pelvis by a best fit of the body's up and left-right directions, every other
   segment by an extra turn of its bone direction on top of its parent's Q (about the body's
   forward axis for limbs in the frontal plane, as rest poses differ by raised or lowered arms
   and spread legs; the smallest turn otherwise). A BVH in A-pose, with arms hanging, or facing
   another way is thus aligned segment by segment.
   A map may instead name a ``reference_frame``: a frame of the file in which the subject holds
   SMPL's T-pose (e.g. a T-pose frame prepended to each clip). That frame is then SMPL's zero
   pose by definition: Q_j = B_k(ref)ᵀ · F, with F the body's facing at that frame (the pelvis
   fit above on that frame's world-space joint positions). It suits rigs whose zero-rotation
   rest is no pose at all (bone-aligned joint axes), as long as the file holds such a frame.
   A map with ``alignment: motion`` needs neither a usable rest nor a T-pose frame, and reads
   the alignment from the motion itself: the pelvis from the up and left-right directions of
   the joint positions in every frame; every other segment's bone direction from where its
   mapped child lies in the BVH joint's own frame (constant in a rigid rig), and its twist
   about that bone from the plane the limb bends in where the bone ends in a hinge (thigh and
   upper arm: the knee and the elbow flex about SMPL's x and ∓y axes), and elsewhere, where
   positions cannot show it, as the one that makes the motion's local rotations smallest on
   average (chordal), solved joint by joint in closed form. The rig's neutral twist then
   becomes SMPL's where the motion's average pose is neutral. Joints the map lists as
   ``neutral`` take no bone direction: their whole alignment is the motion's average pose (for
   bones whose joints sit elsewhere than SMPL's, e.g. a head joint straight above the neck
   joint where SMPL's sits 35° forward); a ``neutral`` pelvis takes its up direction from the
   average torso (pelvis to neck) instead of its bone to the first spine joint.
3. Per frame the SMPL global rotation is G_j = C · B_k · Q_j, with B_k the BVH joint's global
   rotation and C the turn from the BVH's world (Y up unless the map says Z) to rbmcap's Z-up world.
   A map's ``first_frame`` then keeps the file's first frame, drops it (a prepended T-pose), or
   drops it only where it is a T-pose (every body joint within 20° of SMPL's rest pose).
4. SMPL joints the map leaves out take a rotation interpolated (slerp) between their nearest
   mapped ancestor and nearest mapped descendant along the chain — a missing spine joint shares
   the bend of its neighbours — or their parent's rotation when nothing below them is mapped.
5. The root path is the BVH root's, in metres, scaled by the ratio of SMPL's to the BVH's leg
   length so steps fit the SMPL legs; by default its height is then corrected wherever a foot is
   planted so that foot rests on the floor (other proportions would make it sink or float), and
   lifted wherever the body would still reach below the floor (a run's stance phases, where the
   ball of the foot rarely stops; a climb, whose holds are taken for the floor).
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import numpy as np
import roma
import torch
from scipy.ndimage import gaussian_filter1d, maximum_filter1d

from rbmcap.errors import ConfigError, DataError, location
from rbmcap.geometry import global_to_local
from rbmcap.geometry.rotations import rotation_between, rotmat_slerp
from rbmcap.motion.bvh import BVH, read_bvh
from rbmcap.motion.joint_map import JointMap
from rbmcap.motion.kinematics import FOOT_JOINTS, MotionKinematics, standin_body
from rbmcap.motion.rigs import resolve_joint_map
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

FLOOR_MODES = ("contacts", "constant", "bvh")
_ALIGN_FRAMES = 400  # at most this many frames (evenly spaced) feed the motion alignment
_ALIGN_SWEEPS = 6
# Segments ending in a hinge: SMPL joint → (the hinge joint, the axis (in the segment's SMPL rest
# frame) that its bone × the next bone points along when the hinge flexes).
_HINGES = {
    "left_hip": ("left_knee", (1.0, 0.0, 0.0)),
    "right_hip": ("right_knee", (1.0, 0.0, 0.0)),
    "left_shoulder": ("left_elbow", (0.0, -1.0, 0.0)),
    "right_shoulder": ("right_elbow", (0.0, 1.0, 0.0)),
}
TPOSE_MAX_DEG = 20.0  # a T-pose frame: every body joint this close to SMPL's rest pose
CONTACT_SPEED = 0.2  # m/s: a supporting foot slower than this is planted
_INDEX = {name: i for i, name in enumerate(SMPL_JOINT_NAMES)}
_CHILDREN = {j: [c for c, p in enumerate(SMPL_PARENTS) if p == j] for j in range(24)}
# The child whose bone defines a segment's direction where a joint has several children.
_PRIMARY_CHILD = {j: (c[0] if c else None) for j, c in _CHILDREN.items()}
_PRIMARY_CHILD[_INDEX["pelvis"]] = _INDEX["spine1"]
_PRIMARY_CHILD[_INDEX["spine3"]] = _INDEX["neck"]


def bvh_to_motion(
    path: str | Path, joint_map: JointMap | str | Path | None = None, **kwargs
) -> SMPLMotion:
    """Read a BVH file and retarget it (see :func:`retarget_bvh` for the options)."""
    bvh = read_bvh(path)
    kwargs.setdefault("name", Path(path).stem)
    return retarget_bvh(bvh, joint_map, **kwargs)


def retarget_bvh(
    bvh: BVH,
    joint_map: JointMap | str | Path | None = None,
    *,
    body=None,
    betas: np.ndarray | None = None,
    fps: float | None = None,
    floor: str = "contacts",
    translation_scale: float | str = "auto",
    name: str | None = None,
) -> SMPLMotion:
    """Retarget a parsed BVH onto SMPL.

    Args:
        bvh: the parsed file.
        joint_map: a :class:`JointMap`, a YAML path, a map name, or 'auto' (default): the
            shipped map that fits the file's joint names (:mod:`rbmcap.motion.rigs`).
        body: body model whose rest skeleton receives the motion; default the stand-in.
        betas: (B,) shape of that body; default zeros.
        fps: resample to this rate (default: keep the file's rate).
        floor: 'contacts' (default) puts the supporting foot on z = 0 in every frame where it
            is planted (slower than 0.2 m/s), blending the height correction smoothly across
            the frames between contacts, so SMPL's leg proportions do not make feet sink or
            float, then lifts (smoothly) every frame whose lowest point would lie below the
            floor onto it; 'constant' only moves the whole motion so planted feet rest on
            z = 0 on median; 'bvh' keeps the file's ground plane (height 0 along its up axis).
        translation_scale: 'auto' scales the root path by SMPL's / the BVH's leg length; or a
            number (1.0 keeps the file's path in metres).
        name: the motion's name.

    Returns:
        The motion, world frame Z up, metres.
    """
    joint_map = _checked_map(bvh, joint_map, floor)
    kin = MotionKinematics(body if body is not None else standin_body(), betas)
    poses, trans, scale = _retarget_arrays(bvh, joint_map, kin.rest_joints, translation_scale)
    _check_finite(bvh, poses, trans)
    drop = _dropped_first_frames(joint_map.first_frame, poses)

    motion = SMPLMotion(
        poses=poses[drop:],
        trans=trans[drop:],
        betas=np.zeros(kin.body.num_betas) if betas is None else betas,
        fps=bvh.fps,
        name=name or Path(bvh.path).stem,
        source={
            "file": bvh.path,
            "format": "bvh",
            "joint_map": joint_map.name,
            "translation_scale": scale,
            "reference_frame": joint_map.reference_frame,
            "first_frame_dropped": bool(drop),
        },
    )
    if fps is not None:
        motion = motion.resample(fps)
    _place_on_floor(motion, kin, floor)
    _check_finite(bvh, motion.poses, motion.trans, resampled=True)
    return motion


def _check_finite(bvh: BVH, poses: np.ndarray, trans: np.ndarray, resampled=False) -> None:
    """DataError at the first frame whose retargeted poses (T, 24, 3) or translation (T, 3) are
    NaN or infinite (numbers too large for the maths, in the file's frames or offsets)."""
    bad = ~(np.isfinite(poses).all(axis=(1, 2)) & np.isfinite(trans).all(axis=1))
    if not bad.any():
        return
    frame = int(np.argmax(bad))
    if resampled:
        where = f"{bvh.path}: output frame {frame}"
    else:
        line = bvh.frame_lines[frame] if len(bvh.frame_lines) > frame else None
        where = location(bvh.path, line, frame=frame)
    raise DataError(
        f"{where}: retargeting gives NaN or infinite values (are the file's channel values or "
        "offsets out of range?)"
    )


def _retarget_arrays(
    bvh: BVH, joint_map: JointMap, smpl_rest: np.ndarray, translation_scale: float | str
) -> tuple[np.ndarray, np.ndarray, float]:
    """Every frame's SMPL poses (T, 24, 3) and translation (T, 3) (before floor placement), and
    the root path's scale, for SMPL's rest joints ``smpl_rest`` (24, 3) metres."""
    mapped = {_INDEX[s]: bvh.index(b) for s, b in joint_map.joints.items()}
    units = joint_map.units_to_metres
    bvh_rest = bvh.rest_positions() * units
    b_rot, b_pos = bvh.global_transforms()
    world = _world_from_bvh(joint_map.up_axis)
    if joint_map.alignment == "motion":
        neutral = {_INDEX[j] for j in joint_map.neutral}
        align = _motion_alignment(mapped, smpl_rest, b_rot, b_pos * units, world, neutral)
    else:
        align = _alignment(
            joint_map.reference_frame, mapped, smpl_rest, bvh_rest, b_rot, b_pos * units
        )
    globals_ = _smpl_global_rotations(mapped, align, world, torch.from_numpy(b_rot))
    poses = roma.rotmat_to_rotvec(global_to_local(globals_)).numpy()
    poses[:, [_INDEX[j] for j in joint_map.direction_only]] = 0.0
    scale = _translation_scale(translation_scale, mapped, smpl_rest, bvh_rest)
    root = b_pos[:, mapped[0]] * units * scale
    return poses, root @ world.numpy().T - smpl_rest[0], scale


def _checked_map(bvh: BVH, joint_map: JointMap | str | Path | None, floor: str) -> JointMap:
    """The joint map (loaded when given by name or path) after checking it covers ``bvh`` and
    that ``floor`` is a known mode."""
    joint_map = resolve_joint_map(bvh, joint_map)
    if floor not in FLOOR_MODES:
        raise ConfigError(f"floor must be one of {', '.join(FLOOR_MODES)}, got {floor!r}")
    joint_map.check_covers(bvh)
    return joint_map


def _dropped_first_frames(mode: str, poses: np.ndarray) -> int:
    """How many leading frames (0 or 1) the ``first_frame`` mode drops from ``poses`` (T, 24, 3);
    a lone frame is always kept."""
    if mode == "keep" or len(poses) < 2:
        return 0
    if mode == "drop":
        return 1
    return int(is_tpose(poses[0]))


def is_tpose(pose: np.ndarray, max_deg: float = TPOSE_MAX_DEG) -> bool:
    """Whether one frame's SMPL pose (24, 3) axis-angle is a T-pose: every body joint (1–21;
    the root and the hands are free) within ``max_deg`` degrees of SMPL's rest pose."""
    angles = np.degrees(np.linalg.norm(pose[1:22], axis=-1))
    return bool(angles.max() < max_deg)


def _translation_scale(spec: float | str, mapped: dict, smpl_rest, bvh_rest) -> float:
    """The root path's scale: SMPL's / the BVH's leg length for 'auto', else the number given."""
    if spec == "auto":
        return _leg_ratio(mapped, smpl_rest, bvh_rest)
    try:
        return float(spec)
    except (TypeError, ValueError):
        raise ConfigError("translation_scale must be 'auto' or a number") from None


def _place_on_floor(motion: SMPLMotion, kin: MotionKinematics, floor: str) -> None:
    """Move ``motion`` (in place) so its planted feet rest on z = 0, as ``floor`` says."""
    if floor == "bvh":
        return
    offset = _floor_offsets(motion, kin, per_frame=floor == "contacts")
    motion.trans[:, 2] -= offset
    if floor == "contacts":
        lift = _lift_above_floor(motion, kin)
        motion.trans[:, 2] += lift
        offset = offset - lift
    motion.source["floor_offset_m"] = float(np.median(offset))


def _lift_above_floor(motion: SMPLMotion, kin: MotionKinematics) -> np.ndarray:
    """(T,) smooth heights, at least each frame's depth below z = 0 (its lowest mesh point,
    sampled as in :meth:`MotionKinematics.lowest_candidates`), that raise it onto the floor."""
    lowest, _ = kin.lowest_candidates(motion.poses, motion.trans)
    depth = np.maximum(-lowest, 0.0)
    if not depth.any():
        return depth
    width = max(1, round(0.05 * motion.fps))
    spread = maximum_filter1d(depth, size=2 * width + 1, mode="nearest")
    return np.maximum(depth, gaussian_filter1d(spread, width / 2, mode="nearest"))


def _floor_offsets(motion: SMPLMotion, kin: MotionKinematics, per_frame: bool) -> np.ndarray:
    """(T,) heights to lower the motion by so planted feet rest on z = 0: per planted frame
    (interpolated and smoothed in between), or one median value."""
    height, planted = support_foot_heights(motion, kin)
    if not per_frame or planted.sum() < 2:
        return np.full(len(height), np.median(height[planted] if planted.any() else height))
    frames = np.arange(len(height))
    offset = np.interp(frames, frames[planted], height[planted])
    return gaussian_filter1d(offset, max(1.0, 0.03 * motion.fps), mode="nearest")


def support_foot_heights(
    motion: SMPLMotion, kin: MotionKinematics
) -> tuple[np.ndarray, np.ndarray]:
    """Per frame, the height (T,) of the lower foot's lowest sole vertex, and whether that foot
    is planted (T,) bool: its ball joint moves slower than 0.2 m/s."""
    soles = kin.soles(motion.poses, motion.trans)
    heights = np.stack([soles[:, kin.sole_side == s, 2].min(-1) for s in (0, 1)], axis=1)
    joints, _ = kin.pose(motion.poses, motion.trans)
    feet = joints[:, list(FOOT_JOINTS)]
    # a lone frame has no speed: its feet count as planted
    step = np.gradient(feet, axis=0) if len(feet) > 1 else np.zeros_like(feet)
    speed = np.linalg.norm(step, axis=-1) * motion.fps
    lower = heights.argmin(1)
    frames = np.arange(len(heights))
    return heights[frames, lower], speed[frames, lower] < CONTACT_SPEED


# ------------------------------------------------------------------------------ the method
def _world_from_bvh(up_axis: str) -> torch.Tensor:
    if up_axis == "z":
        return torch.eye(3, dtype=torch.float64)
    return roma.rotvec_to_rotmat(torch.tensor([np.pi / 2, 0.0, 0.0], dtype=torch.float64))


def _next_mapped_on_chain(j: int, mapped: dict[int, int]) -> int | None:
    c = _PRIMARY_CHILD[j]
    while c is not None and c not in mapped:
        c = _PRIMARY_CHILD[c]
    return c


def _nearest_mapped_ancestor(j: int, mapped: dict[int, int]) -> int:
    a = SMPL_PARENTS[j]
    while a not in mapped:
        a = SMPL_PARENTS[a]
    return a


def _alignment(
    reference_frame: int | None,
    mapped: dict[int, int],
    smpl_rest: np.ndarray,
    bvh_rest: np.ndarray,
    b_rot: np.ndarray,
    b_pos: np.ndarray,
) -> torch.Tensor:
    """(24, 3, 3) Q_j such that G_j = C · B_k · Q_j (module docstring, step 2): from the rest
    pose ``bvh_rest`` (J, 3), or from the T-pose frame ``reference_frame`` of the BVH's global
    transforms ``b_rot`` (T, J, 3, 3) and ``b_pos`` (T, J, 3); positions in metres. Only mapped
    joints' Q_j are used."""
    if reference_frame is None:
        return _rest_alignment(mapped, smpl_rest, bvh_rest)
    facing = _pelvis_fit(_bone_pairs(mapped, smpl_rest, b_pos[reference_frame]))
    q = facing.expand(24, 3, 3).clone()
    ref = torch.from_numpy(b_rot[reference_frame])
    for j, k in mapped.items():
        q[j] = ref[k].T @ facing
    return q


def _motion_alignment(
    mapped: dict[int, int],
    smpl_rest: np.ndarray,
    b_rot: np.ndarray,
    b_pos: np.ndarray,
    world: torch.Tensor,
    neutral: set[int] = frozenset(),
) -> torch.Tensor:
    """(24, 3, 3) Q_j read from the motion (module docstring, step 2, ``alignment: motion``),
    from the BVH's global rotations ``b_rot`` (T, J, 3, 3) and positions ``b_pos`` (T, J, 3) m;
    the joints in ``neutral`` are aligned on the average pose alone."""
    frames = np.unique(np.linspace(0, len(b_rot) - 1, min(len(b_rot), _ALIGN_FRAMES)).astype(int))
    rot = torch.from_numpy(b_rot[frames])
    pos = b_pos[frames]
    q = torch.eye(3, dtype=torch.float64).repeat(24, 1, 1)
    q[0] = _pelvis_alignment(mapped, smpl_rest, rot, pos, torso_up=0 in neutral)
    axes, hinged = _bone_axes(mapped, smpl_rest, rot, pos, neutral, q)
    _twist_sweeps(mapped, world @ rot, q, axes, fixed=hinged)
    return q


def _bone_axes(
    mapped: dict[int, int],
    smpl_rest: np.ndarray,
    rot: torch.Tensor,
    pos: np.ndarray,
    neutral: set[int],
    q: torch.Tensor,
) -> tuple[dict[int, tuple[torch.Tensor, torch.Tensor]], set[int]]:
    """Per mapped joint with a mapped bone (not in ``neutral``): (the smallest turn Q0 taking
    its SMPL rest bone onto the bone in the BVH joint's frame, averaged over the frames of
    ``rot`` (F, J, 3, 3) and ``pos`` (F, J, 3); the SMPL bone's unit direction), and the joints
    whose whole Q_j the hinge they end in fixes, written into ``q`` (24, 3, 3)."""

    def local_bone(j: int, a: int, b: int) -> torch.Tensor:
        """(F, 3) the bone from mapped joint a to b in BVH joint mapped[j]'s frame."""
        bone = torch.from_numpy(pos[:, mapped[b]] - pos[:, mapped[a]])
        return (rot[:, mapped[j]].transpose(-1, -2) @ bone[..., None]).squeeze(-1)

    axes: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    hinged: set[int] = set()
    for j in (j for j in range(1, 24) if j in mapped and j not in neutral):
        target = _next_mapped_on_chain(j, mapped)
        if target is None:
            continue
        bone = local_bone(j, j, target)
        d_b = bone.sum(0)
        d_s = torch.from_numpy(smpl_rest[target] - smpl_rest[j])
        if d_b.norm() < 1e-9 or d_s.norm() < 1e-9:
            continue
        axes[j] = (rotation_between(d_s, d_b), d_s / d_s.norm())
        hinge = _HINGES.get(SMPL_JOINT_NAMES[j])
        after = _next_mapped_on_chain(target, mapped) if hinge else None
        if not hinge or _INDEX[hinge[0]] != target or after is None:
            continue
        nxt = local_bone(j, target, after)
        bend = torch.linalg.cross(bone, nxt).mean(0)
        bend = bend - (bend @ d_b) * d_b / (d_b @ d_b)
        # a mean flexion of a few degrees is enough to show the plane
        if bend.norm() > 0.05 * bone.norm(dim=-1).mean() * nxt.norm(dim=-1).mean():
            src = torch.stack([d_s / d_s.norm(), torch.tensor(hinge[1], dtype=d_s.dtype)])
            dst = torch.stack([d_b / d_b.norm(), bend / bend.norm()])
            weights = torch.tensor([10.0, 1.0], dtype=d_s.dtype)
            q[j] = roma.rigid_vectors_registration(src, dst, weights=weights)
            hinged.add(j)
    return axes, hinged


def _twist_sweeps(
    mapped: dict[int, int],
    world_rot: torch.Tensor,
    q: torch.Tensor,
    axes: dict[int, tuple[torch.Tensor, torch.Tensor]],
    fixed: set[int],
) -> None:
    """Update ``q`` (24, 3, 3) in place, joint by joint (``_ALIGN_SWEEPS`` times): each mapped
    joint not in ``fixed`` takes the Q_j that makes its local rotations to its nearest mapped
    ancestor and children smallest on average (chordal, closed form): only its twist about its
    bone where ``axes`` gives one, else the whole rotation. ``world_rot`` (F, J, 3, 3) is C · B_k
    per frame and BVH joint."""
    order = [j for j in range(1, 24) if j in mapped]
    above = {j: _nearest_mapped_ancestor(j, mapped) for j in order}
    below = {j: [c for c in order if above[c] == j] for j in [0, *order]}
    glob = world_rot[:, [mapped.get(j, 0) for j in range(24)]] @ q
    for _ in range(_ALIGN_SWEEPS):
        for j in (j for j in order if j not in fixed):
            w = world_rot[:, mapped[j]]
            near = glob[:, above[j]] + sum(glob[:, c] for c in below[j])
            x = (w.transpose(-1, -2) @ near).sum(0)  # maximise tr(xᵀ Q_j)
            if j in axes:
                q0, d = axes[j]
                y = q0.T @ x
                cos_part = torch.trace(y) - d @ y @ d
                sin_part = torch.trace(y.T @ _skew(d))
                q[j] = q0 @ roma.rotvec_to_rotmat(d * torch.atan2(sin_part, cos_part))
            else:
                q[j] = roma.special_procrustes(x)
            glob[:, j] = w @ q[j]


def _pelvis_alignment(
    mapped: dict[int, int],
    smpl_rest: np.ndarray,
    rot: torch.Tensor,
    pos: np.ndarray,
    torso_up: bool = False,
) -> torch.Tensor:
    """(3, 3) Q_0 from two directions averaged in the BVH root joint's frame: from the right to
    the left hip, and up to the next mapped spine joint (both rigid with the pelvis), or, with
    ``torso_up``, up the torso to the neck (the average posture, for rigs whose spine joints sit
    elsewhere than SMPL's); where either is unmapped, from each frame's body up and left-right
    directions (:func:`_pelvis_fit`)."""
    torso = (_INDEX[n] for n in ("neck", "spine3", "head", "spine2") if _INDEX[n] in mapped)
    up = next(torso, None) if torso_up else _next_mapped_on_chain(0, mapped)
    hips = (_INDEX["right_hip"], _INDEX["left_hip"])
    if up is None or not all(h in mapped for h in hips):
        facing = torch.stack([_pelvis_fit(_bone_pairs(mapped, smpl_rest, p)) for p in pos])
        return roma.special_procrustes((rot[:, mapped[0]].transpose(-1, -2) @ facing).sum(0))
    src, dst = [], []
    for a, b in ((0, up), hips):
        bone = torch.from_numpy(pos[:, mapped[b]] - pos[:, mapped[a]])
        local = (rot[:, mapped[0]].transpose(-1, -2) @ bone[..., None]).squeeze(-1).sum(0)
        rest = torch.from_numpy(smpl_rest[b] - smpl_rest[a])
        src.append(rest / rest.norm())
        dst.append(local / local.norm().clamp_min(1e-12))
    return roma.rigid_vectors_registration(torch.stack(src), torch.stack(dst))


def _skew(v: torch.Tensor) -> torch.Tensor:
    """(3, 3) cross-product matrix of ``v`` (3,)."""
    x, y, z = v.tolist()
    return torch.tensor([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]], dtype=v.dtype)


def _rest_alignment(
    mapped: dict[int, int], smpl_rest: np.ndarray, bvh_rest: np.ndarray
) -> torch.Tensor:
    """(24, 3, 3) Q_j turning SMPL's rest segment j onto its BVH counterpart's rest segment."""
    pair = _bone_pairs(mapped, smpl_rest, bvh_rest)
    q = torch.empty(24, 3, 3, dtype=torch.float64)
    q[0] = _pelvis_fit(pair)
    forward = q[0] @ torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    for j in range(1, 24):
        q[j] = q[SMPL_PARENTS[j]]
        if j not in mapped:
            continue
        target = _next_mapped_on_chain(j, mapped)
        dirs = pair(j, target) if target is not None else None
        if dirs is not None:
            q[j] = _turn_bone(q[j] @ dirs[0], dirs[1], forward) @ q[j]
    return q


def _bone_pairs(mapped: dict[int, int], smpl_rest: np.ndarray, bvh_pos: np.ndarray):
    """``pair(a, b)``: the unit directions from SMPL joint a to b in SMPL's rest pose and between
    their mapped BVH joints in ``bvh_pos`` (J, 3), or None where either is unmapped or the
    bone has no length."""
    s_rest = torch.from_numpy(smpl_rest)
    b_rest = torch.from_numpy(bvh_pos)

    def pair(a: int, b: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        if a in mapped and b in mapped:
            ds, db = s_rest[b] - s_rest[a], b_rest[mapped[b]] - b_rest[mapped[a]]
            if ds.norm() > 1e-6 and db.norm() > 1e-6:
                return ds / ds.norm(), db / db.norm()
        return None

    return pair


def _pelvis_fit(pair) -> torch.Tensor:
    """(3, 3) rotation turning SMPL's rest body onto the BVH's: a best fit of the up (pelvis to
    neck) and left-right (right to left hip) directions given by ``pair`` (see
    :func:`_bone_pairs`), up weighted twice."""
    idx = _INDEX
    up = next(
        (p for p in (pair(0, idx[n]) for n in ("neck", "spine3", "head", "spine2")) if p),
        None,
    )
    side = next(
        (
            p
            for p in (
                pair(idx[f"right_{n}"], idx[f"left_{n}"]) for n in ("hip", "shoulder", "knee")
            )
            if p
        ),
        None,
    )
    found = [p for p in (up, side) if p]
    if len(found) == 2:
        src = torch.stack([found[0][0], found[1][0]])
        dst = torch.stack([found[0][1], found[1][1]])
        return roma.rigid_vectors_registration(src, dst, weights=torch.tensor([2.0, 1.0]).double())
    if len(found) == 1:
        return rotation_between(found[0][0], found[0][1])
    return torch.eye(3, dtype=torch.float64)


def _turn_bone(src: torch.Tensor, dst: torch.Tensor, forward: torch.Tensor) -> torch.Tensor:
    """Rotation turning unit bone direction ``src`` onto ``dst``. Rest poses differ mostly by
    how far limbs are raised or spread in the frontal plane (T-pose, A-pose, arms hanging), so a
    bone lying in that plane first turns about the body's forward axis, then by the (small)
    remaining smallest rotation; other bones take the smallest rotation."""

    def in_plane(v: torch.Tensor) -> torch.Tensor:
        return v - (v @ forward) * forward

    a, b = in_plane(src), in_plane(dst)
    if a.norm() < 0.5 or b.norm() < 0.5:
        return rotation_between(src, dst)
    angle = torch.atan2(torch.cross(a, b, dim=-1) @ forward, a @ b)
    frontal = roma.rotvec_to_rotmat(forward * angle)
    return rotation_between(frontal @ src, dst) @ frontal


def _smpl_global_rotations(
    mapped: dict[int, int], align: torch.Tensor, world: torch.Tensor, bvh_global: torch.Tensor
) -> torch.Tensor:
    """(T, 24, 3, 3) SMPL world-from-joint rotations."""
    t = bvh_global.shape[0]
    out = torch.empty(t, 24, 3, 3, dtype=torch.float64)
    for j, k in mapped.items():
        out[:, j] = world @ bvh_global[:, k] @ align[j]
    depth = [0] * 24
    for j in range(1, 24):
        depth[j] = depth[SMPL_PARENTS[j]] + 1
    for j in range(1, 24):  # parents first, so an unmapped parent is already filled
        if j in mapped:
            continue
        below = _next_mapped_on_chain(j, mapped)
        if below is None:
            out[:, j] = out[:, SMPL_PARENTS[j]]
            continue
        above = _nearest_mapped_ancestor(j, mapped)
        frac = (depth[j] - depth[above]) / (depth[below] - depth[above])
        w = torch.full((t,), frac, dtype=torch.float64)
        out[:, j] = rotmat_slerp(out[:, above], out[:, below], w)
    return out


def _leg_ratio(mapped: dict[int, int], smpl_rest: np.ndarray, bvh_rest: np.ndarray) -> float:
    ratios = []
    for side in ("left", "right"):
        chain = [_INDEX[f"{side}_{n}"] for n in ("hip", "knee", "ankle")]
        if all(j in mapped for j in chain):
            smpl = sum(np.linalg.norm(smpl_rest[b] - smpl_rest[a]) for a, b in pairwise(chain))
            bvh = sum(
                np.linalg.norm(bvh_rest[mapped[b]] - bvh_rest[mapped[a]])
                for a, b in pairwise(chain)
            )
            if bvh > 1e-6:
                ratios.append(smpl / bvh)
    return float(np.mean(ratios)) if ratios else 1.0
