"""The procedural motion library: plausible, inside the joint limits, on the floor, seeded.

Foot-skate bounds (``foot_skate_mm``, mean per-frame slide of the supporting foot, at 60 Hz):
walking gaits (walk, walk_turn, turn_in_place) under 1.0 mm a frame (6 cm/s) — their stance feet
are planted by construction and what remains is the foot rolling from heel to toe; running under
3.0 mm, because the metric also counts the first and last centimetres of each flight; motions on
the spot other than jumping jacks under 1.0 mm.
"""

from __future__ import annotations

import numpy as np
import pytest

from rbmcap.errors import ConfigError
from rbmcap.motion import JointLimits, discover, generate, generate_library, read_motion
from rbmcap.motion.kinematics import MotionKinematics
from rbmcap.motion.procedural import GAIT_KINDS, KINDS
from rbmcap.motion.quality import foot_skate_mm

SEED = 7
SKATE_BOUND_MM = {"walk": 1.0, "walk_turn": 1.0, "turn_in_place": 1.0, "run": 3.0}
ON_THE_SPOT_BOUND_MM = 1.0


@pytest.fixture(scope="module")
def motions(standin):
    """One motion of every kind: gaits at 60 Hz (the rate of the skate bounds), others at 30."""
    return {
        kind: generate(kind, SEED, fps=60.0 if kind in GAIT_KINDS else 30.0, body=standin)
        for kind in KINDS
    }


def test_library_has_at_least_ten_kinds_including_the_required_ones():
    required = {
        "walk",
        "run",
        "walk_turn",
        "squat",
        "reach",
        "arm_raise",
        "jumping_jack",
        "bend",
        "kick",
        "explore",
    }
    assert required <= set(KINDS) and len(KINDS) >= 10


@pytest.mark.parametrize("kind", list(KINDS))
def test_motion_is_finite_and_within_the_declared_joint_limits(motions, kind):
    motion = motions[kind]
    assert np.isfinite(motion.poses).all() and np.isfinite(motion.trans).all()
    limits = JointLimits.load()
    assert limits.within(motion.poses, tol=1e-9), np.degrees(limits.violation(motion.poses).max())
    assert motion.num_frames >= 2 * motion.fps  # at least two seconds
    assert motion.source["kind"] == kind and motion.source["seed"] == SEED


@pytest.mark.parametrize("kind", list(KINDS))
def test_body_stays_on_or_above_the_floor(motions, standin, kind):
    motion = motions[kind]
    kin = MotionKinematics(standin, motion.betas)
    lowest, _ = kin.lowest_candidates(motion.poses, motion.trans)
    assert lowest.min() > -1e-4  # never below the floor
    assert np.median(lowest) < 1e-3  # and standing on it, not floating
    # The full mesh agrees (checked on every 10th frame: a full forward pass is costly).
    exact = kin.lowest_vertex_heights(motion.poses[::10], motion.trans[::10])
    assert exact.min() > -1e-3


@pytest.mark.parametrize("kind", list(SKATE_BOUND_MM))
def test_gait_feet_do_not_skate(motions, standin, kind):
    motion = motions[kind]
    skate = foot_skate_mm(motion, MotionKinematics(standin, motion.betas))
    assert skate < SKATE_BOUND_MM[kind]


@pytest.mark.parametrize("kind", ["squat", "arm_raise", "reach", "bend", "kick", "explore"])
def test_feet_stay_put_in_motions_on_the_spot(motions, standin, kind):
    motion = motions[kind]
    kin = MotionKinematics(standin, motion.betas)
    # The per-frame bound is stated at 60 Hz; these motions were made at 30 Hz.
    assert foot_skate_mm(motion, kin) * motion.fps / 60.0 < ON_THE_SPOT_BOUND_MM
    joints, _ = kin.pose(motion.poses, motion.trans)
    assert np.linalg.norm(joints[-1, 0, :2] - joints[0, 0, :2]) < 0.3


def test_gaits_travel_and_turns_turn(motions, standin):
    def path(kind):
        m = motions[kind]
        return MotionKinematics(standin, m.betas).pose(m.poses, m.trans)[0][:, 0, :2]

    walk, run = path("walk"), path("run")
    walk_speed = np.linalg.norm(walk[-1] - walk[0]) / motions["walk"].duration_s
    run_speed = np.linalg.norm(run[-1] - run[0]) / motions["run"].duration_s
    assert 0.5 < walk_speed < run_speed < 4.0  # averages include starting and stopping
    assert np.linalg.norm(path("turn_in_place")[-1] - path("turn_in_place")[0]) < 0.3
    assert abs(motions["turn_in_place"].source["params"]["turn_total"]) >= 90


