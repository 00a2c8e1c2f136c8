"""T-pose calibration: a synthetic capture with known physical offsets.

The scene: the stand-in body holds a 2 s T-pose (zero body pose) then walks; the ``realistic``
realism preset (placement, soft tissue, noise, gaps) perturbs the plates, and random physical
offsets (up to 3 cm, 15°) are applied on top: ``R_phys = R R_off``, ``p_phys = p + R t_off``.
Relative to the clean virtual plates the true offset is then the placement composed with the
applied one (both are constant plate-frame offsets of the same form).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import roma
import torch
from helpers.scenes import FPS, tpose_then_walk

from rbmcap.calibrate import (
    Calibration,
    calibrate_tpose,
    detect_tpose,
    virtual_tpose,
)
from rbmcap.cli.main import main
from rbmcap.errors import EXIT_DATA, ConfigError, DataError
from rbmcap.geometry import nearest_rotation, rigid_registration, rotmat_geodesic_angle

TPOSE, WALK, SEED, KEY = 120, 120, 0, "calib"


@pytest.fixture(scope="module")
def scene():
    return tpose_then_walk(TPOSE, WALK, seed=SEED, key=KEY)


def _true_offsets(scene, frames=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The physical offsets from the clean virtual plates: the placement composed with the applied
    offset; with ``frames`` [a, b), also the soft-tissue wobble averaged over them (what the
    plates really were offset by while the calibration looked)."""
    pert, (r_off, t_off) = scene.pert, scene.offsets
    r_place = roma.rotvec_to_rotmat(torch.as_tensor(pert.place_rotvec))
    t_place = torch.as_tensor(pert.place_offset)
    if frames is None:
        return r_place @ r_off, t_place + (r_place @ t_off[..., None])[..., 0]
    a, b = frames
    w = torch.as_tensor(scene.capture.valid[a:b], dtype=torch.float64)
    r_wob = r_place @ roma.rotvec_to_rotmat(torch.as_tensor(pert.wobble_rotvec[a:b]))
    t = t_place + torch.as_tensor(pert.wobble_offset[a:b]) + (r_wob @ t_off[..., None])[..., 0]
    r = r_wob @ r_off
    t_mean = (t * w[..., None]).sum(0) / w.sum(0)[:, None]
    return nearest_rotation((r * w[..., None, None]).sum(0)), t_mean


def _offset_errors(calib, scene, truth):
    """Per-plate errors (mm, degrees) of the calibration's offsets after removing the rigid
    transform common to all plates, and that transform's size (mm, degrees).

    Both offsets are put on the same virtual T-pose plates V_i (at the calibration's betas,
    the subject's when given): ``V_i O_i`` (true) and ``V_i O_i'`` (estimated). The common
    transform D is the rigid fit of the true positions onto the estimated ones; errors compare
    D⁻¹ (V_i O_i') with V_i O_i. (With the true plates on the true-shape body instead, the
    comparison would be blind to the shape: both are rigid images of the same physical plates.)
    """
    synth, (r_true, t_true) = scene.synth, truth
    names = list(calib.plates)
    r_est = roma.rotvec_to_rotmat(
        torch.as_tensor(np.stack([calib.plates[n].rotation for n in names]))
    )
    t_est = torch.as_tensor(np.stack([calib.plates[n].position for n in names]))
    vp, vr = virtual_tpose(synth, torch.as_tensor(calib.betas))
    ep, er = vp, vr
    true_p, true_r = vp + (vr @ t_true[..., None])[..., 0], vr @ r_true
    est_p, est_r = ep + (er @ t_est[..., None])[..., 0], er @ r_est
    d_rot, d_t = rigid_registration(true_p, est_p)
    back_p = (est_p - d_t) @ d_rot
    back_r = d_rot.T @ est_r
    pos_mm = (back_p - true_p).norm(dim=-1) * 1000
    rot_deg = torch.rad2deg(rotmat_geodesic_angle(back_r, true_r))
    common = (
        float(d_t.norm() * 1000),
        float(torch.rad2deg(rotmat_geodesic_angle(d_rot, torch.eye(3, dtype=d_rot.dtype)))),
    )
    return pos_mm.numpy(), rot_deg.numpy(), common


