"""``rbmcap view``: inputs become layers, the per-frame error is eval's MPJPE, the scene poses
every layer per timeline step on a live viser server, a recording holds the animation, and (slow)
a real browser draws the bodies, plates and timeline and follows the slider."""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import shutil
import sys
import time
from pathlib import Path

import msgspec
import numpy as np
import pytest
import zstandard

from rbmcap.cli.main import main
from rbmcap.errors import DataError, FormatError
from rbmcap.evaluation.saved import SavedSequence, save_sequence
from rbmcap.io.capture import Capture
from rbmcap.motion.smpl_motion import SMPLMotion
from rbmcap.view.frame_error import frame_errors_mm
from rbmcap.view.layers import load_view
from rbmcap.view.plates import held_poses
from rbmcap.view.skinning import skin_motion, skinned_vertices
from rbmcap.view.timeline import layer_frames

CHROMIUM = Path("/usr/bin/chromium")
PLATES = ("head", "chest", "left_hand")


def _motion(frames: int, seed: int, fps: float = 30.0, name: str = "m") -> SMPLMotion:
    """A small smooth motion standing upright (the Y-up→Z-up turn in the root), walking along +x."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, frames)[:, None, None]
    poses = (
        0.3 * np.sin(2 * np.pi * t + rng.uniform(0, 6, (1, 24, 3))) * rng.uniform(0, 1, (1, 24, 1))
    )
    poses[:, 0] = [np.pi / 2, 0.0, 0.0]
    trans = np.stack([np.linspace(0, 0.5, frames), np.zeros(frames), np.full(frames, 0.95)], 1)
    return SMPLMotion(poses=poses, trans=trans, betas=np.zeros(10), fps=fps, name=name)


def _saved(name: str, truth: SMPLMotion, offset_m: float, valid: np.ndarray) -> SavedSequence:
    """A saved evaluation sequence: the network is the truth moved by ``offset_m`` along x, the
    baseline the truth with a bent elbow; three plates, ``valid`` (T, 3)."""
    t = truth.num_frames
    params = {"poses": truth.poses, "betas": truth.betas, "trans": truth.trans}
    network = dict(params, trans=truth.trans + np.array([offset_m, 0.0, 0.0]))
    bent = truth.poses.copy()
    bent[:, 18, 2] += 0.8
    rng = np.random.default_rng(1)
    pos = rng.normal(size=(t, 3, 3)) * 0.01 + truth.trans[:, None]
    return SavedSequence(
        name=name,
        fps=truth.fps,
        body="standin-v1/neutral",
        gender="neutral",
        plate_names=PLATES,
        pos=pos,
        rot=np.broadcast_to(np.eye(3), (t, 3, 3, 3)).copy(),
        valid=valid,
        labels={
            "truth": "ground truth",
            "network": "network",
            "baseline_6dof": "6-DoF optimisation",
        },
        params={"truth": params, "network": network, "baseline_6dof": dict(params, poses=bent)},
    )


@pytest.fixture(scope="module")
def eval_folder(tmp_path_factory) -> Path:
    """An eval output folder as ``rbmcap eval`` lays it out: two saved sequences and the
    per-sequence table, the second (network 10 mm off) worse than the first (2 mm)."""
    folder = tmp_path_factory.mktemp("view") / "eval"
    valid = np.ones((20, 3), bool)
    valid[5:9, 2] = False  # the left hand unseen for frames 5-8
    for i, (name, off) in enumerate([("seq/a", 0.002), ("seq/b", 0.010)]):
        save_sequence(
            folder / "sequences" / f"{i:03d}.npz", _saved(name, _motion(20, i), off, valid)
        )
    with open(folder / "per_sequence.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["method", "sequence", "occluded", "mpjpe_mm"])
        w.writerows([["network", "seq/a", "", "2.0"], ["network", "seq/b", "", "10.0"]])
    return folder


@pytest.fixture(scope="module")
def motion_file(tmp_path_factory) -> Path:
    return _motion(45, 7, fps=60.0, name="dance").save(
        tmp_path_factory.mktemp("view") / "dance.npz"
    )


# ------------------------------------------------------------------------------ loading layers
def test_eval_folder_shows_the_networks_worst_sequence_truth_first_with_its_plates(eval_folder):
    content = load_view([eval_folder])
    assert [b.key for b in content.bodies] == ["truth", "network", "baseline_6dof"]
    assert content.truth == "truth"
    assert content.bodies[1].motion.trans[0, 0] == pytest.approx(0.010)  # seq/b, the worst
    (plates,) = content.plates
    assert plates.names == PLATES and plates.frames == 20 and not plates.valid[6, 2]
    assert load_view([eval_folder], sequence="seq/a").bodies[1].motion.trans[0, 0] == pytest.approx(
        0.002
    )


def test_motions_captures_and_saved_sequences_mix_with_unique_keys(
    eval_folder, motion_file, tmp_path
):
    eye = np.broadcast_to(np.eye(3), (50, 2, 3, 3))
    cap = Capture(
        fps=100.0,
        names=["p0", "p1"],
        pos=np.zeros((50, 2, 3)),
        rot=eye,
        valid=np.ones((50, 2), bool),
    )
    cap_path = cap.save(tmp_path / "capture.npz")
    content = load_view([motion_file, cap_path, eval_folder / "sequences" / "000.npz", motion_file])
    assert [b.key for b in content.bodies] == [
        "dance",
        "truth",
        "network",
        "baseline_6dof",
        "dance_2",
    ]
    assert [p.key for p in content.plates] == ["capture", "plates"]
    assert content.truth == "truth" and content.fps == 100.0  # the fastest layer sets the clock
    assert content.duration_s == pytest.approx(max(45 / 60, 50 / 100, 20 / 30))
    assert len({b.colour for b in content.bodies}) == 5


def test_a_motion_given_as_truth_is_the_reference(motion_file, tmp_path):
    other = _motion(45, 3, fps=60.0).save(tmp_path / "other.npz")
    content = load_view([other], truth=motion_file)
    assert content.truth == "dance" and [b.key for b in content.bodies] == ["other", "dance"]


def test_unusable_inputs_are_named_in_one_error(eval_folder, motion_file, tmp_path):
    np.savez(tmp_path / "junk.npz", x=np.zeros(3))
    with pytest.raises(FormatError, match=r"junk\.npz"):
        load_view([tmp_path / "junk.npz"])
    with pytest.raises(FormatError, match="nope"):
        load_view([tmp_path / "nope.npz"])
    with pytest.raises(DataError, match="second truth"):
        load_view([eval_folder], truth=motion_file)
    with pytest.raises(DataError, match="no saved sequence"):
        load_view([eval_folder], sequence="zzz*")


# ----------------------------------------------------------------- clock, plates, error, skin
def test_each_layer_shows_its_own_frame_at_each_timeline_step():
    np.testing.assert_array_equal(layer_frames(6, 60.0, 30.0, 100), [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(
        layer_frames(5, 30.0, 60.0, 6), [0, 2, 4, 5, 5]
    )  # held at the end


def test_a_missing_plate_is_held_where_it_was_last_seen():
    pos = np.arange(5, dtype=float)[:, None, None] * np.ones((5, 2, 3))
    valid = np.array([[1, 0], [1, 0], [0, 1], [0, 1], [1, 0]], bool)
    wxyz, held, ever = held_poses(pos, None, valid)
    np.testing.assert_array_equal(held[:, 0, 0], [0, 1, 1, 1, 4])
    np.testing.assert_array_equal(held[:, 1, 0], [2, 2, 2, 3, 3])  # before first seen: first seen
    assert ever.all() and np.allclose(wxyz, [1, 0, 0, 0])
    assert not held_poses(pos, None, np.zeros((5, 2), bool))[2].any()


def test_frame_error_is_evals_mpjpe(eval_folder, standin):
    from rbmcap.evaluation.saved import load_sequences
    from rbmcap.metrics import evaluate_sequence

    seq = load_sequences(eval_folder, "seq/a")[0]
    joints = {k: skin_motion(standin, seq.motion(k)).joints for k in seq.methods}
    errors = frame_errors_mm(joints, "truth")
    assert list(errors) == ["network", "baseline_6dof"]
    np.testing.assert_allclose(errors["network"], 2.0, atol=1e-3)  # the whole body moved 2 mm
    expected = evaluate_sequence(
        standin, seq.params["baseline_6dof"], seq.params["truth"], seq.fps, vertices=False
    ).mean["mpjpe_mm"]
    assert errors["baseline_6dof"].mean() == pytest.approx(expected, rel=1e-3)
    assert errors["baseline_6dof"].max() > 5.0
    assert frame_errors_mm(joints, None) == {}


def test_the_browsers_skinning_matches_the_body_model(standin):
    import torch

    motion = _motion(8, 2)
    mesh = skin_motion(standin, motion)
    with torch.no_grad():
        args = (
            torch.as_tensor(a, dtype=torch.float32)
            for a in (motion.poses, motion.betas, motion.trans)
        )
        full = standin(*args).vertices.numpy()
    for f in (0, 4, 7):
        err = np.linalg.norm(skinned_vertices(mesh, f) - full[f], axis=-1)
        assert err.mean() < 0.003 and err.max() < 0.02, (f, err.mean(), err.max())  # correctives
    assert mesh.weights.shape == (standin.num_vertices, 24)
    np.testing.assert_allclose(mesh.weights.sum(1), 1.0, atol=1e-5)


def test_view_without_viser_names_the_extra(motion_file, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "viser", None)  # `import viser` raises ImportError
    assert main(["view", str(motion_file), "--no-browser"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install 'rbmcap[view]'" in err


# ------------------------------------------------------------------- the scene on a live server
@pytest.fixture(scope="module")
def viewer(eval_folder, motion_file):
    """The viewer on the eval folder's worst sequence and a motion, on a free local port."""
    pytest.importorskip("viser")
    from rbmcap.view.server import start_viewer

    v = start_viewer(load_view([eval_folder, motion_file]), port=0)
    yield v
    v.close()


