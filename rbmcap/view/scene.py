"""The viser scene of a view: per body layer a skinned mesh and a skeleton in the layer's colour,
per plate layer the observed plates as small coordinate frames and the missing ones greyed out;
:meth:`ViewScene.show_step` poses everything at one timeline step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rbmcap.view.layers import ViewContent
from rbmcap.view.plates import axis_segments, held_poses
from rbmcap.view.skinning import SkinnedMesh, bone_segments
from rbmcap.view.timeline import layer_frames, timeline_steps

if TYPE_CHECKING:
    import viser

PLATE_AXIS_M = 0.07
"""Length of a plate frame's axes: a plate is a few centimetres across."""

MISSING_GREY = (170, 170, 170)
SKELETON_THICKNESS_M = 0.012


@dataclass
class _BodyNodes:
    key: str
    root: viser.FrameHandle
    mesh: viser.MeshSkinnedHandle
    skeleton: viser.LineSegmentsHandle
    frames: np.ndarray
    skinned: SkinnedMesh


@dataclass
class _PlateNodes:
    key: str
    observed: viser.BatchedAxesHandle
    missing: viser.LineSegmentsHandle
    frames: np.ndarray
    wxyz: np.ndarray
    pos: np.ndarray
    valid: np.ndarray
    ever: np.ndarray


