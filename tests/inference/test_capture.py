"""Inference from a capture: plates matched by name, masking, frame rate, and ``rbmcap infer``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rbmcap.cli.main import main
from rbmcap.errors import EXIT_DATA, EXIT_FORMAT, DataError
from rbmcap.inference import Predictor
from rbmcap.io.capture import Capture
from rbmcap.markers.synth import synthesize


def _capture(standin, t: int = 50, fps: float = 60.0, order=None) -> Capture:
    """Synthesised rbm14 plates of a gentle random motion, as a capture (optionally reordered)."""
    gen = torch.Generator().manual_seed(1)
    poses = 0.2 * torch.randn(t, 24, 3, generator=gen)
    poses[:, 0] = torch.tensor([np.pi / 2, 0.0, 0.0])
    obs = synthesize(standin, poses, torch.zeros(t, 3), fps=fps)
    names = _names()
    cap = Capture(
        fps=fps, names=names, pos=obs.pos, rot=obs.rot, valid=obs.valid, source="synthetic.npz"
    )
    return cap.select(order) if order else cap


def _names() -> list[str]:
    from rbmcap.markers.markerset import load_marker_set

    return list(load_marker_set("rbm14").names)


def test_capture_inference_equals_predict_on_the_same_arrays(checkpoint, standin):
    p = Predictor.from_checkpoint(checkpoint, chunk=40, overlap=5)
    cap = _capture(standin, 90)
    shuffled = cap.select(_names()[::-1])  # plate order of the file does not matter
    motion = p.predict_capture(shuffled)
    ref = p.predict(cap.pos, cap.rot, cap.valid)
    assert motion.poses.shape == (90, 24, 3) and motion.fps == 60.0
    np.testing.assert_allclose(motion.poses, ref.poses.numpy(), atol=1e-5)
    np.testing.assert_allclose(motion.trans, ref.trans.numpy(), atol=1e-5)
    np.testing.assert_allclose(motion.betas, ref.betas.numpy(), atol=1e-6)


def test_an_invalid_plate_is_masked_not_read(checkpoint, standin):
    """Whatever an invalid plate's cells hold (zeros, a stale pose, huge numbers, NaN), the
    network's answer is the same and finite; hiding it does change the answer (it was used).
    (Arrays go to ``predict`` directly: a :class:`Capture` already clears invalid cells.)"""
    p = Predictor.from_checkpoint(checkpoint)
    cap = _capture(standin, 30)
    seen = p.predict(cap.pos, cap.rot, cap.valid)
    valid = cap.valid.copy()
    valid[:, cap.index("left_forearm")] = False
    valid[5:9, cap.index("head")] = False
    answers = []
    for fill in (0.0, 1.0, 1e6, np.nan):
        pos, rot = cap.pos.copy(), cap.rot.copy()
        pos[~valid] = fill
        rot[~valid] = fill * np.ones((3, 3)) if fill != 1.0 else rot[~valid][::-1]
        answers.append(p.predict(pos, rot, valid))
    for other in answers[1:]:
        np.testing.assert_allclose(other.poses, answers[0].poses, atol=1e-5)
        np.testing.assert_allclose(other.trans, answers[0].trans, atol=1e-6)
    assert torch.isfinite(answers[0].poses).all() and torch.isfinite(answers[0].trans).all()
    assert (answers[0].poses - seen.poses).abs().max() > 1e-4


def test_another_frame_rate_keeps_the_capture_frames_and_fps(checkpoint, standin):
    cap = _capture(standin, 37, fps=100.0)
    motion, verts = Predictor.from_checkpoint(checkpoint).predict_capture(cap, vertices=True)
    assert motion.num_frames == 37 and motion.fps == 100.0
    assert verts.shape == (37, standin.num_vertices, 3) and np.isfinite(verts).all()


def test_a_missing_plate_is_one_error_naming_it(checkpoint, standin):
    cap = _capture(standin, 10)
    cap = cap.select([n for n in _names() if n != "right_shin"])
    with pytest.raises(DataError, match="'right_shin'"):
        Predictor.from_checkpoint(checkpoint).predict_capture(cap)


def test_cli_infer_json_summary_and_exports(checkpoint, standin, tmp_path, capsys):
    cap_path = _capture(standin, 25).save(tmp_path / "cap.npz")
    out = tmp_path / "out" / "motion.npz"
    code = main(
        [
            "infer",
            "--ckpt",
            str(checkpoint),
            str(cap_path),
            "--out",
            str(out),
            "--bvh",
            str(tmp_path / "m.bvh"),
            "--glb",
            str(tmp_path / "m.glb"),
            "--ply-every",
            "10",
            "--json",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["frames"] == 25 and summary["fps"] == 60.0 and summary["outputs"]["ply"] == 3
    assert out.is_file() and (tmp_path / "m.glb").is_file()
    assert len(list((tmp_path / "out" / "motion_ply").glob("*.ply"))) == 3


@pytest.mark.parametrize("bad", ["missing_plate", "not_a_capture"])
def test_cli_infer_bad_input_is_one_line_and_writes_nothing(
    checkpoint, standin, tmp_path, capsys, bad
):
    src = tmp_path / "in" / "cap.npz"
    src.parent.mkdir()
    if bad == "missing_plate":
        _capture(standin, 10).select(_names()[1:]).save(src)
    else:
        np.savez(src, poses=np.zeros((3, 72)))
    out = tmp_path / "out"
    code = main(
        [
            "infer",
            "--ckpt",
            str(checkpoint),
            str(src),
            "--out",
            str(out / "m.npz"),
            "--bvh",
            str(out / "m.bvh"),
            "--ply-every",
            "2",
        ]
    )
    err = capsys.readouterr().err
    assert code == (EXIT_DATA if bad == "missing_plate" else EXIT_FORMAT)
    assert len(err.strip().splitlines()) == 1
    assert ("'head'" in err) if bad == "missing_plate" else ("not a capture file" in err)
    assert not out.exists() or not any(out.rglob("*"))


def test_a_calibration_gives_its_betas_and_puts_the_body_on_its_plates(checkpoint, standin):
    """With calibrated betas, each frame's translation puts the virtual plates of the predicted
    pose on the seen plates (zero mean residual); a frame with no plate seen keeps the pelvis
    where the network put it."""
    from rbmcap.calibrate import Calibration, PlateOffset
    from rbmcap.markers.synth import Synthesizer

    p = Predictor.from_checkpoint(checkpoint)
    cap = _capture(standin, 20)
    cap.valid[:, 3] = False
    cap.valid[7] = False
    zero = {n: PlateOffset(np.zeros(3), np.zeros(3)) for n in _names()}
    betas = np.linspace(-1.0, 1.0, 10)
    calib = Calibration(
        betas=betas, frames=(0, 10), rotation=np.zeros(3), translation=np.zeros(3), plates=zero
    )
    plain, calibrated = p.predict_capture(cap), p.predict_capture(cap, calib)
    np.testing.assert_allclose(calibrated.betas, betas, atol=1e-6)
    np.testing.assert_allclose(calibrated.poses, plain.poses, atol=1e-5)
    virt = Synthesizer(standin, "rbm14")(
        calibrated.poses.astype(np.float32),
        calibrated.trans.astype(np.float32),
        betas.astype(np.float32),
    ).pos
    w = cap.valid[..., None].astype(float)
    mean_residual = ((cap.pos - virt) * w).sum(1) / np.maximum(w.sum(1), 1)
    seen = cap.valid.any(1)
    assert np.abs(mean_residual[seen]).max() < 1e-5  # metres
    assert np.abs(cap.pos - virt)[cap.valid].max() > 1e-3  # not trivially equal: a real fit
    pelvis = [
        m.trans + standin.rest_joints(torch.as_tensor(m.betas, dtype=torch.float32))[0].numpy()
        for m in (plain, calibrated)
    ]
    np.testing.assert_allclose(pelvis[0][7], pelvis[1][7], atol=1e-4)


def test_progress_bar_counts_the_chunks_on_stderr(checkpoint, standin, capsys):
    p = Predictor.from_checkpoint(checkpoint, chunk=40, overlap=5)
    p.predict_capture(_capture(standin, 100), progress=True)
    err = capsys.readouterr().err
    assert "infer" in err and "3/3" in err  # 100 frames in chunks of 40 with 5 overlap
    p.predict_capture(_capture(standin, 100))
    assert capsys.readouterr().err == ""