def test_the_scene_has_a_mesh_and_skeleton_per_body_and_the_plates(viewer):
    labels = [label for label, _ in viewer.scene.toggles()]
    assert labels == [
        "ground truth: mesh",
        "ground truth: skeleton",
        "network: mesh",
        "network: skeleton",
        "6-DoF optimisation: mesh",
        "6-DoF optimisation: skeleton",
        "dance: mesh",
        "dance: skeleton",
        "plates (seq/b): plates",
        "plates (seq/b): missing",
    ]
    assert viewer.scene.steps == 45  # the motion's 45 frames at 60 Hz outlast 20 at 30 Hz
    assert viewer.url.startswith("http://127.0.0.1:")


def test_moving_the_slider_poses_every_layer_and_updates_the_readout(viewer):
    panel, scene = viewer.panel, viewer.scene
    for step in (12, 30):
        panel.frame.value = step
        for b in scene.bodies:
            f = b.frames[step]
            np.testing.assert_allclose(b.mesh.bones[5].wxyz, b.skinned.bone_wxyz[f, 5], atol=1e-6)
            np.testing.assert_allclose(b.skeleton.points[3, 1], b.skinned.joints[f, 4], atol=1e-6)
        assert f"{panel.errors['baseline_6dof'][step]:.1f}" in panel.readout.content
    plates = scene.plates[0]
    panel.frame.value = 14  # the eval's frame 7: the left hand unseen, held at frame 4's pose
    np.testing.assert_array_equal(plates.observed.batched_scales, [1, 1, 0])
    grey = plates.missing.points.reshape(3, 3, 2, 3)
    assert np.linalg.norm(grey[2, :, 1] - grey[2, :, 0], axis=-1).min() > 0.05
    assert np.allclose(grey[:2, :, 1], grey[:2, :, 0])  # the seen ones draw nothing grey
    np.testing.assert_allclose(grey[2, 0, 0], scene.content.plates[0].pos[4, 2], atol=1e-6)


