"""The live browser viewer: a viser server showing each subject's body and plates as its poses
arrive, over a floor grid, with a readout of the session's counters.

A body is a skinned mesh as in ``rbmcap view`` (:mod:`rbmcap.view.skinning`): the rest mesh is
sent once, and each pose sends 24 bone poses (global joint rotation and posed joint position);
the browser skins the vertices. The rest mesh takes the subject's calibrated betas, else the
first pose's (the stream's running estimate), and is rebuilt when that estimate has moved more
than :data:`BETAS_TOLERANCE`, at most every :data:`RESHAPE_EVERY_S`. Plates are drawn as the
offline viewer draws them (:mod:`rbmcap.view.plates`): observed plates as small coordinate
frames, the others greyed out where they were last seen.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.errors import ConfigError, DataError
from rbmcap.live.frames import LivePose, LiveStats
from rbmcap.live.sinks.base import SubjectInfo
from rbmcap.live.sources.base import LOOPBACK
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.view.layers import METHOD_COLOURS, OTHER_COLOURS
from rbmcap.view.plates import axis_segments
from rbmcap.view.scene import MISSING_GREY, PLATE_AXIS_M
from rbmcap.view.server import import_viser
from rbmcap.view.skinning import SkinnedMesh, skin_motion, skinned_vertices

READOUT_EVERY_S = 0.2
"""Shortest interval between two updates of the readout's text (at most 5 a second)."""

BETAS_TOLERANCE = 0.05
"""Largest change of an uncalibrated subject's betas the shown rest mesh ignores."""

RESHAPE_EVERY_S = 2.0
"""Shortest interval between two rebuilds of a subject's rest mesh (each resends the mesh)."""

SUBJECT_COLOURS = (METHOD_COLOURS["network"], *OTHER_COLOURS)
"""RGB of the subjects' meshes, in the session's subject order (the network's colour first)."""


@dataclass(eq=False)
class SubjectView:
    """One subject's scene nodes and what they show.

    Attributes:
        info: the subject as the session opened it; colour: its mesh's RGB.
        mesh: its skinned mesh (a ``viser.MeshSkinnedHandle``; None until its betas are known).
        rest: the mesh's rest pose (:class:`~rbmcap.view.skinning.SkinnedMesh`, one frame).
        betas: (B,) float32 the betas ``rest`` was built with; reshaped_at: when, monotonic s.
        observed, missing: the plates' handles (None without plates).
        held_wxyz: (N, 4) each plate's last seen rotation, w first; held_pos: (N, 3) metres;
            ever: (N,) bool seen at all.
        frame: the last shown pose's frame number (-1 before any).
    """

    info: SubjectInfo
    colour: tuple[int, int, int]
    mesh: object | None = None
    rest: SkinnedMesh | None = None
    betas: np.ndarray | None = None
    reshaped_at: float = 0.0
    observed: object | None = None
    missing: object | None = None
    held_wxyz: np.ndarray | None = None
    held_pos: np.ndarray | None = None
    ever: np.ndarray | None = None
    frame: int = -1


