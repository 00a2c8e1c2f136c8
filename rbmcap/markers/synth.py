"""Motion → virtual RBM observations: pos (T,N,3), rot (T,N,3,3), valid (T,N), plus joints.

The work per frame is the sparse skinning of the marker vertices and their one-rings, the plate
frames (:mod:`rbmcap.markers.plates`) and the realism models (:mod:`rbmcap.markers.realism`).
Frames are processed in fixed-size chunks so memory stays flat however long the motion is, and
every chunk's result depends only on its own frames, the sequence key and the seed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import roma
import torch

from rbmcap.errors import DataError
from rbmcap.markers.markerset import DEFAULT_MARKERS, MarkerSet, load_marker_set
from rbmcap.markers.plates import PLATE_STANDOFF, plate_frames, plate_topology
from rbmcap.markers.realism import (
    Perturbation,
    RealismConfig,
    apply_perturbation,
    load_realism,
    sample_perturbation,
)

CHUNK_FRAMES = 1024
"""Frames per synthesis chunk: amortises per-call overhead, bounds memory. A fixed constant: the
last bits of a frame's result may depend on where chunk boundaries fall."""


@dataclass
class Observations:
    """Virtual captures of one motion (float32, metres, world frame).

    Attributes:
        pos: (T, N, 3) plate origins; rot: (T, N, 3, 3) world-from-plate rotations (identity for
            point-marker sets); valid: (T, N) bool; joints: (T, 24, 3) SMPL joint positions.
    """

    pos: np.ndarray
    rot: np.ndarray
    valid: np.ndarray
    joints: np.ndarray

    def __len__(self) -> int:
        return int(self.pos.shape[0])


