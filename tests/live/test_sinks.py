"""The live sinks that leave the process: OSC/VMC, UDP/JSON, and recordings to .npz and BVH.

Network tests send to a socket the test bound on 127.0.0.1 port 0 and parse what arrives.
"""

from __future__ import annotations

import json
import math
import socket

import numpy as np
import pytest
import roma
import torch
from pythonosc.osc_bundle import OscBundle

from rbmcap.errors import ConfigError, DataError, FormatError
from rbmcap.live.frames import LivePose, LiveStats
from rbmcap.live.sinks.base import Sink, SubjectInfo
from rbmcap.live.sinks.recording import RecordingSink, _Chunks, subject_path
from rbmcap.live.sinks.udp_json import UDPJSONSink
from rbmcap.live.sinks.vmc import VMCSink, rotmat_to_quat_xyzw
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

# Unity's humanoid hierarchy (HumanBodyBones), written out independently of the sink.
UNITY_PARENT = {
    "Hips": None,
    "Spine": "Hips",
    "Chest": "Spine",
    "UpperChest": "Chest",
    "Neck": "UpperChest",
    "Head": "Neck",
    "LeftShoulder": "UpperChest",
    "LeftUpperArm": "LeftShoulder",
    "LeftLowerArm": "LeftUpperArm",
    "LeftHand": "LeftLowerArm",
    "RightShoulder": "UpperChest",
    "RightUpperArm": "RightShoulder",
    "RightLowerArm": "RightUpperArm",
    "RightHand": "RightLowerArm",
    "LeftUpperLeg": "Hips",
    "LeftLowerLeg": "LeftUpperLeg",
    "LeftFoot": "LeftLowerLeg",
    "LeftToes": "LeftFoot",
    "RightUpperLeg": "Hips",
    "RightLowerLeg": "RightUpperLeg",
    "RightFoot": "RightLowerLeg",
    "RightToes": "RightFoot",
}
SMPL_OF = {
    "Hips": "pelvis",
    "Spine": "spine1",
    "Chest": "spine2",
    "UpperChest": "spine3",
    "Neck": "neck",
    "Head": "head",
    **{
        f"{Side}{bone}": f"{side}_{joint}"
        for Side, side in (("Left", "left"), ("Right", "right"))
        for bone, joint in (
            ("Shoulder", "collar"),
            ("UpperArm", "shoulder"),
            ("LowerArm", "elbow"),
            ("Hand", "wrist"),
            ("UpperLeg", "hip"),
            ("LowerLeg", "knee"),
            ("Foot", "ankle"),
            ("Toes", "foot"),
        )
    },
}
M = np.diag([-1.0, 1.0, 1.0])  # SMPL canonical → Unity avatar: mirror X
C = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, -1.0, 0]])  # Z up → Y up (the exports' turn)
W = M @ C  # rbmcap world → Unity world: (x, y, z) → (−x, z, −y)
UPRIGHT = C.T  # a root orientation standing the rest pose up, facing −Y in rbmcap's world


# ------------------------------------------------------------------------------------ helpers
def subject(body, name: str = "", betas=None, fps: float = 60.0) -> SubjectInfo:
    return SubjectInfo(name, body, "neutral", betas, (), fps)


def make_pose(rotmats, trans, betas, frame: int = 0, fps: float = 60.0, name: str = ""):
    return LivePose(
        subject=name,
        frame=frame,
        timestamp=frame / fps,
        received=0.0,
        rotmats=np.asarray(rotmats, dtype=np.float32),
        trans=np.asarray(trans, dtype=np.float32),
        betas=np.asarray(betas, dtype=np.float32),
        plates_pos=np.zeros((0, 3), np.float32),
        plates_rot=np.zeros((0, 3, 3), np.float32),
        plates_valid=np.zeros(0, bool),
        index=frame + 1,
    )


def random_poses(n: int, seed: int = 0, name: str = "", frames=None, fps: float = 60.0):
    g = torch.Generator().manual_seed(seed)
    rot = roma.random_rotmat((n, 24), generator=g).numpy()
    trans = torch.randn((n, 3), generator=g).numpy()
    betas = 0.5 * torch.randn(10, generator=g).numpy()
    frames = list(range(n)) if frames is None else frames
    return [make_pose(rot[i], trans[i], betas, frames[i], fps, name) for i in range(n)]