class ViewerSink:
    """A live sink serving a browser view of every subject on ``host:port``.

    Args:
        host: the address to bind (loopback by default: serving other machines is explicit).
        port: the port; 0 lets the OS choose (a busy port makes viser try the next ones).
            ``port`` and ``url`` hold the bound one once open.

    Attributes:
        name, url: ``http://HOST:PORT``; inline: False (the session feeds it from its own thread);
        max_rate: the most poses a second it is fed (a display shows no more, and each update
            holds the interpreter lock the stream needs).
        subjects: subject name → its :class:`SubjectView` (after ``open``).
        readout: the readout's Markdown handle (after ``open``).
    """

    inline = False
    max_rate = 60.0

    def __init__(self, host: str = LOOPBACK, port: int = 8080) -> None:
        if not 0 <= int(port) <= 65535:
            raise ConfigError(f"viewer port {port}: expected 0 (any free port) to 65535")
        self.host, self.port = host, int(port)
        self.url = self.name = f"http://{_shown_host(host)}:{self.port}"
        self.server = None
        self.subjects: dict[str, SubjectView] = {}
        self.readout = None
        self._stats = LiveStats()
        self._readout_at = -np.inf
        self._aimed = False
        self._lock = threading.Lock()

    def open(self, subjects: list[SubjectInfo], stats: LiveStats) -> None:
        """Start the server and add the floor, each subject's nodes and the readout.

        Raises:
            ConfigError: viser is not installed.
        """
        viser = import_viser()
        self.server = viser.ViserServer(host=self.host, port=self.port, verbose=False)
        self.port = self.server.get_port()
        self.url = self.name = f"http://{_shown_host(self.host)}:{self.port}"
        self._stats = stats
        try:
            self._build_scene(subjects)
        except BaseException:
            self.close()
            raise

    def send(self, pose: LivePose) -> None:
        """Pose ``pose.subject``'s mesh and plates; refresh the readout when it is due.

        Raises:
            DataError: the viewer was not opened with that subject.
        """
        with self._lock:
            if self.server is None:
                return
            view = self.subjects.get(pose.subject)
            if view is None:
                raise DataError(
                    f"viewer: no subject {pose.subject!r} (opened with {sorted(self.subjects)})"
                )
            if self._needs_reshape(view, pose.betas):
                self._add_mesh(view, pose.betas)
            with self.server.atomic():
                self._pose_body(view, pose)
                if view.observed is not None:
                    self._pose_plates(view, pose)
            view.frame = pose.frame
            if not self._aimed:
                self._aim_camera(pose.trans, pose.rotmats[0])
                self._aimed = True
            now = time.monotonic()
            if now - self._readout_at >= READOUT_EVERY_S:
                self.readout.content = readout_text(self._stats, self._frames())
                self._readout_at = now

    def close(self) -> None:
        """Stop the server (safe to call twice, and after a failed ``open``)."""
        with self._lock:
            server, self.server = self.server, None
        if server is not None:
            server.stop()

    def shown_vertices(self, subject: str) -> np.ndarray:
        """(V, 3) the subject's mesh as the browser skins it from the bone poses the server
        holds (metres, world Z up)."""
        view = self.subjects[subject]
        bones = view.mesh.bones
        shown = dataclasses.replace(
            view.rest,
            bone_wxyz=np.stack([b.wxyz for b in bones])[None].astype(np.float32),
            joints=np.stack([b.position for b in bones])[None].astype(np.float32),
        )
        return skinned_vertices(shown, 0)

    # ------------------------------------------------------------------------------ the scene
    def _build_scene(self, subjects: list[SubjectInfo]) -> None:
        scene = self.server.scene
        scene.set_up_direction("+z")
        scene.add_grid("/ground", width=8.0, height=8.0, plane="xy")
        self._aim_camera(np.zeros(3), np.eye(3))
        for i, info in enumerate(subjects):
            view = SubjectView(info, SUBJECT_COLOURS[i % len(SUBJECT_COLOURS)])
            self.subjects[info.name] = view
            if info.betas is not None:
                self._add_mesh(view, info.betas)
            self._add_plates(view)
        with self.server.gui.add_folder("Live"):
            self.readout = self.server.gui.add_markdown(readout_text(self._stats, self._frames()))

    def _needs_reshape(self, view: SubjectView, betas: np.ndarray) -> bool:
        """No mesh yet, or an uncalibrated subject's betas moved (and the last rebuild is old)."""
        if view.mesh is None:
            return True
        if view.info.betas is not None or time.monotonic() - view.reshaped_at < RESHAPE_EVERY_S:
            return False
        return betas.shape != view.betas.shape or np.abs(betas - view.betas).max() > BETAS_TOLERANCE

    def _add_mesh(self, view: SubjectView, betas: np.ndarray) -> None:
        """(Re)build the subject's rest mesh for ``betas`` and add it (replacing the old one)."""
        betas = np.asarray(betas, np.float32).copy()
        rest_pose = SMPLMotion(poses=np.zeros((1, 24, 3)), trans=np.zeros((1, 3)), betas=betas)
        rest = skin_motion(view.info.body, rest_pose)
        view.mesh = self.server.scene.add_mesh_skinned(
            f"/subjects/{_node_name(view.info.name)}/mesh",
            rest.vertices,
            rest.faces,
            bone_wxyzs=np.tile([1.0, 0.0, 0.0, 0.0], (24, 1)),
            bone_positions=rest.rest_joints,
            skin_weights=rest.weights,
            color=view.colour,
        )
        view.rest, view.betas, view.reshaped_at = rest, betas, time.monotonic()

    def _add_plates(self, view: SubjectView) -> None:
        """The subject's plates, none shown until seen."""
        n = len(view.info.marker_names)
        if n == 0:
            return
        root = f"/subjects/{_node_name(view.info.name)}"
        view.held_wxyz = np.tile(np.array([1.0, 0.0, 0.0, 0.0], np.float32), (n, 1))
        view.held_pos = np.zeros((n, 3), np.float32)
        view.ever = np.zeros(n, bool)
        view.observed = self.server.scene.add_batched_axes(
            f"{root}/plates",
            view.held_wxyz,
            view.held_pos,
            np.zeros(n, np.float32),
            axes_length=PLATE_AXIS_M,
            axes_radius=PLATE_AXIS_M * 0.08,
        )
        segments = np.zeros((3 * n, 2, 3), np.float32)
        view.missing = self.server.scene.add_line_segments(
            f"{root}/missing",
            segments,
            np.broadcast_to(np.array(MISSING_GREY, np.uint8), segments.shape).copy(),
            thickness=PLATE_AXIS_M * 0.1,
        )

    # ---------------------------------------------------------------------------- per pose
    def _pose_body(self, view: SubjectView, pose: LivePose) -> None:
        """The 24 bones at the pose's global joint rotations and posed joints (the mesh's
        betas, so bones and rest mesh agree)."""
        with torch.no_grad():
            joints, grot = view.info.body.pose_joints(pose.rotmats, view.betas, pose.trans)
            wxyz = roma.rotmat_to_unitquat(grot)[..., [3, 0, 1, 2]].cpu().numpy()
        joints = joints.cpu().numpy()
        for j, bone in enumerate(view.mesh.bones):
            bone.wxyz = wxyz[j]
            bone.position = joints[j]

    def _pose_plates(self, view: SubjectView, pose: LivePose) -> None:
        """Observed plates at full size, the others shrunk to nothing; the grey layer draws the
        others' axes where they were last seen (the rest collapse to zero-length segments)."""
        valid = np.asarray(pose.plates_valid, bool)
        if valid.any():
            rot = torch.as_tensor(np.asarray(pose.plates_rot[valid], np.float64))
            view.held_wxyz[valid] = roma.rotmat_to_unitquat(rot)[..., [3, 0, 1, 2]].numpy()
            view.held_pos[valid] = pose.plates_pos[valid]
        view.ever |= valid
        view.observed.batched_wxyzs = view.held_wxyz.copy()
        view.observed.batched_positions = view.held_pos.copy()
        view.observed.batched_scales = valid.astype(np.float32)
        segments = axis_segments(view.held_wxyz, view.held_pos, PLATE_AXIS_M).reshape(-1, 3, 2, 3)
        hide = valid | ~view.ever
        segments[hide, :, 1] = segments[hide, :, 0]
        view.missing.points = segments.reshape(-1, 2, 3)

    def _aim_camera(self, trans: np.ndarray, root_rot: np.ndarray) -> None:
        """Start new clients (and "Reset View") in front of a body at ``trans`` (m) turned by
        ``root_rot`` (3, 3) world-from-pelvis, whose front is SMPL's +z."""
        centre = np.asarray(trans, np.float64).copy()
        centre[2] = max(centre[2], 0.9)
        front = np.array([root_rot[0, 2], root_rot[1, 2], 0.0], np.float64)
        norm = np.linalg.norm(front)
        front = front / norm if norm > 1e-6 else np.array([0.0, -1.0, 0.0])
        side = np.array([-front[1], front[0], 0.0])
        self.server.initial_camera.look_at = tuple(centre)
        self.server.initial_camera.position = tuple(centre + 3.2 * front + 0.8 * side + [0, 0, 0.6])

    def _frames(self) -> dict[str, int]:
        return {name: view.frame for name, view in self.subjects.items()}