def check_motion_arrays(
    poses, trans=None, betas=None, name: str = "motion"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate and normalise motion arrays.

    Args:
        poses: (T, 24, 3) or (T, 72) axis-angle; trans: (T, 3) metres (default zeros);
            betas: (B,) shape (default empty, i.e. the mean shape).

    Returns:
        poses (T, 24, 3), trans (T, 3), betas (B,) as float32 arrays.

    Raises:
        DataError: wrong shapes, no frames, or NaN/inf values (the message names the array and
            the first bad frame).
    """
    p = np.asarray(poses, dtype=np.float32)
    if p.ndim == 2 and p.shape[1] == 72:
        p = p.reshape(-1, 24, 3)
    if p.ndim != 3 or p.shape[1:] != (24, 3):
        raise DataError(f"{name}: poses of shape {p.shape}, expected (T, 24, 3) or (T, 72)")
    if p.shape[0] == 0:
        raise DataError(f"{name}: the motion has no frames")
    t = np.zeros((p.shape[0], 3), np.float32) if trans is None else np.asarray(trans, np.float32)
    if t.shape != (p.shape[0], 3):
        raise DataError(f"{name}: trans of shape {t.shape}, expected ({p.shape[0]}, 3)")
    b = np.zeros(0, np.float32) if betas is None else np.asarray(betas, np.float32).reshape(-1)
    for label, arr in (("poses", p), ("trans", t)):
        bad = ~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)
        if bad.any():
            raise DataError(
                f"{name}: {label} has NaN or infinite values (first at frame {int(np.argmax(bad))})"
            )
    if not np.isfinite(b).all():
        raise DataError(f"{name}: betas has NaN or infinite values")
    return p, t, b


class Synthesizer:
    """Turns SMPL motions into virtual marker observations on one body with one marker set.

    Args:
        body: a :class:`rbmcap.body.BodyModel`.
        markers: a :class:`MarkerSet` or its name / YAML path.
        realism: a :class:`RealismConfig` or preset name / YAML path (default ``none``).
        standoff: plate distance from the skin along the normal (m).
        chunk_frames: frames per chunk (results do not depend on it).
    """

    def __init__(
        self,
        body,
        markers: MarkerSet | str = DEFAULT_MARKERS,
        realism: RealismConfig | str = "none",
        *,
        standoff: float = PLATE_STANDOFF,
        chunk_frames: int = CHUNK_FRAMES,
    ) -> None:
        self.body = body
        self.markers = markers if isinstance(markers, MarkerSet) else load_marker_set(markers)
        self.realism = load_realism(realism)
        self.standoff = float(standoff)
        self.chunk_frames = int(chunk_frames)
        self.vertex_ids = self.markers.resolve(body)
        self.topology = plate_topology(
            body.faces.cpu().numpy(), body.v_template.detach().cpu().numpy(), self.vertex_ids
        )

    @property
    def num_markers(self) -> int:
        return len(self.markers)

    def perturbation(self, num_frames: int, fps: float, seed: int, key: str) -> Perturbation:
        """The realism draw of the sequence ``key`` (see :func:`sample_perturbation`)."""
        return sample_perturbation(self.realism, num_frames, self.num_markers, fps, seed, key)

    def chunks(
        self, poses, trans=None, betas=None, *, fps: float = 60.0, seed: int = 0, key: str = ""
    ) -> Iterator[tuple[int, Observations]]:
        """Synthesise chunk by chunk: yields (first frame, observations of the chunk).

        Args:
            poses: (T, 24, 3) axis-angle local rotations (joint 0 global, world Z up).
            trans: (T, 3) root translation (m); betas: (B,) shape.
            fps: frame rate of the motion (the soft-tissue spectrum and gap durations use it).
            seed: run seed; key: sequence name (realism draws depend on both, nothing else).
        """
        p, t, b = check_motion_arrays(poses, trans, betas, key or "motion")
        num = p.shape[0]
        pert = self.perturbation(num, fps, seed, key) if self.realism.enabled else None
        device = self.body.v_template.device
        betas_t = torch.as_tensor(b, device=device)
        for start in range(0, num, self.chunk_frames):
            stop = min(num, start + self.chunk_frames)
            # inference mode only around the work: a generator must not leave it on for its
            # caller between chunks
            with torch.inference_mode():
                obs = self._chunk(p[start:stop], t[start:stop], betas_t, pert, start)
            yield start, obs

    def _chunk(
        self,
        poses: np.ndarray,
        trans: np.ndarray,
        betas: torch.Tensor,
        pert: Perturbation | None,
        start: int,
    ) -> Observations:
        device = betas.device
        rc = roma.rotvec_to_rotmat(torch.from_numpy(poses).to(device))
        tc = torch.from_numpy(trans).to(device)
        # Frames from untranslated vertices: the reference face is small, and float32 rounding
        # far from the origin would otherwise tilt the in-plane axes.
        skinned, joints = self.body.skin_vertices_and_joints(self.topology.skin_ids, rc, betas)
        joints = joints + tc[:, None, :]
        pos, rot = plate_frames(skinned, self.topology, self.standoff)
        pos = pos + tc[:, None, :]
        if pert is not None:
            pos, rot, valid = apply_perturbation(pert, start, pos, rot)
        else:
            valid = torch.ones(pos.shape[:2], dtype=torch.bool)
        if not self.markers.is_rbm:  # point markers have no orientation
            rot = torch.eye(3, dtype=rot.dtype, device=device).expand_as(rot)
        return Observations(
            pos=_numpy32(pos),
            rot=_numpy32(rot.contiguous()),
            valid=valid.cpu().numpy(),
            joints=_numpy32(joints),
        )

    def __call__(
        self, poses, trans=None, betas=None, *, fps: float = 60.0, seed: int = 0, key: str = ""
    ) -> Observations:
        """Whole-sequence observations (see :meth:`chunks` for the arguments)."""
        parts = [o for _, o in self.chunks(poses, trans, betas, fps=fps, seed=seed, key=key)]
        return Observations(
            pos=np.concatenate([o.pos for o in parts]),
            rot=np.concatenate([o.rot for o in parts]),
            valid=np.concatenate([o.valid for o in parts]),
            joints=np.concatenate([o.joints for o in parts]),
        )

    def synthesize_motion(self, motion, *, seed: int = 0) -> Observations:
        """Observations of an :class:`rbmcap.motion.SMPLMotion` (``poses``, ``trans``, ``betas``,
        ``fps``, ``name``)."""
        return self(
            motion.poses, motion.trans, motion.betas, fps=motion.fps, seed=seed, key=motion.name
        )


def _numpy32(x: torch.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy().astype(np.float32, copy=False)


def synthesize(
    body,
    poses,
    trans=None,
    betas=None,
    *,
    markers: MarkerSet | str = DEFAULT_MARKERS,
    realism: RealismConfig | str = "none",
    fps: float = 60.0,
    seed: int = 0,
    key: str = "",
) -> Observations:
    """One-shot convenience: build a :class:`Synthesizer` and run it on one motion."""
    return Synthesizer(body, markers, realism)(poses, trans, betas, fps=fps, seed=seed, key=key)
