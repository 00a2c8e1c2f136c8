"""OSC in the VMC protocol: each subject drives a humanoid avatar in Unity (EVMC4U), VSeeFace,
VirtualMotionCapture-compatible tools and Blender's VMC add-ons.

Per pose the sink sends one OSC bundle (time tag "immediately") over UDP:

- ``/VMC/Ext/Root/Pos "root" px py pz qx qy qz qw``: the avatar's root;
- ``/VMC/Ext/Bone/Pos NAME px py pz qx qy qz qw`` for the 22 bones of :data:`UNITY_BONES`
  (Unity's ``HumanBodyBones`` names; SMPL's hand joints 22 and 23 have no humanoid bone of their
  own and are not sent): the bone's ``localPosition`` and ``localRotation``;
- ``/VMC/Ext/OK 1`` (an avatar is loaded) and ``/VMC/Ext/T t`` (seconds of source time since
  the subject's first pose sent).

VMC carries one avatar per stream, so subject k of the session (in the order ``open`` gets them)
goes to ``port + k``: a single subject to ``port`` itself.

Frames. Unity is left-handed, Y up, metres. A receiver's humanoid avatar (VRM-normalised) faces
+Z with its left on −X, and every bone's rest frame is aligned with the avatar's root, so a bone's
``localRotation`` is its turn from the T-pose and its ``localPosition`` its offset from its parent
in the parent's frame. SMPL's canonical frame (right-handed, Y up, facing +Z, left on +X) is that
frame mirrored in X, ``M = diag(−1, 1, 1)``; rbmcap's Z-up world goes to Unity's world by

    W = M C:  (x, y, z) → (−x, z, −y),

C being the exports' turn to Y up (:data:`rbmcap.io.exports.bvh.Z_UP_TO_Y_UP`) and M the mirror
that Unity plugins of Y-up capture systems apply. With SMPL's local rotations R_j
(parent-from-child) and global ones G_j = G_parent R_j, the avatar's global rotations are
U_j = W G_j M, hence the local rotations

    u_0 = W R_0 M = M (C R_0) M,    u_j = M R_j M   (j ≥ 1),

a proper rotation each; in quaternions, conjugating by M takes (x, y, z, w) to (x, −y, −z, w)
(sent with w ≥ 0). A bone's local position is its rest offset M (J_j − J_parent) at the
subject's betas (the calibration's, else each pose's running estimate). Positions map by W:
the root sits on the floor under the pelvis P = J_0 + trans, at W (P_x, P_y, 0) with no rotation,
and ``Hips`` at (0, P_z, 0) from it, so the avatar's hips land on W P. A receiver that applies
only the root's position puts the avatar on the floor where the subject stands; one that also
applies bone positions gets the subject's height and proportions. The turn-from-T-pose of each
bone is relative to SMPL's rest pose, which a receiver's avatar takes as its own T-pose.

Sending is inline: the bundle's bytes are laid out once (with python-osc's builders) and each pose
only writes its 162 big-endian floats into a copy and sends it.
"""

from __future__ import annotations

import logging
import math
import socket
from dataclasses import dataclass

import numpy as np
from pythonosc.osc_bundle_builder import IMMEDIATELY, OscBundleBuilder
from pythonosc.osc_message_builder import OscMessageBuilder

from rbmcap.body.joints import JointModel
from rbmcap.errors import ConfigError, DataError
from rbmcap.io.exports.bvh import Z_UP_TO_Y_UP
from rbmcap.live.frames import LivePose, LiveStats
from rbmcap.live.sinks.base import SubjectInfo
from rbmcap.live.sources.base import LOOPBACK
from rbmcap.skeleton import SMPL_PARENTS

log = logging.getLogger("rbmcap.live")

VMC_PORT = 39539
"""The port VMC receivers (performers' targets, EVMC4U, VSeeFace) listen on by default."""

UNITY_BONES: tuple[str, ...] = (
    "Hips",
    "LeftUpperLeg",
    "RightUpperLeg",
    "Spine",
    "LeftLowerLeg",
    "RightLowerLeg",
    "Chest",
    "LeftFoot",
    "RightFoot",
    "UpperChest",
    "LeftToes",
    "RightToes",
    "Neck",
    "LeftShoulder",
    "RightShoulder",
    "Head",
    "LeftUpperArm",
    "RightUpperArm",
    "LeftLowerArm",
    "RightLowerArm",
    "LeftHand",
    "RightHand",
)
"""Unity's ``HumanBodyBones`` name of SMPL's joints 0..21, in SMPL's order."""