class ViewScene:
    """The scene nodes of ``content`` on ``server`` (a viser server), posed per timeline step.

    Args:
        server: a ``viser.ViserServer``.
        content: the layers (:func:`rbmcap.view.layers.load_view`).
        meshes: body key → its :class:`SkinnedMesh`.
    """

    def __init__(self, server, content: ViewContent, meshes: dict[str, SkinnedMesh]) -> None:
        self.server = server
        self.content = content
        self.fps = content.fps
        self.steps = timeline_steps(self.fps, content.duration_s)
        server.scene.set_up_direction("+z")
        server.scene.add_grid("/ground", width=8.0, height=8.0, plane="xy")
        self.bodies = [self._add_body(layer, meshes[layer.key]) for layer in content.bodies]
        self.plates = [self._add_plates(layer) for layer in content.plates]
        self._frame_camera()
        self.show_step(0)

    def joints_per_step(self) -> dict[str, np.ndarray]:
        """Body key → (steps, 24, 3) joints shown at each timeline step (metres)."""
        return {b.key: b.skinned.joints[b.frames] for b in self.bodies}

    def toggles(self) -> list[tuple[str, object]]:
        """(label, scene node) of every layer a user can show or hide, in drawing order."""
        out = []
        for b, layer in zip(self.bodies, self.content.bodies, strict=True):
            out += [(f"{layer.label}: mesh", b.mesh), (f"{layer.label}: skeleton", b.skeleton)]
        for p, layer in zip(self.plates, self.content.plates, strict=True):
            out += [(f"{layer.label}: plates", p.observed), (f"{layer.label}: missing", p.missing)]
        return out

    def show_step(self, step: int) -> None:
        """Pose every layer as it is at timeline step ``step`` (clamped to the timeline)."""
        step = int(np.clip(step, 0, self.steps - 1))
        with self.server.atomic():
            for b in self.bodies:
                f = b.frames[step]
                for j, bone in enumerate(b.mesh.bones):
                    bone.wxyz = b.skinned.bone_wxyz[f, j]
                    bone.position = b.skinned.joints[f, j]
                b.skeleton.points = bone_segments(b.skinned.joints[f])
            for p in self.plates:
                self._pose_plates(p, p.frames[step])

    def spread(self, metres: float) -> None:
        """Lay the bodies side by side: body i moved i × ``metres`` along the camera's right
        (0: all overlaid, where the plates are)."""
        for i, b in enumerate(self.bodies):
            b.root.position = tuple(self._side * metres * i)
        self._aim_camera(metres * max(len(self.bodies) - 1, 0))

    def _add_body(self, layer, skinned: SkinnedMesh) -> _BodyNodes:
        name = f"/bodies/{layer.key}"
        root = self.server.scene.add_frame(name, show_axes=False)
        mesh = self.server.scene.add_mesh_skinned(
            f"{name}/mesh",
            skinned.vertices,
            skinned.faces,
            bone_wxyzs=np.tile([1.0, 0.0, 0.0, 0.0], (24, 1)),
            bone_positions=skinned.rest_joints,
            skin_weights=skinned.weights,
            color=layer.colour,
        )
        segments = bone_segments(skinned.joints[0])
        darker = tuple(int(c * 0.6) for c in layer.colour)
        skeleton = self.server.scene.add_line_segments(
            f"{name}/skeleton",
            segments,
            np.broadcast_to(np.array(darker, np.uint8), segments.shape).copy(),
            thickness=SKELETON_THICKNESS_M,
        )
        frames = layer_frames(self.steps, self.fps, layer.fps, layer.frames)
        return _BodyNodes(layer.key, root, mesh, skeleton, frames, skinned)

    def _add_plates(self, layer) -> _PlateNodes:
        wxyz, pos, ever = held_poses(layer.pos, layer.rot, layer.valid)
        n = len(layer.names)
        name = f"/plates/{layer.key}"
        observed = self.server.scene.add_batched_axes(
            f"{name}/observed",
            wxyz[0],
            pos[0],
            np.ones(n, np.float32),
            axes_length=PLATE_AXIS_M,
            axes_radius=PLATE_AXIS_M * 0.08,
        )
        segments = axis_segments(wxyz[0], pos[0], PLATE_AXIS_M)
        missing = self.server.scene.add_line_segments(
            f"{name}/missing",
            segments,
            np.broadcast_to(np.array(MISSING_GREY, np.uint8), segments.shape).copy(),
            thickness=PLATE_AXIS_M * 0.1,
        )
        frames = layer_frames(self.steps, self.fps, layer.fps, layer.frames)
        return _PlateNodes(layer.key, observed, missing, frames, wxyz, pos, layer.valid, ever)

    def _pose_plates(self, p: _PlateNodes, f: int) -> None:
        """Observed plates at full size, the others shrunk to nothing; the missing layer draws
        the others' axes in grey (observed ones collapse to zero-length segments)."""
        valid = p.valid[f]
        p.observed.batched_wxyzs = p.wxyz[f]
        p.observed.batched_positions = p.pos[f]
        p.observed.batched_scales = valid.astype(np.float32)
        segments = axis_segments(p.wxyz[f], p.pos[f], PLATE_AXIS_M).reshape(-1, 3, 2, 3)
        hide = valid | ~p.ever
        segments[hide, :, 1] = segments[hide, :, 0]
        p.missing.points = segments.reshape(-1, 2, 3)

    def _frame_camera(self) -> None:
        """Start new clients looking at the first frame, in front of the first body (SMPL's
        canonical front is +z, turned into the world by the root's rotation)."""
        points = [b.skinned.joints[b.frames[0]] for b in self.bodies]
        points += [p.pos[p.frames[0]][p.ever] for p in self.plates]
        centre = np.concatenate(points).mean(axis=0) if points else np.zeros(3)
        centre[2] = max(float(centre[2]), 0.9)
        front = np.array([0.0, -1.0, 0.0])
        if self.bodies:
            w, x, y, z = self.bodies[0].skinned.bone_wxyz[self.bodies[0].frames[0], 0]
            front = np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 0.0])  # R @ (0, 0, 1)
            front = front / max(np.linalg.norm(front), 1e-6)
        self._centre, self._front = centre, front
        self._side = np.array([-front[1], front[0], 0.0])
        self._aim_camera(0.0)

    def _aim_camera(self, width: float) -> None:
        """Point new clients' camera at the middle of a row of bodies ``width`` (m) wide,
        stepping back as far as the row is wide."""
        centre = self._centre + self._side * width / 2
        eye = centre + (3.2 + 0.9 * width) * self._front + 0.8 * self._side + np.array([0, 0, 0.6])
        self.server.initial_camera.look_at = tuple(centre)
        self.server.initial_camera.position = tuple(eye)