def _window(calib) -> tuple[int, int]:
    """The T-pose window [a, b) of a T-pose calibration (its one capture's frames)."""
    frames = calib.frames[0]
    return frames[0], frames[-1] + 1


def test_tpose_detected_within_the_first_two_seconds(scene):
    calib = calibrate_tpose(scene.capture, scene.synth, betas=scene.betas)
    a, b = _window(calib)
    assert 0 <= a < b <= TPOSE, f"T-pose window [{a}, {b}) not inside the first 2 s"
    assert b - a == FPS  # the 1 s window


def test_offsets_recovered_with_shape_given(scene):
    calib = calibrate_tpose(scene.capture, scene.synth, betas=scene.betas)
    pos_mm, rot_deg, (common_mm, common_deg) = _offset_errors(
        calib, scene, _true_offsets(scene, _window(calib))
    )
    pos0, rot0, _ = _offset_errors(calib, scene, _true_offsets(scene))
    report = (
        f"offset errors: max {pos_mm.max():.2f} mm, {rot_deg.max():.2f} deg (against the "
        f"wobble-free offsets: max {pos0.max():.2f} mm, {rot0.max():.2f} deg); common "
        f"transform {common_mm:.1f} mm, {common_deg:.2f} deg"
    )
    print(report)
    assert pos_mm.max() < 2.0, report
    assert rot_deg.max() < 1.0, report


def test_offsets_and_shape_estimated(scene):
    calib = calibrate_tpose(scene.capture, scene.synth)
    truth = _true_offsets(scene, _window(calib))
    pos_mm, rot_deg, (common_mm, common_deg) = _offset_errors(calib, scene, truth)
    body = scene.body
    with torch.no_grad():
        v_true = body.forward(torch.zeros(24, 3), scene.betas).vertices
        v_est = body.forward(torch.zeros(24, 3), calib.betas.astype(np.float32)).vertices
    v2v_mm = float((v_true - v_est).norm(dim=-1).mean() * 1000)
    beta_err = float(np.abs(calib.betas - scene.betas[: len(calib.betas)]).mean())
    report = (
        f"shape estimated: offset errors mean {pos_mm.mean():.1f} / max "
        f"{pos_mm.max():.1f} mm, "
        f"mean {rot_deg.mean():.2f} / max {rot_deg.max():.2f} deg; common transform "
        f"{common_mm:.1f} mm, {common_deg:.2f} deg; rest-pose V2V {v2v_mm:.1f} mm; "
        f"mean |Δβ| {beta_err:.2f}"
    )
    print(report)
    # measured (seed 0 walk, offsets seed 13): 13.3 / 22.8 mm, 0.51 / 1.71 deg, V2V 18.2 mm
    assert pos_mm.mean() < 20.0 and pos_mm.max() < 35.0 and rot_deg.max() < 3.0, report
    assert v2v_mm < 30.0, report


def test_a_calibration_maps_physical_plates_onto_virtual(scene):
    calib = calibrate_tpose(scene.capture, scene.synth, betas=scene.betas)
    mapped = calib.apply(scene.capture)
    after = slice(TPOSE, None)  # the walk, away from the T-pose
    valid = mapped.valid[after]
    ideal, real = scene.ideal, scene.observed
    pos_mm = np.linalg.norm(mapped.pos[after] - ideal.pos[after], axis=-1)[valid] * 1000
    rot_deg = np.rad2deg(
        rotmat_geodesic_angle(
            torch.as_tensor(mapped.rot[after]), torch.as_tensor(ideal.rot[after])
        ).numpy()
    )[valid]
    # the realism's own deviation from the clean plates (placement included) for scale
    raw_mm = np.linalg.norm(real.pos[after] - ideal.pos[after], axis=-1)[valid] * 1000
    report = (
        f"mapped vs clean plates during the walk: {pos_mm.mean():.1f} mm, "
        f"{rot_deg.mean():.2f} deg (realistic plates before offsets: {raw_mm.mean():.1f} mm)"
    )
    print(report)
    # measured: 10.4 mm, 2.65 deg (the realistic plates, placement included: 13.6 mm). The
    # soft tissue alone (3 mm, 1.5 deg per axis) is ~4.8 mm, ~2.4 deg on average; the rest is
    # the common transform (~8 mm), which no T-pose can tell apart from the offsets and which,
    # once the body moves, no longer acts as one rigid transform.
    assert pos_mm.mean() < 14.0 and rot_deg.mean() < 3.5, report
    empty = Calibration(calib.betas, calib.frames, calib.rotation, calib.translation, {})
    with pytest.raises(ConfigError, match="calibration: no offset for plate 'head'"):
        empty.apply(scene.capture)


