"""``rbmcap import``: an export → the capture file; --json summary; bad input → one line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers.writers_optitrack import write_optitrack

from rbmcap.cli.main import main
from rbmcap.io.capture import Capture

LOCAL = np.array([[0.10, 0.04, 0.0], [-0.08, 0.06, 0.01], [-0.06, -0.07, 0.0], [0.04, -0.06, 0.02]])
POINTS = ["Box:a", "Box:b", "Box:c", "Box:d"]


@pytest.fixture
def take(tmp_path: Path) -> Path:
    """A Motive CSV: two rigid bodies (shins) and a 4-marker cluster as labelled points."""
    t = 30
    s = np.linspace(0, 1, t)
    pos = np.stack(
        [np.stack([s, 0.1 + 0 * s, 0.5 + 0 * s], 1), np.stack([s, -0.1 + 0 * s, 0.5 + 0 * s], 1)], 1
    )
    rot = np.tile(np.eye(3), (t, 2, 1, 1))
    valid = np.ones((t, 2), bool)
    valid[:3, 1] = False
    points = LOCAL[None] + np.stack([s, s, 1 + 0 * s], 1)[:, None]
    pv = np.ones((t, 4), bool)
    pv[10:12, :2] = False
    return write_optitrack(
        tmp_path / "take.csv",
        ["S01:LeftShin", "S01:RightShin"],
        pos,
        rot,
        valid,
        points=points,
        point_names=POINTS,
        point_types=["Marker"] * 4,
        point_valid=pv,
    )


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["import", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_summary_of_poses_from_the_file(take: Path, tmp_path: Path, capsys):
    out = tmp_path / "cap.npz"
    code, text, _ = _run(capsys, take, "--out", out, "--json")
    assert code == 0
    info = json.loads(text)
    assert set(info) == {"format", "fps", "frames", "rotation_deviation", "plates"}
    assert (info["format"], info["fps"], info["frames"]) == ("optitrack", 120.0, 30)
    assert 0 <= info["rotation_deviation"] < 1e-5  # 9-decimal unit quaternions
    assert [p["name"] for p in info["plates"]] == ["S01:LeftShin", "S01:RightShin"]
    assert set(info["plates"][0]) == {"name", "valid_fraction", "residual_mm_mean"}
    assert info["plates"][0]["residual_mm_mean"] is None
    assert info["plates"][1]["valid_fraction"] == pytest.approx(27 / 30)
    assert np.load(out)["pos"].shape == (30, 2, 3)


def test_plates_are_solved_and_their_estimated_shape_written_back(take, tmp_path, capsys):
    plates = tmp_path / "plates.yaml"
    plates.write_text(f"box: {{markers: {json.dumps(POINTS)}}}\n")
    code, text, _ = _run(capsys, take, "--plates", plates, "--out", tmp_path / "c.npz", "--json")
    assert code == 0
    (plate,) = json.loads(text)["plates"]
    assert plate["name"] == "box" and plate["valid_fraction"] == pytest.approx(28 / 30)
    assert plate["residual_mm_mean"] < 0.01
    assert "estimated" in plates.read_text() and "local:" in plates.read_text()


def test_names_are_mapped_into_the_marker_set(take, tmp_path, capsys):
    out = tmp_path / "c.npz"
    code, _, _ = _run(capsys, take, "--markers", "rbm14", "--allow-missing", "--out", out)
    assert code == 0
    cap = np.load(out)
    names = list(cap["names"])
    assert len(names) == 14 and cap["valid"][:, names.index("left_shin")].all()
    assert not cap["valid"][:, names.index("head")].any()


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--plates", "plates.yaml"], "at least 3"),
        (["--map", "map.yaml"], "'right_shin' is unassigned"),
        (["--markers", "rbm14"], "is unassigned"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_output(take, tmp_path, capsys, extra, needle):
    (tmp_path / "plates.yaml").write_text("box: {markers: ['Box:a', 'Box:b']}\n")
    (tmp_path / "map.yaml").write_text("S01:LeftShin: left_shin\n")
    out = tmp_path / "c.npz"
    argv = [take, *[str(tmp_path / e) if e.endswith(".yaml") else e for e in extra]]
    code, text, err = _run(capsys, *argv, "--out", out)
    assert code == 2 and text == ""
    assert err.count("\n") == 1 and needle in err
    assert not out.exists() and list(tmp_path.glob("*.npz*")) == []


def test_capture_file_reads_back(take, tmp_path, capsys):
    out = tmp_path / "c.npz"
    assert _run(capsys, take, "--out", out)[0] == 0
    data = np.load(out)
    cap = Capture(
        fps=float(data["fps"]),
        names=list(data["names"]),
        pos=data["pos"],
        rot=data["rot"],
        valid=data["valid"],
    )
    assert cap.num_plates == 2


def test_fps_option_reaches_a_trimmed_vicon_file_without_a_warning(tmp_path, capsys):
    """A Vicon CSV trimmed to its header rows has no rate line: --fps gives it (no 100 Hz guess)."""
    import warnings

    from helpers.writers_vicon import write_segments

    t = 12
    pos = np.zeros((t, 1, 3)) + np.linspace(0, 1, t)[:, None, None]
    rot = np.tile(np.eye(3), (t, 1, 1, 1))
    f = write_segments(
        tmp_path / "v.csv", ["S:Shin"], pos, rot, np.ones((t, 1), bool), trimmed=True
    )
    out = tmp_path / "c.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, text, _ = _run(capsys, f, "--fps", "250", "--out", out, "--json")
    assert code == 0 and json.loads(text)["fps"] == 250.0
    assert float(np.load(out)["fps"]) == 250.0
    code, _, err = _run(capsys, f, "--fps", "-5", "--out", tmp_path / "d.npz")
    assert code == 2 and "fps" in err and not (tmp_path / "d.npz").exists()
