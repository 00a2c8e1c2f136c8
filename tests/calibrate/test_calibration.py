"""The Calibration object: one formula for the offsets, applied the same way to a capture, to one
live frame and inside the fit; a calibration that lacks a plate is a config error naming its
file, the line of the name it has instead and the names expected."""

from __future__ import annotations

import numpy as np
import pytest
import roma
import torch

from rbmcap.calibrate import (
    Calibration,
    PlateOffset,
    offsets_between,
    to_physical,
    to_virtual,
)
from rbmcap.cli.main import main
from rbmcap.errors import EXIT_USAGE, ConfigError
from rbmcap.io.capture import Capture
from rbmcap.live.frames import RigidBodyFrame
from rbmcap.live.subject import Subject, SubjectStream
from rbmcap.markers.markerset import load_marker_set

NAMES = list(load_marker_set("rbm14").names)
FRAMES = 6


def _rotations(rng, *shape) -> np.ndarray:
    """Random rotation matrices (*shape, 3, 3), float64."""
    return roma.rotvec_to_rotmat(torch.as_tensor(rng.normal(size=(*shape, 3)))).numpy()


@pytest.fixture
def calibration() -> Calibration:
    rng = np.random.default_rng(3)
    plates = {n: PlateOffset(rng.normal(size=3), rng.normal(scale=0.1, size=3)) for n in NAMES}
    return Calibration(np.zeros(10), [[0]], np.zeros(3), np.zeros(3), plates)


@pytest.fixture
def capture() -> Capture:
    rng = np.random.default_rng(4)
    valid = rng.random((FRAMES, len(NAMES))) > 0.2
    return Capture(
        fps=60.0,
        names=list(NAMES),
        pos=rng.normal(size=(FRAMES, len(NAMES), 3)).astype(np.float32),
        rot=_rotations(rng, FRAMES, len(NAMES)).astype(np.float32),
        valid=valid,
        source="take.npz",
    )


@pytest.mark.parametrize("array", [np.asarray, torch.as_tensor])
def test_to_virtual_undoes_to_physical_and_offsets_between_finds_the_offsets(array):
    rng = np.random.default_rng(0)
    vp, vr = array(rng.normal(size=(4, 5, 3))), array(_rotations(rng, 4, 5))
    r_off, t_off = array(_rotations(rng, 5)), array(rng.normal(scale=0.1, size=(5, 3)))
    pp, pr = to_physical(vp, vr, r_off, t_off)
    back_p, back_r = to_virtual(pp, pr, r_off, t_off)
    np.testing.assert_allclose(np.asarray(back_p), np.asarray(vp), atol=1e-12)
    np.testing.assert_allclose(np.asarray(back_r), np.asarray(vr), atol=1e-12)
    found_r, found_t = offsets_between(vp[0], vr[0], pp[0], pr[0])
    np.testing.assert_allclose(np.asarray(found_r), np.asarray(r_off), atol=1e-12)
    np.testing.assert_allclose(np.asarray(found_t), np.asarray(t_off), atol=1e-12)


def test_a_capture_and_each_live_frame_are_mapped_alike(calibration, capture):
    mapped = calibration.apply(capture)
    assert mapped.pos.dtype == np.float32 and mapped.rot.dtype == np.float32
    np.testing.assert_array_equal(mapped.valid, capture.valid)
    seen = capture.valid
    np.testing.assert_array_equal(mapped.pos[~seen], capture.pos[~seen])  # unseen: as observed
    offsets = calibration.offsets(NAMES)
    expect_p, expect_r = to_physical(mapped.pos, mapped.rot, offsets.rotation, offsets.position)
    np.testing.assert_allclose(expect_p[seen], capture.pos[seen], atol=1e-5)
    np.testing.assert_allclose(expect_r[seen], capture.rot[seen], atol=1e-5)

    class Predictor:
        marker_names, marker_set = NAMES, "rbm14"

    stream = SubjectStream(Subject(calibration=calibration), Predictor())
    order = np.random.default_rng(5).permutation(len(NAMES))  # the stream's own order
    for t in range(FRAMES):
        frame = RigidBodyFrame(
            frame=t,
            timestamp=t / 60.0,
            received=0.0,
            names=tuple(NAMES[i] for i in order),
            pos=capture.pos[t, order],
            rot=capture.rot[t, order],
            valid=capture.valid[t, order],
        )
        pos, rot, valid = stream.plates(frame)
        np.testing.assert_array_equal(pos, mapped.pos[t])
        np.testing.assert_array_equal(rot, mapped.rot[t])
        np.testing.assert_array_equal(valid, mapped.valid[t])
        np.testing.assert_array_equal(stream.observed(frame)[0], capture.pos[t])


def _misspelled(calibration: Calibration, tmp_path) -> tuple[str, int]:
    """Save ``calibration`` with left_forearm spelled left_forarm; (path, that line)."""
    path = tmp_path / "calib.yaml"
    calibration.save(path)
    text = path.read_text().replace("left_forearm:", "left_forarm:")
    path.write_text(text)
    line = text.splitlines().index(
        next(x for x in text.splitlines() if x.strip().startswith("left_forarm:"))
    )
    return str(path), line + 1


def test_a_misspelled_plate_names_the_file_line_and_expected_plates(calibration, tmp_path):
    path, line = _misspelled(calibration, tmp_path)
    loaded = Calibration.load(path)
    with pytest.raises(ConfigError) as err:
        loaded.offsets(NAMES)
    msg = str(err.value)
    assert msg.startswith(f"{path}:{line}: unknown plate 'left_forarm'"), msg
    assert "no offset for 'left_forearm'" in msg and ", ".join(NAMES) in msg


def test_infer_with_a_misspelled_plate_is_a_config_error_on_the_calibration(
    calibration, capture, tmp_path, capsys, standin
):
    path, line = _misspelled(calibration, tmp_path)
    capture.save(tmp_path / "take.npz")
    args = ["infer", str(tmp_path / "take.npz"), "--method", "solver", "--calib", path]
    assert main([*args, "--out", str(tmp_path / "motion.npz")]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{path}:{line}:" in err and "left_forarm" in err and "take.npz" not in err, err
    assert not (tmp_path / "motion.npz").exists()


def test_live_with_a_misspelled_plate_names_the_subject_and_the_file(calibration, tmp_path):
    path, line = _misspelled(calibration, tmp_path)

    class Predictor:
        marker_names, marker_set = NAMES, "rbm14"

    with pytest.raises(ConfigError, match=rf"subject alice: {path}:{line}: unknown plate"):
        SubjectStream(Subject("alice", Calibration.load(path)), Predictor())