def readout_text(stats: LiveStats, frames: dict[str, int]) -> str:
    """The readout as a Markdown table: each subject's last frame number, frames posed, dropped
    and lost frames, and the latency's median and 99th percentile (ms) over ``stats``' window."""
    latencies = np.asarray(list(stats.latencies_ms), np.float64)
    p50, p99 = np.percentile(latencies, [50, 99]) if latencies.size else (np.nan, np.nan)
    rows = [
        (f"frame · {name}" if name else "frame", str(f) if f >= 0 else "–")
        for name, f in frames.items()
    ]
    rows += [
        ("frames posed", str(stats.processed)),
        ("dropped", str(stats.dropped)),
        ("lost", str(stats.lost)),
        ("latency p50", _ms(p50)),
        ("latency p99", _ms(p99)),
    ]
    return "\n".join(["| live | |", "|---|---:|", *(f"| {k} | {v} |" for k, v in rows)])


def _ms(value: float) -> str:
    return "–" if np.isnan(value) else f"{value:.1f} ms"


def _shown_host(host: str) -> str:
    """The host a browser on this machine opens for a server bound to ``host``."""
    return "localhost" if host in ("0.0.0.0", "::") else host


def _node_name(subject: str) -> str:
    """A scene-node name for a subject's name ("" : the stream's only subject)."""
    return subject.replace("/", "_") or "subject"