NUM_BONES = len(UNITY_BONES)
MIRROR_X = np.diag([-1.0, 1.0, 1.0])
"""M: SMPL's canonical frame (left +X) to a Unity avatar's (left −X); also right- to left-handed."""
Z_UP_TO_UNITY = MIRROR_X @ Z_UP_TO_Y_UP
"""W = M C: rbmcap's world (Z up, right-handed) to Unity's (Y up, left-handed): (x, y, z) →
(−x, z, −y)."""
_QUAT_MIRROR = np.array([1.0, -1.0, -1.0, 1.0])
"""A quaternion (x, y, z, w) of R times this is the quaternion of M R M."""
_FLOATS_PER_MESSAGE = 7


def _quat_map() -> np.ndarray:
    """(10, 20) K such that ``[1, R.flat] @ K`` holds the four candidate quaternions of R (4 × 4,
    XYZW, each 4|q_i|·q) and then the values choosing among them (R00, R11, R22, tr R).

    Candidate i < 3 (largest component x, y or z; (i, j, k) cyclic) is
    q_i = 1 − tr R + 2 R_ii, q_j = R_ji + R_ij, q_k = R_ki + R_ik, w = R_kj − R_jk; candidate 3
    (largest w) is (R21 − R12, R02 − R20, R10 − R01, 1 + tr R): roma's choice and formulas.
    """
    K = np.zeros((10, 5, 4))

    def r(a: int, b: int) -> int:
        return 1 + 3 * a + b

    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        K[0, i, i] = 1.0
        K[[r(0, 0), r(1, 1), r(2, 2)], i, i] = -1.0
        K[r(i, i), i, i] = 1.0
        K[[r(j, i), r(i, j)], i, j] = 1.0
        K[[r(k, i), r(i, k)], i, k] = 1.0
        K[r(k, j), i, 3], K[r(j, k), i, 3] = 1.0, -1.0
        K[r(i, i), 4, i] = 1.0
    for axis, (a, b) in enumerate(((2, 1), (0, 2), (1, 0))):
        K[r(a, b), 3, axis], K[r(b, a), 3, axis] = 1.0, -1.0
    K[[0, r(0, 0), r(1, 1), r(2, 2)], 3, 3] = 1.0
    K[[r(0, 0), r(1, 1), r(2, 2)], 4, 3] = 1.0
    return K.reshape(10, 20)


_QUAT_MAP = _quat_map()


def rotmat_to_quat_xyzw(R: np.ndarray) -> np.ndarray:
    """Unit quaternions (..., 4), XYZW with w ≥ 0, of rotation matrices (..., 3, 3).

    ``roma.rotmat_to_unitquat`` in numpy (the same formulas, chosen by the largest of the
    diagonal and the trace), as one matrix product: for the handful of matrices of one pose,
    where torch's per-call overhead would dominate.
    """
    R = np.asarray(R, dtype=np.float64)
    n = R.size // 9
    features = np.empty((n, 10))
    features[:, 0] = 1.0
    features[:, 1:] = R.reshape(n, 9)
    out = features @ _QUAT_MAP
    q = out[:, :16].reshape(n, 4, 4)[np.arange(n), out[:, 16:].argmax(-1)]
    q /= np.sqrt((q * q).sum(-1, keepdims=True)) * np.where(q[:, 3:] < 0.0, -1.0, 1.0)
    return q.reshape(*R.shape[:-2], 4)


def unity_local_rotations(rotmats: np.ndarray) -> np.ndarray:
    """(22, 4) XYZW quaternions of the bones' Unity local rotations, u_0 = M (C R_0) M and
    u_j = M R_j M, from SMPL local rotations (24, 3, 3) (joint 0 global, world Z up)."""
    R = np.array(rotmats[:NUM_BONES], dtype=np.float64)
    R[0] = Z_UP_TO_Y_UP @ R[0]
    return rotmat_to_quat_xyzw(R) * _QUAT_MIRROR


def unity_bone_offsets(rest_joints: np.ndarray) -> np.ndarray:
    """(22, 3) each bone's Unity local position, M (J_j − J_parent), from rest joints (24, 3) m
    (SMPL's canonical frame); the hips' row is zero (it is posed: :func:`vmc_values`)."""
    rest = np.asarray(rest_joints, dtype=np.float64)
    parents = np.array(SMPL_PARENTS[:NUM_BONES])
    offsets = rest[:NUM_BONES] - rest[np.maximum(parents, 0)]
    offsets[0] = 0.0
    return offsets * np.diag(MIRROR_X)


def rest_values(rest_joints: np.ndarray) -> np.ndarray:
    """(23, 7) the part of :func:`vmc_values` that only the rest skeleton decides: the bones'
    local positions (the hips' zero) and identity rotations."""
    out = np.zeros((NUM_BONES + 1, _FLOATS_PER_MESSAGE))
    out[1:, :3] = unity_bone_offsets(rest_joints)
    out[:, 6] = 1.0
    return out