def rot_y(deg: float) -> np.ndarray:
    return roma.rotvec_to_rotmat(torch.tensor([0.0, math.radians(deg), 0.0])).double().numpy()


def rot_z(deg: float) -> np.ndarray:
    return roma.rotvec_to_rotmat(torch.tensor([0.0, 0.0, math.radians(deg)])).double().numpy()


@pytest.fixture
def receiver():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(2.0)
    yield sock
    sock.close()


def receive(sock: socket.socket, n: int) -> list[bytes]:
    return [sock.recvfrom(65536)[0] for _ in range(n)]


def nothing_more(sock: socket.socket) -> bool:
    sock.settimeout(0.05)
    try:
        sock.recvfrom(65536)
    except TimeoutError:
        return True
    return False


def vmc_send(body, poses, port: int, betas=None, **options) -> VMCSink:
    sink = VMCSink("127.0.0.1", port, **options)
    sink.open([subject(body, betas=betas)], LiveStats())
    try:
        for pose in poses:
            sink.send(pose)
    finally:
        sink.close()
    return sink


def parse_vmc(dgram: bytes) -> list[tuple[str, list]]:
    return [(m.address, list(m.params)) for m in OscBundle(dgram)]


def unity_bones(dgram: bytes) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The root's floats (7,) and each bone's (7,): local position then quaternion XYZW."""
    root, bones = None, {}
    for address, params in parse_vmc(dgram):
        if address == "/VMC/Ext/Root/Pos":
            root = np.array(params[1:], dtype=np.float64)
        elif address == "/VMC/Ext/Bone/Pos":
            bones[params[0]] = np.array(params[1:], dtype=np.float64)
    return root, bones


def quat_rotmat(q: np.ndarray) -> np.ndarray:
    # Unity's Quaternion → matrix is the standard formula on (x, y, z, w).
    return roma.unitquat_to_rotmat(torch.from_numpy(q)).numpy()


def unity_fk(dgram: bytes) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Unity's transform hierarchy applied to a bundle: each bone's world position and
    rotation (localPosition in the parent's frame, localRotation after the parent's)."""
    root, bones = unity_bones(dgram)
    pos, rot = {}, {}
    for name in UNITY_PARENT:  # parents come first
        parent = UNITY_PARENT[name]
        p0, r0 = (root[:3], quat_rotmat(root[3:])) if parent is None else (pos[parent], rot[parent])
        pos[name] = p0 + r0 @ bones[name][:3]
        rot[name] = r0 @ quat_rotmat(bones[name][3:])
    return pos, rot


# ------------------------------------------------------------------------------------- VMC
def test_every_sink_satisfies_the_sink_protocol(tmp_path):
    sinks = [VMCSink(), UDPJSONSink(), RecordingSink(npz=tmp_path / "take.npz")]
    assert all(isinstance(s, Sink) and s.inline for s in sinks)


def test_rotmat_to_quat_xyzw_is_romas_quaternion_with_w_non_negative():
    g = torch.Generator().manual_seed(1)
    half_turns = roma.rotvec_to_rotmat(
        torch.tensor([[math.pi, 0, 0], [0, math.pi, 0], [0, 0, math.pi], [2.2, 2.2, 0.0]])
    )
    R = torch.cat([roma.random_rotmat(500, generator=g), half_turns, torch.eye(3)[None]]).double()
    expected = roma.rotmat_to_unitquat(R).numpy()
    expected *= np.where(expected[:, 3:] < 0, -1.0, 1.0)
    q = rotmat_to_quat_xyzw(R.numpy())
    assert (q[:, 3] >= 0).all()
    aligned = q * np.sign((q * expected).sum(-1, keepdims=True))  # w = 0: either sign
    np.testing.assert_allclose(aligned, expected, atol=1e-12)


