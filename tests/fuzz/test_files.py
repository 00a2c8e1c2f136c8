"""Fuzzing of the BVH reader, of ``rbmcap motion from-bvh`` on fuzzed clips, and of
checkpoint loading (``Predictor.from_checkpoint``): every mutated input is read or refused with an
:class:`~rbmcap.errors.RBMCapError`, in bounded time, leaving no partial output
(:func:`helpers.fuzzing.check_reader`). Each bug the fuzzing found has a plain regression test
below, named after it, with the smallest input that showed it.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path

import numpy as np
import pytest
import roma
import torch
from helpers.fuzzing import COMMAND_EXAMPLES, check_reader, fuzz_settings, mutated
from helpers.motions import TINY_BVH
from hypothesis import given
from hypothesis import strategies as st

from rbmcap.errors import DataError, FormatError, ModelError, RBMCapError
from rbmcap.motion import SMPLMotion, read_bvh, write_bvh

# ------------------------------------------------------------------------------------- seeds
# A CMU-like skeleton (cgspeed's BVH conversion: the joints the default ``cmu`` joint map names,
# with its zero-length helper joints), offsets in CMU units rounded from subject 131.
CMU_SKELETON = [
    ("Hips", -1, (0, 0, 0)),
    ("LHipJoint", 0, (0, 0, 0)),
    ("LeftHip", 1, (1.25, -1.64, 0.72)),
    ("LeftKnee", 2, (2.49, -6.85, 0)),
    ("LeftAnkle", 3, (2.37, -6.51, 0)),
    ("LeftToe", 4, (0.15, -0.41, 2.21)),
    ("RHipJoint", 0, (0, 0, 0)),
    ("RightHip", 6, (-1.18, -1.64, 0.72)),
    ("RightKnee", 7, (-2.47, -6.77, 0)),
    ("RightAnkle", 8, (-2.38, -6.55, 0)),
    ("RightToe", 9, (-0.17, -0.48, 2.03)),
    ("lowerback", 0, (0, 0, 0)),
    ("Chest", 11, (-0.02, 1.99, 0)),
    ("Chest2", 12, (0, 1.99, 0)),
    ("lowerneck", 13, (0, 0, 0)),
    ("Neck", 14, (0, 1.61, 0.11)),
    ("Head", 15, (0, 1.6, 0)),
    ("LeftCollar", 13, (0, 0, 0)),
    ("LeftShoulder", 17, (3.05, 1.47, 0)),
    ("LeftElbow", 18, (0, -4.25, 0)),
    ("LeftWrist", 19, (0, -3.28, 0)),
    ("lhand", 20, (0, 0, 0)),
    ("LFingers", 21, (0, -0.66, 0)),
    ("RightCollar", 13, (0, 0, 0)),
    ("RightShoulder", 23, (-2.84, 1.32, -0.23)),
    ("RightElbow", 24, (0, -4.46, 0)),
    ("RightWrist", 25, (0, -3.44, 0)),
    ("rhand", 26, (0, 0, 0)),
    ("RFingers", 27, (0, -0.62, 0)),
]


def cmu_like_bvh_text(num_frames: int = 3, seed: int = 0) -> str:
    """A valid BVH on :data:`CMU_SKELETON`: small random joint rotations, the hips 17 units
    up, 120 Hz (the clips of the CMU database, without needing them)."""
    gen = torch.Generator().manual_seed(seed)
    names = [n for n, _, _ in CMU_SKELETON]
    parents = [p for _, p, _ in CMU_SKELETON]
    offsets = np.array([o for _, _, o in CMU_SKELETON], dtype=np.float64)
    rotvecs = 0.2 * torch.randn(num_frames, len(names), 3, generator=gen, dtype=torch.float64)
    local = roma.rotvec_to_rotmat(rotvecs).numpy()
    root = np.stack(
        [np.linspace(0, 3, num_frames), np.full(num_frames, 17.0), np.zeros(num_frames)], axis=1
    )
    with tempfile.TemporaryDirectory() as folder:
        path = write_bvh(Path(folder) / "cmu.bvh", names, parents, offsets, local, root, 1 / 120)
        return path.read_text()


TINY_SEED = TINY_BVH.encode()
CMU_SEED = cmu_like_bvh_text().encode()
BVH_SEEDS = st.sampled_from([TINY_SEED, CMU_SEED])


def _read_bvh_fully(path: Path) -> None:
    """Read ``path`` and use what a caller uses: the rate, the rest pose and forward kinematics;
    what is accepted must be finite numbers."""
    bvh = read_bvh(path)
    assert np.isfinite(bvh.frames).all() and np.isfinite(bvh.offsets).all()
    assert bvh.num_frames > 0 and 0 < bvh.fps < float("inf")
    bvh.rest_positions()
    bvh.global_transforms()


def test_the_seeds_are_valid(tmp_path):
    for seed in (TINY_SEED, CMU_SEED):
        path = tmp_path / "seed.bvh"
        path.write_bytes(seed)
        assert check_reader("bvh-seed", lambda p=path: _read_bvh_fully(p)) == "accepted"


# ------------------------------------------------------------------------------- BVH reader
def _fuzz_bvh(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.bvh"
    path.write_bytes(data)
    check_reader("bvh", lambda: _read_bvh_fully(path))


@pytest.mark.acceptance
@fuzz_settings()
@given(data=BVH_SEEDS.flatmap(mutated))
def test_fuzz_bvh_reader(tmp_path, data):
    _fuzz_bvh(tmp_path, data)


# ----------------------------------------------------------------------- from-bvh command line
def _from_bvh(clip: Path, out: Path) -> int:
    """``rbmcap motion from-bvh CLIP --joint-map cmu --out OUT`` in-process; a non-zero exit
    becomes a refusal (so check_reader requires ``out`` to be absent), and its one-line message
    must name the clip."""
    from rbmcap.cli.main import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["motion", "from-bvh", str(clip), "--joint-map", "cmu", "--out", str(out)])
    if code != 0:
        assert code in (3, 4, 5), (code, err.getvalue())
        assert str(clip) in err.getvalue(), err.getvalue()

        class Refused(RBMCapError):
            pass

        raise Refused(err.getvalue())
    return code


def _fuzz_retarget_cli(tmp_path: Path, data: bytes) -> None:
    clip, out = tmp_path / "clip.bvh", tmp_path / "out" / "clip.npz"
    out.unlink(missing_ok=True)
    clip.write_bytes(data)
    check_reader("bvh-retarget-cli", lambda: _from_bvh(clip, out), [out], SMPLMotion.load)


@pytest.fixture(scope="module")
def _standin_built(standin):
    """The stand-in body the command line loads, built once (into the session's cache), and the
    command line's modules imported."""
    import rbmcap.cli.main
    import rbmcap.motion.retarget

    rbmcap.cli.main.build_parser()
    return standin


def test_the_cmu_seed_retargets(tmp_path, _standin_built):
    _fuzz_retarget_cli(tmp_path, CMU_SEED)
    assert SMPLMotion.load(tmp_path / "out" / "clip.npz").num_frames > 0


@pytest.mark.acceptance
@fuzz_settings(COMMAND_EXAMPLES)
@given(data=st.just(CMU_SEED).flatmap(mutated))
def test_fuzz_bvh_retarget_cli(tmp_path, _standin_built, data):
    _fuzz_retarget_cli(tmp_path, data)


# --------------------------------------------------------------------------------- checkpoints
GARBAGE = [
    None,
    True,
    -1,
    0,
    -(2**40),
    2**40,
    10**6,
    70_000,
    1.5,
    float("nan"),
    float("inf"),
    "",
    "x",
    "mlp",
    "gru",
    [],
    [1, 2],
    {},
    {"name": "no-such-net"},
    "nan",
]


@st.composite
def checkpoint_mutation(draw, ckpt: dict) -> dict:
    """A structured mutation of a loaded checkpoint dict (a copy): a key deleted, a
    hyper-parameter (or network hyper-parameter) replaced by garbage, a weight dropped,
    reshaped or poisoned with NaN/Inf."""
    ckpt = dict(ckpt)
    hp = dict(ckpt["hyper_parameters"]["model"])
    state = dict(ckpt["state_dict"])
    kind = draw(
        st.sampled_from(
            [
                "del_top",
                "del_hp",
                "hp",
                "net",
                "markers",
                "del_weight",
                "reshape",
                "poison",
                "dtype",
                "not_tensor",
            ]
        )
    )
    keys = sorted(state)
    if kind == "del_top":
        del ckpt[draw(st.sampled_from(sorted(ckpt)))]
        return ckpt
    if kind == "del_hp":
        del hp[draw(st.sampled_from(sorted(hp)))]
    elif kind == "hp":
        hp[draw(st.sampled_from(sorted(hp)))] = draw(st.sampled_from(GARBAGE))
    elif kind == "net":
        net = dict(hp["network"])
        net[draw(st.sampled_from([*sorted(net), "extra"]))] = draw(st.sampled_from(GARBAGE))
        hp["network"] = net
    elif kind == "markers":
        markers = dict(hp["markers"])
        markers[draw(st.sampled_from(sorted(markers)))] = draw(st.sampled_from(GARBAGE))
        hp["markers"] = markers
    else:
        key = draw(st.sampled_from(keys))
        t = state[key]
        if kind == "del_weight":
            del state[key]
        elif kind == "reshape":
            state[key] = t.reshape(-1)[: draw(st.integers(0, max(t.numel() - 1, 0)))]
        elif kind == "poison" and t.numel() and t.is_floating_point():
            t = t.clone()
            t.view(-1)[draw(st.integers(0, t.numel() - 1))] = draw(
                st.sampled_from([float("nan"), float("inf"), float("-inf")])
            )
            state[key] = t
        elif kind == "dtype":
            state[key] = t.to(draw(st.sampled_from([torch.float64, torch.int64, torch.bool])))
        elif kind == "not_tensor":
            state[key] = draw(st.sampled_from(GARBAGE))
    ckpt["hyper_parameters"] = {**ckpt["hyper_parameters"], "model": hp}
    ckpt["state_dict"] = state
    return ckpt


@pytest.fixture(scope="module")
def ckpt_seed(checkpoint):
    """The tiny trained checkpoint without its optimiser state: its bytes and its dict (with the
    loading code imported, so that no input's time includes imports)."""
    import rbmcap.checkpoint
    import rbmcap.inference  # noqa: F401

    full = torch.load(checkpoint, weights_only=True)
    keep = ("state_dict", "hyper_parameters", "epoch", "global_step", "pytorch-lightning_version")
    small = {k: full[k] for k in keep if k in full}  # no optimiser state: smaller, faster
    buffer = io.BytesIO()
    torch.save(small, buffer)
    return buffer.getvalue(), small


def _load_predictor(spec: Path | str) -> None:
    """Load a checkpoint and answer a few frames: what loads must answer with finite numbers."""
    from rbmcap.inference import Predictor

    predictor = Predictor.from_checkpoint(spec)
    n = predictor.num_markers
    pos, rot = np.zeros((3, n, 3)), np.broadcast_to(np.eye(3), (3, n, 3, 3))
    out = predictor.predict(pos, rot, np.ones((3, n), bool))
    assert torch.isfinite(out.poses).all() and torch.isfinite(out.trans).all()


# A checkpoint named by a string that is not a file: NUL bytes, very long, odd characters.
CHECKPOINT_NAMES = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        [
            "",
            ".",
            "..",
            "/",
            "standin-rbm14\x00",
            "x" * 5000,
            "a/" * 3000,
            "standin-rbm14/../standin-rbm14",
            "~",
            "-",
            "\udcff",
        ]
    ),
)