def test_calibration_yaml_round_trip(scene, tmp_path):
    calib = calibrate_tpose(scene.capture, scene.synth, frames=(10, 100), betas=scene.betas)
    assert _window(calib) == (10, 100)
    path = calib.save(tmp_path / "calib.yaml")
    back = Calibration.load(path)
    assert back.to_dict() == calib.to_dict()
    text = path.read_text()
    bad = text.replace("position_offset_m: [", "position_offset_m: [oops, ", 1)
    (tmp_path / "bad.yaml").write_text(bad)
    with pytest.raises(ConfigError, match=r"bad\.yaml: plates\.head\.position_offset_m"):
        Calibration.load(tmp_path / "bad.yaml")
    (tmp_path / "nokey.yaml").write_text(text.replace("betas:", "shape:"))
    with pytest.raises(ConfigError, match=r"nokey\.yaml: unknown key 'shape'"):
        Calibration.load(tmp_path / "nokey.yaml")


def test_cli_json_summary_and_one_line_errors(scene, tmp_path, capsys, monkeypatch):
    from functools import partial

    from rbmcap.calibrate import calibrate, session_fit

    # the command's plumbing, not the fit's accuracy: a short fit
    monkeypatch.setattr(session_fit, "calibrate", partial(calibrate, iterations=(30, 60, 120)))
    cap_path = scene.capture.save(tmp_path / "cap.npz")
    np.savez(tmp_path / "given.npz", betas=scene.betas, poses=np.zeros((1, 72)))
    out = tmp_path / "calib.yaml"
    args = [
        "calibrate",
        str(cap_path),
        "--betas",
        str(tmp_path / "given.npz"),
        "--no-check",
        "--out",
        str(out),
    ]
    assert main([*args, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"frames", "betas", "plates", "alignment", "report"} <= set(info)
    assert info["betas_given"] and info["frames"][0] >= 2  # a take with motion: several frames
    assert set(info["plates"]["head"]) >= {"rotation_offset_deg", "position_offset_mm"}
    assert [len(f) for f in Calibration.load(out).frames] == info["frames"]
    assert main([*args[:-1], str(tmp_path / "x.yaml"), "--frames", "5-9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--frames" in err[0]
    assert not (tmp_path / "x.yaml").exists()
    scene.capture.select(scene.capture.names[1:]).save(tmp_path / "short.npz")
    code = main(["calibrate", str(tmp_path / "short.npz"), "--out", str(tmp_path / "y.yaml")])
    assert code == EXIT_DATA
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'head'" in err[0], err
    assert not (tmp_path / "y.yaml").exists()


def test_tpose_detection_counts_turning_plates_and_checks_frames(scene):
    num = 300  # plates that never move but one turns for the first 2.5 s
    pos, valid = np.zeros((num, 2, 3)), np.ones((num, 2), bool)
    angle = np.minimum(np.arange(num), 150) * 0.02
    rot = np.tile(np.eye(3), (num, 2, 1, 1))
    rot[:, 0] = roma.rotvec_to_rotmat(torch.as_tensor(angle)[:, None] * torch.tensor([0, 0, 1.0]))
    assert detect_tpose(pos, rot, valid, 60.0)[0] >= 150
    with pytest.raises(DataError, match=r"\[0, 9999\) out of range"):
        calibrate_tpose(scene.capture, scene.synth, frames=(0, 9999), betas=scene.betas)
