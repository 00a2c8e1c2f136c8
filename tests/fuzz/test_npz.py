"""Property-based fuzzing of the two ``.npz`` readers: the capture file
(:meth:`Capture.load`, what ``rbmcap import`` writes and ``calibrate``/``infer`` read) and AMASS
motion files (:func:`read_motion`), on byte-level and structured mutations of small valid
files; plus one plain regression test for each bug the fuzzing found.

Contract (:func:`helpers.fuzzing.check_reader`): every input is read or refused with an
:class:`~rbmcap.errors.RBMCapError`, in bounded time, with no partial output. NumPy's
RuntimeWarnings count as errors inside the readers. What is accepted must also be clean: finite
numbers wherever valid, rotations orthonormal, a positive frame rate (checked on every accepted
input).
"""

from __future__ import annotations

import contextlib
import io
import struct
import warnings
import zipfile
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import roma
import torch
from helpers.fuzzing import (
    check_reader,
    fuzz_settings,
    mutated,
    npz_arrays,
    npz_mutation,
)
from hypothesis import given
from hypothesis import strategies as st

from rbmcap.errors import DataError, FormatError
from rbmcap.io.capture import Capture
from rbmcap.motion.smpl_motion import SMPLMotion, read_motion

T = 4
"""Frames of every seed: few, so that each fuzzed input costs milliseconds."""


# ------------------------------------------------------------------------------------- seeds
def _capture(points: bool) -> Capture:
    rng = np.random.default_rng(1)
    valid = np.ones((T, 2), bool)
    valid[1, 0] = False
    pts = {}
    if points:
        pv = np.ones((T, 3), bool)
        pv[2, 1] = False
        pts = {
            "point_names": ["Sub:M0", "Sub:M1", "Sub:M2"],
            "points": rng.uniform(-1, 1, (T, 3, 3)),
            "point_valid": pv,
        }
    return Capture(
        fps=100.0,
        names=["Sub:Head", "Sub:Pelvis"],
        pos=rng.uniform(-1, 1, (T, 2, 3)),
        rot=roma.rotvec_to_rotmat(torch.from_numpy(rng.normal(size=(T, 2, 3)))).numpy(),
        valid=valid,
        residual_mm=np.full((T, 2), 0.5),
        frame_numbers=np.arange(10, 10 + T),
        format="vicon-segments",
        source="take.csv",
        **pts,
    )


def _motion_arrays(kind: str) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2)
    if kind == "smplh":
        motion = SMPLMotion(
            poses=rng.normal(scale=0.3, size=(T, 24, 3)),
            trans=rng.normal(size=(T, 3)),
            betas=rng.normal(size=16),
            gender="female",
            fps=60.0,
            name="walk",
        )
        return motion.to_npz_dict()
    return {
        "root_orient": rng.normal(size=(T, 3)),
        "pose_body": rng.normal(size=(T, 63)),
        "pose_hand": rng.normal(size=(T, 90)),
        "trans": rng.normal(size=(T, 3)),
        "betas": rng.normal(size=16),
        "gender": np.array("male"),
        "mocap_frame_rate": np.array(120.0),
    }


@cache
def seed(kind: str) -> bytes:
    """The bytes of a valid file: 'capture' / 'capture-points' or 'smplh' / 'smplx'."""
    buf = io.BytesIO()
    if kind.startswith("capture"):
        np.savez(buf, **_capture(kind == "capture-points").to_npz_dict())
    else:
        np.savez_compressed(buf, **_motion_arrays(kind))
    return buf.getvalue()