def test_same_seed_gives_the_same_motion_and_bytes(tmp_path, standin):
    a = generate("turn_in_place", 11, fps=30.0, body=standin)
    b = generate("turn_in_place", 11, fps=30.0, body=standin)
    assert np.array_equal(a.poses, b.poses) and np.array_equal(a.trans, b.trans)
    assert a.save(tmp_path / "a.npz").read_bytes() == b.save(tmp_path / "b.npz").read_bytes()
    c = generate("turn_in_place", 12, fps=30.0, body=standin)
    assert not np.array_equal(a.betas, c.betas)


def test_library_folder_is_amass_like_with_split_lists(tmp_path, standin):
    paths = generate_library(
        tmp_path,
        4,
        seed=3,
        kinds=["arm_raise", "turn_in_place"],
        fps=30.0,
        num_subjects=3,
        body=standin,
    )
    assert [p.name for p in paths] == [
        "arm_raise_0000_poses.npz",
        "turn_in_place_0001_poses.npz",
        "arm_raise_0002_poses.npz",
        "turn_in_place_0003_poses.npz",
    ]
    assert all(p.parent.parent.name == "Procedural" for p in paths)
    assert all((p.parent / "shape.npz").is_file() for p in paths)
    entries = discover(tmp_path, split_lists=tmp_path / "splits")
    assert sorted(e.path for e in entries) == sorted(paths)
    assert {e.split for e in entries} <= {"train", "val", "test"}
    assert None not in {e.split for e in entries}
    # One subject, one shape, one split: the betas in a subject folder all agree.
    by_subject: dict[str, set] = {}
    for e in entries:
        by_subject.setdefault(e.path.parent.name, set()).add(e.split)
        with np.load(e.path.parent / "shape.npz") as shape:
            assert np.array_equal(read_motion(e.path).betas, shape["betas"])
    assert all(len(s) == 1 for s in by_subject.values())


def test_library_keeps_other_sub_datasets_in_the_split_lists(tmp_path, standin):
    """Built after retargeted clips (or rebuilt), the library replaces only its own lines."""
    splits = tmp_path / "splits"
    splits.mkdir()
    (splits / "test.txt").write_text("cmu-iclone/02/002_01_poses.npz\nProcedural/S99/old.npz\n")
    kw = {"kinds": ["arm_raise"], "fps": 30.0, "num_subjects": 3, "body": standin}
    generate_library(tmp_path, 3, seed=3, **kw)
    first = {s: (splits / f"{s}.txt").read_text() for s in ("train", "val", "test")}
    assert "cmu-iclone/02/002_01_poses.npz\n" in first["test"]
    assert "S99/old.npz" not in "".join(first.values())
    generate_library(tmp_path, 3, seed=3, **kw)  # a rebuild: no duplicated lines
    assert {s: (splits / f"{s}.txt").read_text() for s in first} == first
    lines = "".join(first.values()).split()
    assert len([x for x in lines if x.startswith("Procedural/")]) == 3


def test_library_made_by_worker_processes_is_the_same_files_in_the_same_order(tmp_path, standin):
    kw = {"kinds": ["arm_raise", "squat"], "fps": 30.0, "num_subjects": 2, "body": standin}
    one = generate_library(tmp_path / "one", 4, seed=5, **kw)
    seen: list[int] = []
    two = generate_library(
        tmp_path / "two", 4, seed=5, workers=2, progress=lambda i, n, p: seen.append(i), **kw
    )
    assert seen == [0, 1, 2, 3]
    assert [p.relative_to(tmp_path / "two") for p in two] == [
        p.relative_to(tmp_path / "one") for p in one
    ]
    for a, b in zip(one, two):
        with np.load(a) as x, np.load(b) as y:
            assert sorted(x.files) == sorted(y.files)
            for key in x.files:
                assert np.array_equal(x[key], y[key]), (b.name, key)
    for split in ("train", "val", "test"):
        assert (tmp_path / "two/splits" / f"{split}.txt").read_text() == (
            tmp_path / "one/splits" / f"{split}.txt"
        ).read_text()


def test_workers_below_one_is_a_config_error_before_anything_is_written(tmp_path):
    with pytest.raises(ConfigError, match="workers=0: need at least 1"):
        generate_library(tmp_path / "lib", 2, seed=0, workers=0)
    assert not (tmp_path / "lib").exists()


def test_unknown_kind_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="unknown motion kind 'moonwalk'"):
        generate("moonwalk", 0)
    with pytest.raises(ConfigError, match="moonwalk"):
        generate_library(tmp_path, 2, seed=0, kinds=["walk", "moonwalk"])


def test_subject_count_is_checked(tmp_path):
    with pytest.raises(ConfigError, match="num_subjects must be between 1 and num"):
        generate_library(tmp_path, 2, seed=0, num_subjects=3)
    with pytest.raises(ConfigError, match="num_subjects"):
        generate_library(tmp_path, 2, seed=0, num_subjects=0)