def test_vmc_sends_one_bundle_per_pose_with_every_humanoid_bone(standin, receiver):
    poses = random_poses(5)
    sink = vmc_send(standin, poses, receiver.getsockname()[1])
    bundles = receive(receiver, 5)
    assert nothing_more(receiver) and sink.sent == 5
    for k, dgram in enumerate(bundles):
        messages = parse_vmc(dgram)
        addresses = [a for a, _ in messages]
        assert addresses == ["/VMC/Ext/Root/Pos"] + ["/VMC/Ext/Bone/Pos"] * 22 + [
            "/VMC/Ext/OK",
            "/VMC/Ext/T",
        ]
        assert messages[0][1][0] == "root"
        assert {p[0] for a, p in messages if a == "/VMC/Ext/Bone/Pos"} == set(UNITY_PARENT)
        # EVMC4U accepts a message only with these OSC types: a string, then 7 float32
        positions = [p for a, p in messages if a.endswith("/Pos")]
        assert all(len(p) == 8 and {type(v) for v in p[1:]} == {float} for p in positions)
        assert messages[-2][1] == [1] and type(messages[-2][1][0]) is int
        assert messages[-1][1][0] == pytest.approx(k / 60.0, abs=1e-6)


def test_vmc_values_are_the_documented_conversion_to_unity(standin, receiver):
    (pose,) = random_poses(1, seed=3)
    betas = pose.betas.copy()
    vmc_send(standin, [pose], receiver.getsockname()[1], betas=betas)
    root, bones = unity_bones(receive(receiver, 1)[0])
    rest = standin.rest_joints(torch.from_numpy(betas)).double().numpy()
    R = pose.rotmats.astype(np.float64)
    pelvis = W @ (rest[0] + pose.trans)
    np.testing.assert_allclose(root, [pelvis[0], 0, pelvis[2], 0, 0, 0, 1], atol=1e-6)
    for name, values in bones.items():
        j = SMPL_JOINT_NAMES.index(SMPL_OF[name])
        p = SMPL_PARENTS[j]
        expected_rot = M @ C @ R[0] @ M if j == 0 else M @ R[j] @ M
        expected_pos = [0, pelvis[1], 0] if j == 0 else M @ (rest[j] - rest[p])
        np.testing.assert_allclose(values[:3], expected_pos, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(quat_rotmat(values[3:]), expected_rot, atol=1e-6)
        assert values[6] >= 0.0 and abs(np.linalg.norm(values[3:]) - 1) < 1e-6


def test_vmc_avatar_joints_are_the_body_joints_carried_into_unitys_world(standin, receiver):
    poses = random_poses(3, seed=4)
    vmc_send(standin, poses, receiver.getsockname()[1])
    for pose, dgram in zip(poses, receive(receiver, 3), strict=True):
        joints, grot = standin.pose_joints(
            torch.from_numpy(pose.rotmats), torch.from_numpy(pose.betas), pose.trans
        )
        pos, rot = unity_fk(dgram)
        for name in UNITY_PARENT:
            j = SMPL_JOINT_NAMES.index(SMPL_OF[name])
            np.testing.assert_allclose(pos[name], W @ joints[j].double().numpy(), atol=2e-5)
            np.testing.assert_allclose(rot[name], W @ grot[j].double().numpy() @ M, atol=2e-5)


@pytest.mark.parametrize("heading", [0.0, 130.0])
def test_vmc_a_bent_left_elbow_bends_the_avatars_left_forearm_forward(standin, receiver, heading):
    rot = np.tile(np.eye(3), (24, 1, 1))
    rot[0] = rot_z(heading) @ UPRIGHT
    rot[SMPL_JOINT_NAMES.index("left_elbow")] = rot_y(-90.0)  # SMPL: forearm from +X (left) to +Z
    vmc_send(standin, [make_pose(rot, [0, 0, 1], np.zeros(10))], receiver.getsockname()[1])
    pos, grot = unity_fk(receive(receiver, 1)[0])
    # A Unity humanoid faces its +Z with its left on its −X.
    facing, left = grot["Hips"] @ [0, 0, 1.0], grot["Hips"] @ [-1.0, 0, 0]
    upper_arm = pos["LeftLowerArm"] - pos["LeftUpperArm"]
    forearm = pos["LeftHand"] - pos["LeftLowerArm"]
    assert upper_arm @ left / np.linalg.norm(upper_arm) > 0.95
    assert forearm @ facing / np.linalg.norm(forearm) > 0.95
    assert grot["Hips"][1] @ [0, 1.0, 0] == pytest.approx(1.0, abs=1e-6)  # standing up


@pytest.mark.parametrize("heading", [0.0, -70.0])
def test_vmc_moving_the_subject_moves_the_avatar_the_same_way(standin, receiver, heading):
    root = rot_z(heading) @ UPRIGHT
    rot = np.tile(np.eye(3), (24, 1, 1))
    rot[0] = root
    start = np.array([0.3, -0.2, 0.9])
    moves = {"left": root @ [1.0, 0, 0], "forward": root @ [0, 0, 1.0], "up": [0, 0, 1.0]}
    poses = [make_pose(rot, start, np.zeros(10))]
    poses += [make_pose(rot, start + 0.5 * np.asarray(d), np.zeros(10)) for d in moves.values()]
    vmc_send(standin, poses, receiver.getsockname()[1])
    fk = [unity_fk(d) for d in receive(receiver, 4)]
    hips = fk[0][1]["Hips"]
    expected = {"left": hips @ [-1.0, 0, 0], "forward": hips @ [0, 0, 1.0], "up": [0, 1.0, 0]}
    for k, name in enumerate(moves, start=1):
        moved = fk[k][0]["Hips"] - fk[0][0]["Hips"]
        np.testing.assert_allclose(moved, 0.5 * np.asarray(expected[name]), atol=1e-5)
    # rbmcap's +X is Unity's −X for the same floor point (W), whichever way the subject faces.
    np.testing.assert_allclose(W @ [1.0, 0, 0], [-1.0, 0, 0])


def test_vmc_roots_stand_on_the_floor_under_the_pelvis(standin, receiver):
    (pose,) = random_poses(1, seed=5)
    vmc_send(standin, [pose], receiver.getsockname()[1])
    root, bones = unity_bones(receive(receiver, 1)[0])
    rest = standin.rest_joints(torch.from_numpy(pose.betas)).double().numpy()
    pelvis = rest[0] + pose.trans
    assert root[1] == 0.0 and bones["Hips"][1] == pytest.approx(pelvis[2], abs=1e-6)


def test_vmc_sends_each_subject_to_its_own_port(standin):
    socks = []
    for _ in range(20):  # two consecutive free ports
        a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        a.bind(("127.0.0.1", 0))
        b = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            b.bind(("127.0.0.1", a.getsockname()[1] + 1))
        except OSError:
            a.close(), b.close()
            continue
        socks = [a, b]
        break
    assert socks, "no two consecutive free ports on 127.0.0.1"
    try:
        sink = VMCSink("127.0.0.1", socks[0].getsockname()[1])
        sink.open([subject(standin, "alice"), subject(standin, "bob")], LiveStats())
        alice, bob = random_poses(1, 6, "alice")[0], random_poses(1, 7, "bob")[0]
        sink.send(alice)
        sink.send(bob)
        sink.close()
        for sock, pose in zip(socks, (alice, bob), strict=True):
            sock.settimeout(2.0)
            _, bones = unity_bones(sock.recvfrom(65536)[0])
            expected = M @ pose.rotmats[3].astype(np.float64) @ M  # spine1
            np.testing.assert_allclose(quat_rotmat(bones["Spine"][3:]), expected, atol=1e-6)
            assert nothing_more(sock)
    finally:
        for s in socks:
            s.close()


def test_vmc_rate_sends_every_kth_pose_of_a_faster_source(standin, receiver):
    poses = random_poses(6, fps=120.0)
    sink = vmc_send(standin, poses, receiver.getsockname()[1], rate=60.0)
    times = [parse_vmc(d)[-1][1][0] for d in receive(receiver, 3)]
    assert nothing_more(receiver) and (sink.sent, sink.skipped) == (3, 3)
    np.testing.assert_allclose(times, [0, 2 / 120, 4 / 120], atol=1e-6)


def test_vmc_rejects_a_bad_port_or_rate_in_one_line():
    for options in ({"port": 70000}, {"port": "x"}, {"rate": 0.0}, {"rate": float("nan")}):
        with pytest.raises(ConfigError) as info:
            VMCSink(**options)
        assert "\n" not in str(info.value)


# -------------------------------------------------------------------------------- UDP/JSON
def json_send(poses, port: int, **options) -> UDPJSONSink:
    sink = UDPJSONSink("127.0.0.1", port, **options)
    sink.open([], LiveStats())
    for pose in poses:
        sink.send(pose)
    sink.close()
    return sink


def test_udp_json_sends_one_datagram_per_pose_in_rbmcaps_conventions(receiver):
    poses = random_poses(4, seed=8, name="alice", frames=[3, 4, 6, 7])
    json_send(poses, receiver.getsockname()[1])
    datagrams = receive(receiver, 4)
    assert nothing_more(receiver)
    for pose, data in zip(poses, datagrams, strict=True):
        assert len(data) < 64 * 1024
        msg = json.loads(data.decode("utf-8"))
        assert (msg["subject"], msg["frame"], msg["index"]) == ("alice", pose.frame, pose.index)
        assert msg["timestamp"] == pytest.approx(pose.timestamp)
        assert msg["joints"] == list(SMPL_JOINT_NAMES)
        assert msg["rotation_format"] == "quat_xyzw"
        q = np.array(msg["rotations"])
        assert q.shape == (24, 4) and (q[:, 3] >= 0).all()
        np.testing.assert_allclose(quat_rotmat(q), pose.rotmats, atol=1e-6)
        np.testing.assert_allclose(msg["trans"], pose.trans, atol=1e-6)
        np.testing.assert_allclose(msg["betas"], pose.betas, atol=1e-6)


def test_udp_json_can_send_rotation_matrices(receiver):
    (pose,) = random_poses(1, seed=9)
    json_send([pose], receiver.getsockname()[1], rotations="rotmat")
    msg = json.loads(receive(receiver, 1)[0])
    assert msg["rotation_format"] == "rotmat"
    np.testing.assert_allclose(np.reshape(msg["rotations"], (24, 3, 3)), pose.rotmats, atol=1e-6)


def test_udp_json_refuses_a_pose_with_nan_and_a_bad_option():
    (pose,) = random_poses(1)
    pose.trans[1] = np.nan
    with pytest.raises(DataError, match="NaN"):
        UDPJSONSink().encode(pose)
    with pytest.raises(ConfigError, match="rotations"):
        UDPJSONSink(rotations="euler")


# ------------------------------------------------------------------------------- recording
def record(sink: RecordingSink, infos, poses) -> list:
    sink.open(infos, LiveStats())
    for pose in poses:
        sink.send(pose)
    return sink.close()


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # bvhio's "import glm"
def test_recording_writes_the_poses_received_as_npz_and_bvh(standin, tmp_path):
    frames = [10, 11, 13, 14, 15, 18, 19]  # frames 12, 16 and 17 were lost
    poses = random_poses(7, seed=10, frames=frames)
    sink = RecordingSink(npz=tmp_path / "take.npz", bvh=tmp_path / "take.bvh")
    written = record(sink, [subject(standin, fps=60.0)], poses)
    assert written == [tmp_path / "take.npz", tmp_path / "take.bvh"]
    motion = SMPLMotion.load(tmp_path / "take.npz")
    assert (motion.num_frames, motion.fps, motion.gender) == (7, 60.0, "neutral")
    sent = np.stack([p.rotmats for p in poses])
    np.testing.assert_allclose(motion.rotmats(), sent, atol=1e-5)
    np.testing.assert_allclose(motion.trans, np.stack([p.trans for p in poses]), atol=1e-7)
    np.testing.assert_allclose(motion.betas, poses[-1].betas, atol=1e-7)
    assert motion.source["frames_missing"] == 3 and motion.source["first_frame"] == 10
    with np.load(tmp_path / "take.npz") as data:
        np.testing.assert_array_equal(data["frame_numbers"], frames)
        np.testing.assert_allclose(data["timestamps"], np.array(frames) / 60.0)
    bvhio = pytest.importorskip("bvhio")
    bvh = bvhio.readAsBvh(str(tmp_path / "take.bvh"))
    assert bvh.FrameCount == 7 and bvh.FrameTime == pytest.approx(1 / 60.0, abs=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["take.bvh", "take.npz"]


def test_recording_keeps_the_calibrated_betas(standin, tmp_path):
    poses = random_poses(2, seed=11)
    calibrated = np.linspace(-1, 1, 10).astype(np.float32)
    record(RecordingSink(npz=tmp_path / "t.npz"), [subject(standin, betas=calibrated)], poses)
    np.testing.assert_allclose(SMPLMotion.load(tmp_path / "t.npz").betas, calibrated, atol=1e-7)


def test_recording_several_subjects_insert_their_names_before_the_suffix(standin, tmp_path):
    alice, carol = random_poses(3, 12, "alice"), random_poses(2, 13, "carol")
    infos = [subject(standin, n) for n in ("alice", "bob", "carol")]
    sink = RecordingSink(npz=tmp_path / "take.npz")
    record(sink, infos, [p for pair in zip(alice, carol) for p in pair] + alice[2:])
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["take_alice.npz", "take_carol.npz"]
    assert SMPLMotion.load(tmp_path / "take_alice.npz").num_frames == 3
    assert len(sink.notes) == 1 and "'bob' received no pose" in sink.notes[0]
    assert subject_path("out/take.bvh", "a b/c", 0, True).name == "take_a_b_c.bvh"


def test_recording_with_no_pose_writes_nothing_and_says_so(standin, tmp_path, caplog):
    sink = RecordingSink(npz=tmp_path / "take.npz", bvh=tmp_path / "take.bvh")
    assert record(sink, [subject(standin)], []) == []
    assert list(tmp_path.iterdir()) == [] and "received no pose" in sink.notes[0]
    assert "received no pose" in caplog.text


def test_recording_is_written_when_another_sink_interrupts_the_session(standin, tmp_path):
    class Failing:
        def send(self, pose):
            if pose.frame == 3:
                raise DataError("the other sink failed")

    recording, other = RecordingSink(npz=tmp_path / "take.npz"), Failing()
    recording.open([subject(standin)], LiveStats())
    with pytest.raises(DataError):
        try:
            for pose in random_poses(10, seed=14):
                recording.send(pose)
                other.send(pose)
        finally:
            recording.close()
    assert SMPLMotion.load(tmp_path / "take.npz").num_frames == 4
    assert recording.close() == []  # a second close writes nothing


def test_recording_into_a_missing_folder_is_refused_before_capture(tmp_path):
    with pytest.raises(ConfigError) as info:
        RecordingSink(npz=tmp_path / "missing" / "take.npz")
    assert "does not exist" in str(info.value) and "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match=r"must end in \.bvh"):
        RecordingSink(bvh=tmp_path / "take.txt")
    with pytest.raises(ConfigError):
        RecordingSink()


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt])
def test_a_failed_write_leaves_no_partial_file(standin, tmp_path, monkeypatch, failure):
    def write_half_then_fail(fh, **arrays):
        fh.write(b"PK\x03\x04 half an archive")
        raise failure

    monkeypatch.setattr(np, "savez_compressed", write_half_then_fail)
    sink = RecordingSink(npz=tmp_path / "take.npz", bvh=tmp_path / "take.bvh")
    expected = FormatError if isinstance(failure, OSError) else KeyboardInterrupt
    with pytest.raises(expected) as info:
        record(sink, [subject(standin)], random_poses(3, seed=15))
    if expected is FormatError:
        assert str(info.value) == f"{tmp_path / 'take.npz'}: cannot write (No space left on device)"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["take.bvh"]  # the other file
    else:
        assert list(tmp_path.iterdir()) == []


def test_recording_buffers_grow_by_chunks_without_losing_rows():
    rows = _Chunks((2,), np.float32, chunk=3)
    for k in range(7):
        rows.append([k, -k])
    assert [len(p) for p in rows.parts()] == [3, 3, 1]
    np.testing.assert_array_equal(rows.array(), [[k, -k] for k in range(7)])
    assert _Chunks((3,), np.float32).array().shape == (0, 3)