def test_layer_checkboxes_hide_their_nodes(viewer):
    boxes = {b.label: b for b in viewer.panel.toggles}
    boxes["network: mesh"].value = False
    assert not viewer.scene.bodies[1].mesh.visible and viewer.scene.bodies[1].skeleton.visible
    boxes["network: mesh"].value = True
    assert viewer.scene.bodies[1].mesh.visible


def test_play_advances_the_timeline(viewer):
    viewer.panel.frame.value = 0
    viewer.panel.playing.value = True
    time.sleep(0.5)
    viewer.panel.playing.value = False
    assert viewer.panel.frame.value > 5


def _read_recording(path: Path) -> dict:
    """The message list of a ``.viser`` file (viser's layout: inner size, zstd of [msgpack
    length, msgpack, binary buffers])."""
    raw = path.read_bytes()
    inner = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw[8:])).read()
    n = int.from_bytes(inner[:8], "little")
    return msgspec.msgpack.decode(inner[8 : 8 + n])


def test_a_saved_recording_holds_every_step_and_a_page_that_plays_it(viewer, tmp_path):
    from rbmcap.view.recording import save_recording

    viser_path, html_path = save_recording(viewer.scene, tmp_path / "scene.viser")
    rec = _read_recording(viser_path)
    assert rec["durationSeconds"] == pytest.approx(45 / 60)
    bone_times = {t for t, m in rec["messages"] if m["type"] == "SetBoneOrientationMessage"}
    assert len(bone_times) == 45  # one pose per timeline step
    html = html_path.read_text()
    assert "window.__VISER_EMBED_DATA__=" in html and len(html) > len(viser_path.read_bytes())


# ------------------------------------------------------------------------ a real browser (slow)
NETWORK_BLUE = (70, 130, 230)
SOFTWARE_GL = ["--use-angle=swiftshader", "--enable-unsafe-swiftshader", "--no-sandbox"]
"""Headless chromium draws WebGL on the CPU (SwiftShader): no GPU needed."""