def _fuzz_checkpoint(tmp_path: Path, ckpt_seed, data) -> None:
    raw, loaded = ckpt_seed
    path = tmp_path / "fuzz.ckpt"
    kind = data.draw(st.sampled_from(["bytes", "structure", "structure", "name"]))
    if kind == "name":
        name = data.draw(CHECKPOINT_NAMES)
        check_reader("checkpoint", lambda: _load_predictor(name))
        return
    if kind == "bytes":
        path.write_bytes(data.draw(mutated(raw, text=False)))
    else:
        torch.save(data.draw(checkpoint_mutation(loaded)), path)
    check_reader("checkpoint", lambda: _load_predictor(path))


@pytest.mark.acceptance
@fuzz_settings()
@given(data=st.data())
def test_fuzz_checkpoint_loading(tmp_path, ckpt_seed, data):
    _fuzz_checkpoint(tmp_path, ckpt_seed, data)


# ------------------------------------------------------------------------ regression tests
def _tiny(tmp_path: Path, old: str, new: str) -> Path:
    """:data:`TINY_BVH` with ``old`` replaced by ``new``, written as fuzz.bvh."""
    assert old in TINY_BVH
    path = tmp_path / "fuzz.bvh"
    path.write_text(TINY_BVH.replace(old, new, 1))
    return path