def pose_values(rest: np.ndarray, rest_pelvis: np.ndarray, rotmats, trans) -> np.ndarray:
    """:func:`vmc_values` from its rest part ``rest`` (23, 7) (:func:`rest_values`) and the
    rest pelvis J_0 (3,) m."""
    out = rest.copy()
    pelvis = Z_UP_TO_UNITY @ (rest_pelvis + trans)
    out[0, 0], out[0, 2], out[1, 1] = pelvis[0], pelvis[2], pelvis[1]
    out[1:, 3:] = unity_local_rotations(rotmats)
    return out


def vmc_values(rotmats: np.ndarray, trans: np.ndarray, rest_joints: np.ndarray) -> np.ndarray:
    """The floats of one pose's VMC messages, (23, 7): row 0 the root, rows 1..22 the bones of
    :data:`UNITY_BONES`, each ``px py pz qx qy qz qw`` in Unity's frame (module docstring).

    Args:
        rotmats: (24, 3, 3) SMPL local rotations (joint 0 global, world Z up).
        trans: (3,) root translation, metres, world Z up.
        rest_joints: (24, 3) the subject's rest joints, metres, SMPL's canonical frame.
    """
    rest = np.asarray(rest_joints, dtype=np.float64)
    return pose_values(rest_values(rest), rest[0], rotmats, np.asarray(trans, dtype=np.float64))


@dataclass(eq=False)
class _BundleLayout:
    """One pose's OSC bundle laid out once: ``template`` (its bytes with zero floats) and
    ``float_bytes`` (162 × 4 byte indices of its float arguments, in :func:`vmc_values`' order
    then the time)."""

    template: np.ndarray
    float_bytes: np.ndarray

    @classmethod
    def build(cls) -> _BundleLayout:
        messages = [_message("/VMC/Ext/Root/Pos", "root")]
        messages += [_message("/VMC/Ext/Bone/Pos", name) for name in UNITY_BONES]
        ok = OscMessageBuilder("/VMC/Ext/OK")
        ok.add_arg(1, OscMessageBuilder.ARG_TYPE_INT)
        t = OscMessageBuilder("/VMC/Ext/T")
        t.add_arg(0.0, OscMessageBuilder.ARG_TYPE_FLOAT)
        messages += [ok.build(), t.build()]
        bundle = OscBundleBuilder(IMMEDIATELY)
        for m in messages:
            bundle.add_content(m)
        dgram = bundle.build().dgram
        starts, at = [], 16  # "#bundle\0" and the time tag
        for m in messages:
            at += 4 + m.size  # each element: its size (int32), then its bytes
            starts.append(at)
        slots = [np.arange(end - 4 * _FLOATS_PER_MESSAGE, end) for end in starts[:-2]]
        slots.append(np.arange(starts[-1] - 4, starts[-1]))
        return cls(np.frombuffer(dgram, dtype=np.uint8).copy(), np.concatenate(slots))

    def fill(self, values: np.ndarray, time_s: float) -> bytes:
        """The bundle's bytes for ``values`` (23, 7) and the time, seconds."""
        floats = np.empty(values.size + 1, dtype=">f4")
        floats[:-1] = values.reshape(-1)
        floats[-1] = time_s
        buf = self.template.copy()
        buf[self.float_bytes] = floats.view(np.uint8)
        return buf.tobytes()


def _message(address: str, name: str):
    m = OscMessageBuilder(address)
    m.add_arg(name, OscMessageBuilder.ARG_TYPE_STRING)
    for _ in range(_FLOATS_PER_MESSAGE):
        m.add_arg(0.0, OscMessageBuilder.ARG_TYPE_FLOAT)
    return m.build()


class RateLimit:
    """At most ``rate`` poses a second per subject, by source time: a pose is admitted when at
    least ``1/rate`` s passed since the subject's last admitted one (so a source at a multiple of
    ``rate`` gives every k-th pose), and always after time went back (a restarted source).
    ``rate`` None admits every pose."""

    def __init__(self, rate: float | None, what: str) -> None:
        ok = rate is None or (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0)
        if not ok:
            raise ConfigError(f"{what} rate {rate!r}: expected a positive number a second")
        self.rate = rate
        self._interval = None if rate is None else (1.0 - 1e-6) / rate
        self._last: dict[str, float] = {}

    def admit(self, subject: str, t: float) -> bool:
        """Whether the pose of ``subject`` at source time ``t`` (seconds) goes out."""
        last = self._last.get(subject)
        if self._interval is not None and last is not None and 0.0 <= t - last < self._interval:
            return False
        self._last[subject] = t
        return True


