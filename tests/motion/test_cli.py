"""``rbmcap motion ...`` through ``rbmcap.cli.main.main``: outputs, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from helpers.motions import MIXAMO, PREFIX, smooth_random_motion, write_known_bvh
from PIL import Image

from rbmcap.cli.main import main
from rbmcap.motion import SMPLMotion

INFO_KEYS = {
    "frames",
    "fps",
    "duration_s",
    "num_joints",
    "betas",
    "gender",
    "name",
    "foot_skate_mm",
    "ground_penetration_mm",
}


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def known_bvh(tmp_path_factory, standin):
    from rbmcap.motion.kinematics import MotionKinematics

    folder = tmp_path_factory.mktemp("bvh")
    write_known_bvh(folder / "clip.bvh", smooth_random_motion(40), MotionKinematics(standin))
    jm = folder / "mixamo.yaml"
    jm.write_text(
        yaml.safe_dump(
            {
                "name": "mixamo",
                "units_to_metres": 0.01,
                "joints": {k: PREFIX + v for k, v in MIXAMO.items()},
            }
        )
    )
    return folder / "clip.bvh", jm


def test_from_bvh_then_info_json(capsys, tmp_path, known_bvh):
    bvh, joint_map = known_bvh
    out_file = tmp_path / "clip.npz"
    code, out, _ = run(
        capsys,
        "motion",
        "from-bvh",
        str(bvh),
        "--out",
        str(out_file),
        "--joint-map",
        str(joint_map),
        "--fps",
        "60",
    )
    assert code == 0 and out_file.is_file() and "frames at 60 fps" in out
    code, out, _ = run(capsys, "motion", "info", str(out_file), "--json")
    assert code == 0
    info = json.loads(out)
    assert set(info) == INFO_KEYS
    assert info["fps"] == 60.0 and info["num_joints"] == 24 and info["name"] == "clip"
    assert info["frames"] == 79  # 40 frames at 30 Hz span 39/30 s: 79 frames at 60 Hz
    assert info["duration_s"] == pytest.approx(79 / 60)
    from rbmcap.motion.quality import ground_penetration_mm

    motion = SMPLMotion.load(out_file)
    assert info["ground_penetration_mm"] == pytest.approx(ground_penetration_mm(motion), abs=1e-6)


def test_procedural_writes_the_same_bytes_for_the_same_seed(capsys, tmp_path):
    args = [
        "motion",
        "procedural",
        "--num",
        "2",
        "--seed",
        "5",
        "--kinds",
        "turn_in_place",
        "--fps",
        "30",
        "--quiet",
    ]
    for name in ("a", "b"):
        code, out, _ = run(capsys, *args, "--out", str(tmp_path / name))
        assert code == 0 and "wrote 2 motions" in out
    files_a = sorted(
        p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file()
    )
    assert len([f for f in files_a if f.name.endswith("_poses.npz")]) == 2
    assert {"splits/train.txt", "splits/val.txt", "splits/test.txt"} <= {
        f.as_posix() for f in files_a
    }
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_render_writes_a_small_gif(capsys, tmp_path):
    motion = smooth_random_motion(30)
    path = motion.save(tmp_path / "m.npz")
    gif = tmp_path / "anim.gif"
    code, _out, _ = run(
        capsys, "motion", "render", str(path), "--out", str(gif), "--fps", "10", "--max-frames", "6"
    )
    assert code == 0 and gif.is_file()
    with Image.open(gif) as im:
        assert 1 < im.n_frames <= 6 and im.size[0] >= 200
    assert gif.stat().st_size < 2_000_000


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["motion", "info", "{tmp}/missing.npz"], "missing.npz"),
        (["motion", "info", "{tmp}/cut_poses.npz"], "cut_poses.npz"),
        (["motion", "info", "{tmp}/nan_poses.npz"], "NaN"),
        (["motion", "from-bvh", "{bvh}", "--out", "{tmp}/x.npz"], "no known joint map fits"),
        (
            ["motion", "from-bvh", "{bvh}", "--out", "{tmp}/x.npz", "--joint-map", "cmu"],
            "joint map 'cmu' needs",
        ),
        (
            ["motion", "from-bvh", "{bvh}", "--out", "{tmp}/x.npz", "--joint-map", "{tmp}/no.yaml"],
            "no.yaml",
        ),
        (
            [
                "motion",
                "procedural",
                "--out",
                "{tmp}/p",
                "--num",
                "1",
                "--seed",
                "0",
                "--kinds",
                "moonwalk",
            ],
            "unknown motion kind",
        ),
    ],
)
def test_errors_print_one_line_and_exit_non_zero(capsys, tmp_path, known_bvh, argv, needle):
    cut = SMPLMotion(poses=np.zeros((3, 24, 3)), trans=np.zeros((3, 3))).save(
        tmp_path / "cut_poses.npz"
    )
    cut.write_bytes(cut.read_bytes()[:200])
    np.savez(
        tmp_path / "nan_poses.npz",
        poses=np.full((2, 156), np.nan),
        trans=np.zeros((2, 3)),
        betas=np.zeros(16),
        gender=np.array("male"),
        mocap_framerate=np.array(60.0),
    )
    argv = [a.format(tmp=tmp_path, bvh=known_bvh[0]) for a in argv]
    code, _out, err = run(capsys, *argv)
    assert code != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rbmcap: error:") and needle in lines[0]
    assert not (tmp_path / "x.npz").exists()  # nothing half-written


def test_procedural_spreads_motions_over_the_given_subjects(capsys, tmp_path):
    args = [
        "motion",
        "procedural",
        "--num",
        "3",
        "--seed",
        "1",
        "--kinds",
        "turn_in_place",
        "--fps",
        "30",
        "--subjects",
        "3",
        "--quiet",
        "--out",
        str(tmp_path),
    ]
    code, _, _ = run(capsys, *args)
    assert code == 0
    assert len(list(tmp_path.rglob("shape.npz"))) == 3
    code, _, err = run(capsys, *args[:-3], "--subjects", "4", "--out", str(tmp_path / "x"))
    assert code != 0 and "num_subjects must be between 1 and num (3)" in err
