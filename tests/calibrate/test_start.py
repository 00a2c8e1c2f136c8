"""The calibration fit's start: every plated bone follows its plate's turns (no data needed).

A body moves through random poses; each plated bone carries a plate turned by a random constant
rotation (any angle: offsets do not matter to a plate's turn). Started from the true pose in the
reference frame only (every other frame at rest), :func:`propagated_pose` must give every plated
bone its true global rotation in every frame where its plate is seen, share the turn between
plated bones among the unplated joints in between, and leave a frame where a plate is unseen as
it was.
"""

from __future__ import annotations

import roma
import torch

from rbmcap.calibrate.start import propagated_pose
from rbmcap.geometry.kinematics import local_to_global

BONES = [15, 9, 16, 18, 20, 1, 4, 7, 17, 19, 21, 2, 5, 8]
"""The bones carrying rbm14's plates (head, chest, arms, legs; no pelvis plate)."""
FRAMES = 12


def _scene(seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    dt = torch.float64
    local = roma.rotvec_to_rotmat(0.6 * torch.randn(FRAMES, 24, 3, generator=gen, dtype=dt))
    glob = local_to_global(local)
    offsets = roma.rotvec_to_rotmat(2.5 * torch.randn(len(BONES), 3, generator=gen, dtype=dt))
    rot = glob[:, BONES] @ offsets
    valid = torch.ones(FRAMES, len(BONES), dtype=torch.bool)
    valid[5, BONES.index(18)] = False  # left forearm unseen in frame 5
    start = torch.eye(3, dtype=dt).expand(FRAMES, 24, 3, 3).clone()
    start[0] = local[0]  # the reference frame (the first seeing every plate) is right
    start[:, 0] = local[:, 0]  # the root (unplated) is known in every frame
    return local, glob, rot, valid, start


def test_plated_bones_follow_their_plates_from_the_reference_frame():
    _, glob, rot, valid, start = _scene()
    out = local_to_global(propagated_pose(start, rot, valid, BONES))
    for i, b in enumerate(BONES):
        seen = valid[:, i]
        err = (out[seen, b] - glob[seen, b]).abs().max()
        assert err < 1e-9, f"bone {b}: global rotation off by {float(err):.2e}"


def test_unplated_joints_share_the_turn_between_plated_bones():
    _, _, rot, valid, start = _scene()
    out = propagated_pose(start, rot, valid, BONES)
    # spine1, spine2 and spine3 (plated) share the pelvis-to-chest turn; neck and head share
    # the chest-to-head turn
    for chain in ((3, 6, 9), (12, 15)):
        for j in chain[1:]:
            assert torch.allclose(out[:, chain[0]], out[:, j], atol=1e-9), chain


def test_a_frame_where_a_plate_is_unseen_keeps_the_start_there():
    _, glob, rot, valid, start = _scene()
    out = local_to_global(propagated_pose(start, rot, valid, BONES))
    began = local_to_global(start)
    forearm = 18
    # elbow unseen in frame 5: its global rotation stays where the start (and the upper arm's
    # turn) put it, not where the plate's (unknown) turn would
    assert not torch.allclose(out[5, forearm], glob[5, forearm], atol=1e-3)
    upper = local_to_global(propagated_pose(start, rot, valid, BONES))[5, 16]
    expected = upper @ (began[5, 16].transpose(-1, -2) @ began[5, forearm])
    assert torch.allclose(out[5, forearm], expected, atol=1e-9)