@dataclass(eq=False)
class _Subject:
    """A subject's destination and rest skeleton. ``template`` (24, 3) and ``shapedirs``
    (24, 3, B): its body's rest joints and their change per beta, float64; ``rest`` the rest
    joints at ``betas`` (the calibration's when ``calibrated``, else the last pose's) and
    ``values`` their :func:`rest_values`. ``first_time``: the source time of its first pose
    sent."""

    address: tuple[str, int]
    template: np.ndarray
    shapedirs: np.ndarray
    calibrated: bool = False
    betas: np.ndarray | None = None
    rest: np.ndarray | None = None
    values: np.ndarray | None = None
    first_time: float | None = None

    def rest_joints(self, betas: np.ndarray) -> np.ndarray:
        if self.rest is None or np.abs(betas - self.betas).max() > RESHAPE_TOLERANCE:
            nb = min(len(betas), self.shapedirs.shape[-1])
            b = np.asarray(betas[:nb], dtype=np.float64)
            self.rest = self.template + self.shapedirs[..., :nb] @ b
            self.values = rest_values(self.rest)
            self.betas = np.array(betas, copy=True)
        return self.rest


RESHAPE_TOLERANCE = 1e-3
"""Rest offsets are recomputed when a running betas estimate moves by more than this (any
coefficient): after its first frames it moves far less per frame, and a change this small moves
the rest joints by hundredths of a millimetre (joint shape directions are centimetres per unit
of beta)."""


class VMCSink:
    """Sends each subject's poses as OSC in the VMC protocol (module docstring).

    Args:
        host: the receiver's address (a name or IPv4); resolved once by ``open``.
        port: the UDP port of the first subject; subject k goes to ``port + k``.
        rate: at most this many poses a second per subject, by source time (:class:`RateLimit`;
            the poses between are skipped); None sends every pose.

    Attributes:
        sent: bundles sent; skipped: poses left out by ``rate``; send_errors: sends the
            operating system refused (logged once; a missing receiver never stops a session).
    """

    inline = True

    def __init__(self, host: str = LOOPBACK, port: int = VMC_PORT, rate: float | None = None):
        if not isinstance(port, int) or not 1 <= port <= 65535:
            raise ConfigError(f"VMC port {port!r}: expected an integer in 1..65535")
        self._rate = RateLimit(rate, "VMC")
        self.host, self.port, self.rate = str(host), port, rate
        self.name = f"vmc://{self.host}:{port}"
        self.sent = self.skipped = self.send_errors = 0
        self._layout = _BundleLayout.build()
        self._subjects: dict[str, _Subject] = {}
        self._sock: socket.socket | None = None

    def open(self, subjects: list[SubjectInfo], stats: LiveStats) -> None:
        if self.port + len(subjects) - 1 > 65535:
            last = self.port + len(subjects) - 1
            raise ConfigError(f"{self.name}: {len(subjects)} subjects need ports up to {last}")
        try:
            infos = socket.getaddrinfo(self.host, self.port, socket.AF_INET, socket.SOCK_DGRAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ConfigError(f"{self.name}: cannot resolve {self.host!r} ({exc})") from None
        ip = infos[0][4][0]
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for k, info in enumerate(subjects):
            joints = JointModel.from_body(info.body)
            subject = _Subject(
                address=(ip, self.port + k),
                template=joints.joint_template.detach().cpu().double().numpy(),
                shapedirs=joints.joint_shapedirs.detach().cpu().double().numpy(),
            )
            if info.betas is not None:
                subject.rest_joints(np.asarray(info.betas))
                subject.calibrated = True
            self._subjects[info.name] = subject

    def send(self, pose: LivePose) -> None:
        subject = self._subjects.get(pose.subject)
        if subject is None:
            raise DataError(f"{self.name}: a pose of subject {pose.subject!r}, not opened")
        t = float(pose.timestamp)
        if not self._rate.admit(pose.subject, t):
            self.skipped += 1
            return
        if subject.first_time is None or t < subject.first_time:
            subject.first_time = t
        if not subject.calibrated:
            subject.rest_joints(pose.betas)
        values = pose_values(subject.values, subject.rest[0], pose.rotmats, pose.trans)
        payload = self._layout.fill(values, t - subject.first_time)
        try:
            self._sock.sendto(payload, subject.address)
        except OSError as exc:
            self.send_errors += 1
            if self.send_errors == 1:
                log.warning("%s: cannot send to %s:%d (%s)", self.name, *subject.address, exc)
            return
        self.sent += 1

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