def _colour_pixels(png: bytes, rgb, tol: int = 40, right: int = 940) -> int:
    """Pixels of the 3D view (left of the panel) within ``tol`` of ``rgb`` (shaded surfaces
    vary, so the hue's channel order is what is matched)."""
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)[:, :right]
    return int((np.abs(img - np.asarray(rgb)).max(axis=-1) < tol).sum())


def _red_axis_pixels(png: bytes, right: int = 940) -> int:
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)[:, :right]
    return int(((img[..., 0] > 180) & (img[..., 1] < 90) & (img[..., 2] < 90)).sum())


def _screenshot_until(page, done, timeout_s: float = 120.0) -> bytes:
    """Screenshots every second until ``done(png)`` (software WebGL takes a while to draw)."""
    end = time.monotonic() + timeout_s
    while True:
        png = page.screenshot()
        if done(png) or time.monotonic() > end:
            return png
        time.sleep(1.0)


def _keep(png: bytes, name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    path.write_bytes(png)
    if os.environ.get("RBMCAP_SCREENSHOT_DIR"):
        keep = Path(os.environ["RBMCAP_SCREENSHOT_DIR"])
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, keep / name)
    return path


def _needs_browser_tools() -> None:
    """Skips without chromium, viser or playwright; fails instead in CI (``CI`` set, as
    ``.ci/run`` sets it), where a skipped browser test would let the viewer go unchecked."""
    missing = [
        what
        for what, found in (
            (f"Debian's chromium ({CHROMIUM})", CHROMIUM.exists()),
            ("viser", importlib.util.find_spec("viser")),
            ("playwright", importlib.util.find_spec("playwright")),
        )
        if not found
    ]
    if missing:
        give_up = pytest.fail if os.environ.get("CI") else pytest.skip
        give_up(f"{' and '.join(missing)} not installed: the browser test cannot run")


@pytest.mark.slow
def test_the_viewer_draws_bodies_plates_and_timeline_in_chromium(
    checkpoint, tiny_dataset, tmp_path
):
    _needs_browser_tools()
    import playwright.sync_api as playwright

    from rbmcap.view.server import start_viewer

    out = tmp_path / "eval"
    assert (
        main(
            [
                "eval",
                "--ckpt",
                str(checkpoint),
                "--data",
                str(tiny_dataset),
                "--split",
                "test",
                "--baseline",
                "--max-frames",
                "40",
                "--frames-per-sequence",
                "25",
                "--solver-iterations",
                "5",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    content = load_view([out])
    shown = content.bodies[0].motion.name.split(" ")[0]  # another motion than the evaluated one
    motion = next(
        m
        for m in sorted((tiny_dataset.parent / "motions").rglob("*_poses.npz"))
        if m.stem not in shown
    )
    viewer = start_viewer(load_view([out, motion]), port=0, spread=0.8)
    try:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=SOFTWARE_GL
            )
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(viewer.url)
            page.wait_for_selector("canvas", timeout=60_000)
            first = _screenshot_until(
                page,
                lambda png: _colour_pixels(png, NETWORK_BLUE) > 300 and _red_axis_pixels(png) > 20,
            )
            _keep(first, "view_frame0.png", tmp_path)
            assert _colour_pixels(first, NETWORK_BLUE) > 300, "the network's body is not drawn"
            assert _red_axis_pixels(first) > 20, "no plate frame (red x axes) is drawn"
            for text in ("Timeline", "frame", "play", "Error vs truth (this frame)"):
                assert page.get_by_text(text, exact=True).is_visible(), text

            page.get_by_role("slider").first.focus()
            page.keyboard.press("End")  # scrub to the last step from the browser
            last = viewer.scene.steps - 1
            end = time.monotonic() + 30
            while viewer.panel.frame.value != last and time.monotonic() < end:
                time.sleep(0.2)
            assert viewer.panel.frame.value == last, "the client's slider did not reach the server"
            time.sleep(3.0)
            moved = _screenshot_until(page, lambda png: _changed(first, png) > 0.002, 60.0)
            _keep(moved, "view_last_frame.png", tmp_path)
            assert _changed(first, moved) > 0.002, "the pose did not change on screen"
            browser.close()
    finally:
        viewer.close()


def _changed(a: bytes, b: bytes, right: int = 940) -> float:
    """Fraction of the 3D view's pixels that differ between two screenshots."""
    from PIL import Image

    x, y = (
        np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=int)[:, :right]
        for png in (a, b)
    )
    return float((np.abs(x - y).max(axis=-1) > 30).mean())
