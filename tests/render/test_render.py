"""``rbmcap render`` and ``rbmcap eval --render-worst``: the truth, the network and the baseline
side by side, one panel each at one scale, with the plates; animations (GIF, MP4) and stills."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image, ImageSequence

from rbmcap.cli.main import main
from rbmcap.errors import EXIT_DATA, EXIT_FORMAT, EXIT_USAGE, DataError
from rbmcap.evaluation.saved import load_sequences, worst_sequence
from rbmcap.motion.skeleton_animation import frame_indices
from rbmcap.render.figure import HEIGHT_PX, PANEL_PX
from rbmcap.render.plates import AXIS_COLOURS

FRAMES = 25  # per sequence: small, so every render here takes seconds


@pytest.fixture(scope="module")
def evaluated(checkpoint, tiny_dataset, tmp_path_factory):
    """An eval folder (truth, network, 6-DoF baseline) rendered with --render-worst."""
    out = tmp_path_factory.mktemp("render") / "eval"
    code = main(
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
            str(FRAMES),
            "--solver-iterations",
            "5",
            "--no-vertices",
            "--render-worst",
            "--json",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return out


def _frames(path) -> list[np.ndarray]:
    with Image.open(path) as im:
        return [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)]


def _has_colour(image: np.ndarray, hex_colour: str, tol: int = 40) -> bool:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return bool((np.abs(image.astype(int) - rgb).max(-1) < tol).any())


def test_render_worst_adds_a_clip_of_the_networks_worst_sequence(evaluated):
    worst = worst_sequence(evaluated, "network")
    clip = evaluated / f"worst_{re.sub(r'[^A-Za-z0-9_.-]+', '_', worst)}.gif"
    assert sorted(p.name for p in evaluated.glob("worst_*")) == [clip.name]
    frames = _frames(clip)
    assert len(frames) == len(frame_indices(FRAMES, 60.0, 15.0, 90))
    assert frames[0].shape == (HEIGHT_PX, 3 * PANEL_PX, 3)  # truth, network, baseline
    report = (evaluated / "report.md").read_text()
    assert f"![worst sequence]({clip.name})" in report and worst in report


def test_gif_has_a_panel_per_method_and_a_picture_per_sampled_frame(evaluated, tmp_path):
    name = load_sequences(evaluated)[0].name
    out = tmp_path / "cmp.gif"
    assert (
        main(
            [
                "render",
                str(evaluated),
                "--sequence",
                name,
                "--methods",
                "network",
                "--fps",
                "30",
                "--no-mesh",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    frames = _frames(out)
    assert len(frames) == len(frame_indices(FRAMES, 60.0, 30.0, 150)) == 13
    assert frames[0].shape == (HEIGHT_PX, 2 * PANEL_PX, 3)  # truth and network only
    assert not np.array_equal(frames[0], frames[-1])  # it moves


def test_still_png_of_any_frame_draws_the_plates(evaluated, tmp_path):
    stills = {}
    for k in (0, FRAMES - 1):
        stills[k] = tmp_path / f"still{k}.png"
        assert main(["render", str(evaluated), "--frame", str(k), "--out", str(stills[k])]) == 0
    first, last = (np.asarray(Image.open(stills[k]).convert("RGB")) for k in stills)
    assert first.shape == (HEIGHT_PX, 3 * PANEL_PX, 3)
    assert not np.array_equal(first, last)
    assert all(_has_colour(first[40:-30, :PANEL_PX], c) for c in AXIS_COLOURS)


def test_mp4_is_written_with_imageio_ffmpeg(evaluated, tmp_path):
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    out = tmp_path / "cmp.mp4"
    assert main(["render", str(evaluated), "--no-mesh", "--out", str(out)]) == 0
    reader = imageio_ffmpeg.read_frames(str(out))
    meta = next(reader)
    assert tuple(meta["size"]) == (3 * PANEL_PX, HEIGHT_PX)
    assert sum(1 for _ in reader) == len(frame_indices(FRAMES, 60.0, 15.0, 150))


def _extent(mask: np.ndarray) -> np.ndarray:
    """(first column, last column, first row, last row) of a (H, W) mask's True pixels."""
    cols, rows = np.flatnonzero(mask.any(0)), np.flatnonzero(mask.any(1))
    return np.array([cols[0], cols[-1], rows[0], rows[-1]])


def _mask(image: np.ndarray, hex_colour: str, tol: int = 40) -> np.ndarray:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return np.abs(image.astype(int) - rgb).max(-1) < tol