def test_bvh_regression_nan_offset_is_a_data_error_naming_its_line(tmp_path):
    # was: accepted, and every joint position below the hips became NaN
    path = _tiny(tmp_path, "OFFSET 0 0 0", "OFFSET nan 0 0")
    with pytest.raises(DataError, match=r"fuzz\.bvh:4:10: OFFSET value 'nan' is not a finite"):
        read_bvh(path)


def test_bvh_regression_nan_channel_count_is_a_format_error(tmp_path):
    # was: ValueError (cannot convert float NaN to integer)
    path = _tiny(tmp_path, "CHANNELS 6", "CHANNELS nan")
    with pytest.raises(FormatError, match=r"fuzz\.bvh:5:12: expected a non-negative integer"):
        read_bvh(path)


def test_bvh_regression_infinite_frame_count_is_a_format_error(tmp_path):
    # was: OverflowError (cannot convert float infinity to integer)
    path = _tiny(tmp_path, "Frames: 2", "Frames: inf")
    with pytest.raises(FormatError, match=r"fuzz\.bvh:17:9: expected a non-negative integer"):
        read_bvh(path)


def test_bvh_regression_subnormal_frame_time_is_a_format_error(tmp_path):
    # was: accepted, then OverflowError from BVH.fps (1 / 1e-320 is infinite)
    path = _tiny(tmp_path, "Frame Time: 0.5", "Frame Time: 1e-320")
    with pytest.raises(FormatError, match=r"fuzz\.bvh:18:13: expected a Frame Time between"):
        read_bvh(path)