# ------------------------------------------------------------------------------------- calls
@contextlib.contextmanager
def _strict():
    """NumPy's RuntimeWarnings raised as errors (the readers must not emit them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def _clean_capture(cap: Capture) -> None:
    """What an accepted capture guarantees (AssertionError otherwise: counted as a bug)."""
    assert cap.fps > 0 and np.isfinite(cap.fps)
    assert cap.pos.dtype == np.float32 and np.isfinite(cap.pos).all()
    assert np.isfinite(cap.rot).all()
    gram = np.swapaxes(cap.rot, -1, -2).astype(np.float64) @ cap.rot
    assert np.abs(gram - np.eye(3)).max(initial=0.0) < 1e-5
    assert (np.linalg.det(cap.rot.astype(np.float64)) > 0).all()
    assert 0 <= getattr(cap, "rotation_deviation", 0.0) <= 1e-3
    assert cap.num_frames > 0
    if cap.points is not None:
        assert np.isfinite(cap.points).all()


def _clean_motion(motion: SMPLMotion) -> None:
    assert motion.num_frames > 0 and motion.fps > 0
    for arr in (motion.poses, motion.trans, motion.betas):
        assert np.isfinite(arr).all()


def _draw_file(data, kinds: list[str]) -> bytes:
    blob = seed(data.draw(st.sampled_from(kinds), label="seed"))
    how = data.draw(st.sampled_from(["structured", "structured", "bytes", "both"]), label="how")
    if how in ("structured", "both"):
        blob = data.draw(npz_mutation(blob), label="structured file")
    if how in ("bytes", "both"):
        blob = data.draw(mutated(blob, text=False), label="file")
    return blob


def _fuzz_capture(name: str, fuzzdir: Path, data) -> None:
    path = fuzzdir / "capture.npz"
    path.write_bytes(_draw_file(data, ["capture", "capture-points"]))

    def call():
        with _strict():
            _clean_capture(Capture.load(path))

    check_reader(name, call)


def _fuzz_amass(name: str, fuzzdir: Path, data) -> None:
    path = fuzzdir / "walk_poses.npz"
    path.write_bytes(_draw_file(data, ["smplh", "smplx"]))

    def call():
        with _strict():
            _clean_motion(read_motion(path))

    check_reader(name, call)


FUZZERS = {"capture-npz": _fuzz_capture, "amass-npz": _fuzz_amass}


@pytest.fixture(scope="module")
def fuzzdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-npz")


def test_every_seed_is_accepted(fuzzdir):
    for kind in ("capture", "capture-points"):
        (fuzzdir / "seed.npz").write_bytes(seed(kind))
        _clean_capture(Capture.load(fuzzdir / "seed.npz"))
    for kind in ("smplh", "smplx"):
        (fuzzdir / "seed_poses.npz").write_bytes(seed(kind))
        _clean_motion(read_motion(fuzzdir / "seed_poses.npz"))


@pytest.mark.acceptance
@pytest.mark.parametrize("name", list(FUZZERS))
@fuzz_settings()
@given(data=st.data())
def test_fuzz(name, fuzzdir, data):
    FUZZERS[name](name, fuzzdir, data)


# ------------------------------------------------------------------------- regression tests
def _write(path: Path, arrays: dict) -> Path:
    np.savez(path, **arrays)
    return path


def _capture_arrays(**changes) -> dict:
    arrays = npz_arrays(seed("capture-points"))
    arrays.update(changes)
    return arrays


def _member_data(blob: bytes, member: str) -> tuple[int, int]:
    """(start, size) of ``member``'s stored data inside the zip archive ``blob``."""
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        info = z.getinfo(member)
    off = info.header_offset
    name_len, extra_len = struct.unpack("<HH", blob[off + 26 : off + 30])
    return off + 30 + name_len + extra_len, info.compress_size


def _load_strict(path: Path) -> Capture:
    with _strict():
        return Capture.load(path)


def _read_strict(path: Path) -> SMPLMotion:
    with _strict():
        return read_motion(path)


def test_capture_npz_regression_empty_file_is_a_format_error(tmp_path):
    (tmp_path / "c.npz").write_bytes(b"")
    with pytest.raises(FormatError, match=r"c\.npz: not a capture file"):
        Capture.load(tmp_path / "c.npz")


def test_capture_npz_regression_broken_zip_is_a_format_error(tmp_path):
    (tmp_path / "c.npz").write_bytes(b"PK\x03\x04" + bytes(60))
    with pytest.raises(FormatError, match=r"c\.npz: not a capture file"):
        Capture.load(tmp_path / "c.npz")


def test_capture_npz_regression_bad_crc_is_a_format_error(tmp_path):
    blob = bytearray(seed("capture"))
    start, size = _member_data(bytes(blob), "pos.npy")
    blob[start + size - 1] ^= 0xFF  # the last byte of the array's data: the CRC no longer holds
    (tmp_path / "c.npz").write_bytes(bytes(blob))
    with pytest.raises(FormatError, match=r"c\.npz: not a capture file.*CRC"):
        Capture.load(tmp_path / "c.npz")


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("fps", np.array("abc"), "fps of dtype <U3"),
        ("fps", np.array([100.0, 50.0]), r"fps of dtype float64 and shape \(2,\)"),
        ("names", np.array("Sub:Head"), r"names of dtype <U8 and shape \(\)"),
        ("frame_numbers", np.array(["", "1", "2", "3"]), "frame_numbers has dtype <U1"),
        ("residual_mm", np.array([0.5]), r"residual_mm of shape \(1,\), expected \(4, 2\)"),
        ("points", np.zeros((4, 1, 3)), r"points of shape \(4, 1, 3\), expected \(4, 3, 3\)"),
        ("pos", np.zeros((4, 2, 3), np.complex128), "pos has dtype complex128"),
    ],
    ids=[
        "text_fps",
        "fps_array",
        "scalar_names",
        "text_frame_numbers",
        "short_residuals",
        "short_points",
        "complex_pos",
    ],
)
def test_capture_npz_regression_malformed_array_is_a_format_error(tmp_path, key, value, match):
    path = _write(tmp_path / "c.npz", _capture_arrays(**{key: value}))
    with pytest.raises(FormatError, match=rf"c\.npz: {match}"):
        _load_strict(path)