def test_panels_share_one_camera_and_one_scale(evaluated, tmp_path):
    """The same body moved 0.4 m to the camera's right is drawn the same size, further right
    (a camera per panel would centre it again), with its left side blue and no plates."""
    from rbmcap.render.camera import camera_following
    from rbmcap.render.comparison import pose_panel
    from rbmcap.render.sources import body_for

    motion = load_sequences(evaluated)[0].motion("truth")
    joints = pose_panel("a", "a", motion, body_for("standin", motion.gender)).joints
    shift = 0.4 * camera_following(joints).basis[0]
    moved = motion.replace(trans=motion.trans + shift, name="moved")
    paths = [motion.save(tmp_path / "a.npz"), moved.save(tmp_path / "b.npz")]
    out = tmp_path / "two.png"
    assert main(["render", *map(str, paths), "--frame", "3", "--out", str(out)]) == 0
    image = np.asarray(Image.open(out).convert("RGB"))[40:-30]  # below the titles
    left, right = image[:, :PANEL_PX], image[:, PANEL_PX:]
    a, b = _extent(_mask(left, "#1f5fbf")), _extent(_mask(right, "#1f5fbf"))
    assert b[0] - a[0] > 40 and abs((b[0] - a[0]) - (b[1] - a[1])) <= 2  # moved right, same width
    np.testing.assert_allclose(a[2:], b[2:], atol=1)  # same rows: same height and scale
    assert _mask(left, "#c8312b").any()  # the right side red
    assert not any(_has_colour(left, c, tol=20) for c in AXIS_COLOURS)  # motions have no plates


def test_the_subjects_left_is_on_the_screens_right_when_it_faces_the_camera(evaluated):
    from rbmcap.render.camera import camera_following
    from rbmcap.render.sources import load_comparison
    from rbmcap.skeleton import SMPL_JOINT_NAMES

    joints = load_comparison([evaluated]).panels[0].joints
    camera = camera_following(joints)
    screen = camera.project(joints[0], 0)
    hips = screen[[SMPL_JOINT_NAMES.index(n) for n in ("left_hip", "right_hip")]]
    left, up = joints[0, 1] - joints[0, 2], np.array([0.0, 0.0, 1.0])
    facing = np.cross(left, up)
    assert facing @ camera.basis[2] > 0  # the stationary camera stands in front of the body
    assert hips[0, 0] > hips[1, 0]
    assert screen[SMPL_JOINT_NAMES.index("head"), 1] > screen[0, 1]  # head up


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (lambda e, t: [str(t), "--out", str(t / "x.gif")], "no sequences/", EXIT_FORMAT),
        (
            lambda e, t: [str(e), "--sequence", "nope*", "--out", str(t / "x.gif")],
            "nope",
            EXIT_DATA,
        ),
        (
            lambda e, t: [str(e), "--frame", "999", "--out", str(t / "x.png")],
            "frame 999 is out",
            EXIT_DATA,
        ),
        (
            lambda e, t: [str(e), "--frame", "2", "--out", str(t / "x.gif")],
            "a still needs",
            EXIT_USAGE,
        ),
        (lambda e, t: [str(e), "--out", str(t / "x.avi")], ".gif or .mp4", EXIT_USAGE),
        (
            lambda e, t: [str(e), "--methods", "hybrid", "--out", str(t / "x.gif")],
            "no method",
            EXIT_DATA,
        ),
    ],
    ids=[
        "not-an-eval-folder",
        "unknown-sequence",
        "frame-out-of-range",
        "frame-of-a-gif",
        "unknown-format",
        "unknown-method",
    ],
)
def test_bad_input_is_one_error_line_and_no_file(evaluated, tmp_path, capsys, args, message, code):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert main(["render", *args(evaluated, out_dir)]) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("rbmcap: error:") and "\n" not in err and message in err, err
    assert list(out_dir.iterdir()) == []


def test_a_failure_midway_leaves_nothing_half_written(evaluated, tmp_path, monkeypatch, capsys):
    from rbmcap.render.figure import ComparisonFigure

    drawn = ComparisonFigure.image

    def fail_on_third(self, frame):
        if frame >= 8:
            raise DataError("boom")
        return drawn(self, frame)

    monkeypatch.setattr(ComparisonFigure, "image", fail_on_third)
    pytest.importorskip("imageio_ffmpeg")  # a video is written as it is drawn
    code = main(["render", str(evaluated), "--no-mesh", "--out", str(tmp_path / "x.mp4")])
    assert code == EXIT_DATA
    assert "boom" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_render_cli_defaults_are_the_options_defaults():
    import dataclasses

    from rbmcap.cli.main import build_parser
    from rbmcap.render import RenderOptions

    args = build_parser().parse_args(["render", "eval", "--out", "a.gif"])
    built = RenderOptions(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(RenderOptions)}
    )
    assert dataclasses.asdict(built) == dataclasses.asdict(RenderOptions(["eval"], "a.gif"))