def test_bvh_regression_huge_frame_time_is_a_format_error(tmp_path):
    # was: accepted (3 years per frame), and from-bvh then resampled that to 60 fps
    path = _tiny(tmp_path, "Frame Time: 0.5", "Frame Time: 99999999")
    with pytest.raises(FormatError, match=r"fuzz\.bvh:18:13: expected a Frame Time between"):
        read_bvh(path)


def test_bvh_regression_extra_value_in_a_frame_line_is_a_format_error(tmp_path):
    # was: accepted, every later value shifted one channel along (frame 1's root turned 90°
    # about Y instead of Z)
    path = _tiny(tmp_path, "1 2 3 0 0 0", "1 2 3 0 5 0 0")
    with pytest.raises(FormatError, match=r"fuzz\.bvh:19: frame 0 has 10 values, the hierarchy"):
        read_bvh(path)


def test_bvh_regression_nan_motion_value_is_a_data_error_naming_line_and_frame(tmp_path):
    # was: FormatError "motion data contains NaN or infinite values", naming neither
    path = _tiny(tmp_path, "0 0 0 90 0 0", "0 0 0 90 nan 0")
    with pytest.raises(DataError, match=r"fuzz\.bvh:20:10: frame 1: motion value 'nan' is not"):
        read_bvh(path)


def test_bvh_retarget_regression_single_frame_clip_retargets(tmp_path, _standin_built):
    # was: ValueError from np.gradient (the feet's speed needs two frames)
    text = CMU_SEED.decode().replace("Frames: 3", "Frames: 1")
    clip = tmp_path / "one.bvh"
    clip.write_text(
        text[: text.index("\n", text.index("Frame Time:")) + 1] + text.split("\n")[-3] + "\n"
    )  # the last frame only
    assert _from_bvh(clip, tmp_path / "one.npz") == 0
    assert SMPLMotion.load(tmp_path / "one.npz").num_frames == 1


