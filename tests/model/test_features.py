"""Input features: invariances and masking."""

from __future__ import annotations

import math

import pytest
import roma
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rbmcap.model.features import FEATURE_KINDS, FeatureEncoder

# rbm14's tree: chest (1) is the root.
PARENTS = [1, -1, 1, 2, 3, 1, 5, 6, 1, 8, 9, 1, 11, 12]


@pytest.fixture(autouse=True)
def _seeded():
    """Inputs come from explicit generators; the global RNG is seeded too, so nothing a test
    calls can draw an unseeded number."""
    torch.manual_seed(0)


def _inputs(seed: int, b: int = 2, t: int = 6, n: int = 14):
    gen = torch.Generator().manual_seed(seed)
    pos = torch.randn(b, t, n, 3, generator=gen)
    rot = roma.rotvec_to_rotmat(torch.randn(b, t, n, 3, generator=gen))
    valid = torch.ones(b, t, n, dtype=torch.bool)
    return pos, rot, valid


def _encoder(kind: str) -> FeatureEncoder:
    rest = roma.rotvec_to_rotmat(torch.randn(14, 3, generator=torch.Generator().manual_seed(9)))
    return FeatureEncoder(kind, PARENTS, rest)


@settings(max_examples=25, deadline=None)
@given(
    yaw=st.floats(-math.pi, math.pi),
    shift=st.tuples(*[st.floats(-5, 5)] * 3),
    seed=st.integers(0, 1000),
)
@pytest.mark.parametrize("kind", ["canonical", "kinematic", "reach"])
def test_heading_features_are_invariant_to_global_yaw_and_translation(kind, yaw, shift, seed):
    enc = _encoder(kind)
    pos, rot, valid = _inputs(seed)
    turn = roma.rotvec_to_rotmat(torch.tensor([0.0, 0.0, yaw]))
    moved_pos = (turn @ pos[..., None])[..., 0] + torch.tensor(shift)
    x, _ = enc(pos, rot, valid)
    # the root height is the one absolute feature: a vertical shift must show up there only
    y, _ = enc(moved_pos, turn @ rot, valid)
    assert torch.allclose(x[..., :-1], y[..., :-1], atol=1e-4)
    assert torch.allclose(x[..., -1] + shift[2], y[..., -1], atol=1e-4)


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_masking_a_leaf_marker_leaves_the_others_unchanged(kind):
    enc = _encoder(kind)
    pos, rot, valid = _inputs(1)
    x, _ = enc(pos, rot, valid)
    masked = valid.clone()
    masked[..., 4] = False  # left hand: a leaf of the tree
    y, _ = enc(pos, rot, masked)
    per = enc.dim // 14 if kind != "paper" else 10
    changed = ((x - y).abs().amax(dim=(0, 1)) > 1e-6).nonzero().flatten()
    assert changed.numel() > 0
    assert changed.min() >= 4 * per and changed.max() < 5 * per
    # the missing marker is flagged, not silently zero
    mask_channel = y.reshape(2, 6, -1)[..., 5 * per - 1]
    assert (mask_channel == 0).all()


@pytest.mark.parametrize("kind", FEATURE_KINDS)
def test_decode_inverts_encode_of_the_root(kind):
    enc = _encoder(kind)
    pos, rot, valid = _inputs(2)
    _, ctx = enc(pos, rot, valid)
    gen = torch.Generator().manual_seed(3)
    world_rot = roma.rotvec_to_rotmat(torch.randn(2, 6, 3, generator=gen))
    trans = torch.randn(2, 6, 3, generator=gen)
    back = FeatureEncoder.decode_root(*FeatureEncoder.encode_root(world_rot, trans, ctx), ctx)
    assert torch.allclose(back[0], world_rot, atol=1e-5)
    assert torch.allclose(back[1], trans, atol=1e-5)


def test_kinematic_features_recover_a_rigidly_carried_bone_rotation():
    """A plate fixed to its bone gives the bone's global rotation exactly."""
    gen = torch.Generator().manual_seed(4)
    rest = roma.rotvec_to_rotmat(torch.randn(14, 3, generator=gen))
    enc = FeatureEncoder("kinematic", PARENTS, rest)
    bone = roma.rotvec_to_rotmat(torch.randn(1, 1, 14, 3, generator=gen))
    pos = torch.randn(1, 1, 14, 3, generator=gen)
    x, ctx = enc(pos, bone @ rest, torch.ones(1, 1, 14, dtype=torch.bool))
    heading_bone = ctx.frame[..., None, :, :].transpose(-1, -2) @ bone
    got = x.reshape(1, 1, -1)[..., : 14 * 16].reshape(1, 1, 14, 16)[..., 3:9]
    expected = heading_bone[..., :, :2].transpose(-1, -2).reshape(1, 1, 14, 6)
    assert torch.allclose(got, expected, atol=1e-5)


def _reach_block(x: torch.Tensor) -> torch.Tensor:
    """The ``reach`` features' arms (..., 14, 3) out of their per-frame vector."""
    return x[..., : 14 * 19].unflatten(-1, (14, 19))[..., 15:18]


def test_reach_is_each_plates_arm_in_its_parents_bone_frame():
    """Plates rigid on their bones: the arm from the parent plate to each plate, turned into the
    parent's bone frame, whatever the body's global rotation and place."""
    gen = torch.Generator().manual_seed(5)
    rest = roma.rotvec_to_rotmat(torch.randn(14, 3, generator=gen))
    enc = FeatureEncoder("reach", PARENTS, rest)
    bone = roma.rotvec_to_rotmat(torch.randn(1, 1, 14, 3, generator=gen))
    pos = torch.randn(1, 1, 14, 3, generator=gen)
    valid = torch.ones(1, 1, 14, dtype=torch.bool)
    x, _ = enc(pos, bone @ rest, valid)
    parent = torch.tensor([p if p >= 0 else i for i, p in enumerate(PARENTS)])
    arm = pos - pos[..., parent, :]
    expected = (bone[..., parent, :, :].transpose(-1, -2) @ arm[..., None])[..., 0]
    assert torch.allclose(_reach_block(x), expected, atol=1e-5)
    assert _reach_block(x)[..., 1, :].abs().max() == 0  # the root has no parent
    # any global rotation (not only a yaw) and shift leaves the arms as they are
    turn = roma.rotvec_to_rotmat(torch.randn(3, generator=gen))
    moved = (turn @ pos[..., None])[..., 0] + torch.randn(3, generator=gen)
    y, _ = enc(moved, turn @ bone @ rest, valid)
    assert torch.allclose(_reach_block(y), expected, atol=1e-5)
    # a hidden parent hides its children's arms
    valid[..., 3] = False  # left forearm: parent of the left hand
    z, _ = enc(pos, bone @ rest, valid)
    assert _reach_block(z)[..., 4, :].abs().max() == 0


def test_unknown_feature_kind_is_a_config_error():
    from rbmcap.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown input features"):
        FeatureEncoder("fancy", PARENTS)