def test_capture_npz_regression_nan_rotation_at_a_valid_frame_is_a_data_error(tmp_path):
    rot = npz_arrays(seed("capture"))["rot"].copy()
    rot[2, 1, 0, 0] = np.nan
    path = _write(tmp_path / "c.npz", _capture_arrays(rot=rot))
    with pytest.raises(DataError, match=r"c\.npz: plate 'Sub:Pelvis', frame 2: .*NaN"):
        Capture.load(path)


def test_capture_npz_regression_scaled_rotation_is_a_data_error(tmp_path):
    rot = npz_arrays(seed("capture"))["rot"].copy()
    rot[3, 0] *= 2.0
    path = _write(tmp_path / "c.npz", _capture_arrays(rot=rot))
    with pytest.raises(DataError, match=r"c\.npz: plate 'Sub:Head', frame 3: not a rotation"):
        Capture.load(path)


def test_capture_npz_regression_zero_frames_is_a_data_error(tmp_path):
    arrays = {
        k: (v[:0] if v.ndim >= 1 and len(v) == T else v) for k, v in _capture_arrays().items()
    }
    path = _write(tmp_path / "c.npz", arrays)
    with pytest.raises(DataError, match=r"c\.npz: the capture has no frames"):
        Capture.load(path)


def _motion_file(tmp_path: Path, **changes) -> Path:
    arrays = _motion_arrays("smplh")
    arrays.update(changes)
    return _write(tmp_path / "m_poses.npz", arrays)


def test_amass_npz_regression_corrupt_deflate_stream_is_a_format_error(tmp_path):
    blob = seed("smplh")
    start, _ = _member_data(blob, "poses.npy")
    # 0xFF opens a deflate block of the reserved type 3: zlib refuses it ("invalid block type")
    (tmp_path / "m_poses.npz").write_bytes(blob[:start] + b"\xff" * 8 + blob[start + 8 :])
    with pytest.raises(FormatError, match=r"m_poses\.npz: cannot read as an AMASS \.npz"):
        read_motion(tmp_path / "m_poses.npz")


@pytest.mark.parametrize("kind", ["smplh", "smplx"])
def test_amass_npz_regression_zero_frames_is_a_data_error(tmp_path, kind):
    arrays = {
        k: (v[:0] if v.ndim >= 1 and len(v) == T else v) for k, v in _motion_arrays(kind).items()
    }
    path = _write(tmp_path / "m_poses.npz", arrays)
    with pytest.raises(DataError, match=r"m_poses\.npz: the motion has no frames"):
        read_motion(path)


def test_amass_npz_regression_empty_frame_rate_is_a_format_error(tmp_path):
    path = _motion_file(tmp_path, mocap_framerate=np.zeros(0))
    with pytest.raises(FormatError, match=r"m_poses\.npz: mocap_framerate of shape \(0,\)"):
        read_motion(path)


def test_amass_npz_regression_complex_poses_is_a_format_error(tmp_path):
    poses = _motion_arrays("smplh")["poses"].astype(np.complex128)
    path = _motion_file(tmp_path, poses=poses)
    with pytest.raises(FormatError, match=r"m_poses\.npz: poses has dtype complex128"):
        _read_strict(path)


def test_capture_npz_regression_float16_frame_numbers_are_read_without_warnings(tmp_path):
    """Found after the boundary checks were added: comparing float16 frame numbers with 2**62
    overflowed float16 (a RuntimeWarning inside the reader)."""
    path = _write(tmp_path / "c.npz", _capture_arrays(frame_numbers=np.arange(T, dtype="f2")))
    assert list(_load_strict(path).frame_numbers) == list(range(T))


def test_capture_npz_regression_huge_rotation_entry_is_a_data_error_without_warnings(tmp_path):
    rot = npz_arrays(seed("capture"))["rot"].astype(np.float64)
    rot[0, 1, 2, 2] = 1e308
    path = _write(tmp_path / "c.npz", _capture_arrays(rot=rot))
    with pytest.raises(DataError, match=r"plate 'Sub:Pelvis', frame 0: not a rotation: an entry"):
        _load_strict(path)