def test_checkpoint_regression_overlong_name_is_a_model_error():
    # was: OSError (File name too long) from Path.is_file
    with pytest.raises(ModelError, match="no such checkpoint"):
        _load_predictor("x" * 5000)


def test_bvh_retarget_regression_huge_angle_is_a_data_error_naming_the_clip(
    tmp_path, _standin_built
):
    # was: exit 5 with "sequence 'clip', frame 2: poses contains NaN or infinite values": the
    # clip's path unnamed (the angle overflows to NaN in the retargeting maths)
    lines = CMU_SEED.decode().split("\n")
    cells = lines[-2].split()
    cells[-4] = "-1e308"
    clip = tmp_path / "clip.bvh"
    clip.write_text("\n".join([*lines[:-2], " ".join(cells), ""]))
    with pytest.raises(RBMCapError, match=r"clip\.bvh:172: frame 2: retargeting gives NaN"):
        _from_bvh(clip, tmp_path / "clip.npz")
    assert not (tmp_path / "clip.npz").exists()


def _changed_checkpoint(tmp_path: Path, ckpt_seed, change) -> Path:
    """The seed checkpoint with ``change(hyper_parameters, state_dict)`` applied (to copies),
    saved as bad.ckpt."""
    ckpt = dict(ckpt_seed[1])
    model = {
        k: (dict(v) if isinstance(v, dict) else v)
        for k, v in ckpt["hyper_parameters"]["model"].items()
    }
    ckpt["hyper_parameters"] = {**ckpt["hyper_parameters"], "model": model}
    ckpt["state_dict"] = dict(ckpt["state_dict"])
    change(model, ckpt["state_dict"])
    path = tmp_path / "bad.ckpt"
    torch.save(ckpt, path)
    return path


def test_checkpoint_regression_nan_weight_is_a_data_error_naming_the_file(tmp_path, ckpt_seed):
    # was: accepted, and every prediction was NaN
    def poison(hp, state):
        state["model.net.output_proj.weight"] = state["model.net.output_proj.weight"].clone()
        state["model.net.output_proj.weight"][0, 0] = float("nan")

    path = _changed_checkpoint(tmp_path, ckpt_seed, poison)
    with pytest.raises(
        DataError, match=r"bad\.ckpt: weight 'model\.net\.output_proj\.weight' has NaN"
    ):
        _load_predictor(path)


def test_checkpoint_regression_text_file_is_a_format_error(tmp_path):
    # was: pickle.UnpicklingError (weights-only unpickler: invalid load key) from torch.load
    path = tmp_path / "bad.ckpt"
    path.write_bytes(b"not a checkpoint\n")
    with pytest.raises(FormatError, match=r"bad\.ckpt: not an rbmcap checkpoint"):
        _load_predictor(path)


def test_checkpoint_regression_marker_names_not_a_list_is_a_model_error(tmp_path, ckpt_seed):
    # was: TypeError ('int' object is not iterable) in Predictor.__init__
    path = _changed_checkpoint(tmp_path, ckpt_seed, lambda hp, _: hp["markers"].update(names=0))
    with pytest.raises(
        ModelError, match=r"bad\.ckpt: hyper-parameter 'model\.markers' has an unusable"
    ):
        _load_predictor(path)


def test_checkpoint_regression_oversized_network_is_refused_before_it_is_built(tmp_path, ckpt_seed):
    # was: the network was built as described (70,000 wide: 20 GB) before its weights were
    # found not to fit
    path = _changed_checkpoint(
        tmp_path, ckpt_seed, lambda hp, _: hp["network"].update(hidden_dim=70_000)
    )
    with pytest.raises(ModelError, match=r"bad\.ckpt: network hyper-parameter hidden_dim=70000"):
        _load_predictor(path)


def test_checkpoint_regression_integer_weights_are_a_model_error(tmp_path, ckpt_seed):
    # was: accepted (the rotations rounded to whole numbers), and every prediction was NaN
    def to_int(hp, state):
        state["model.encoder.rest_inv"] = state["model.encoder.rest_inv"].long()

    path = _changed_checkpoint(tmp_path, ckpt_seed, to_int)
    with pytest.raises(ModelError, match=r"bad\.ckpt: weight 'model\.encoder\.rest_inv' is int64"):
        _load_predictor(path)
