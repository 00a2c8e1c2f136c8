"""The floor fit (SMPL fitted to reference joint centres) is kept in the cache per input."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from rbmcap.cli.main import main
from rbmcap.evaluation import floor
from rbmcap.evaluation.floor import fit_joint_centres
from rbmcap.evaluation.reference import ReferenceMap
from rbmcap.io.capture import Capture
from rbmcap.motion.procedural import generate
from rbmcap.skeleton import SMPL_JOINT_NAMES

FRAMES = 12
ITERATIONS = 20


@pytest.fixture(scope="module")
def centres(standin):
    """(points (T, J, 3), valid (T, J), SMPL joint indices, motion): a walk's own joints under
    the plug-in-gait reference's names."""
    m = generate("walk", seed=2, body=standin)
    ref = ReferenceMap.load("plug-in-gait")
    joints = [SMPL_JOINT_NAMES.index(j) for j in ref.all_joints]
    with torch.no_grad():
        posed = standin.pose_joints(
            torch.as_tensor(m.poses[:FRAMES], dtype=torch.float32),
            torch.as_tensor(m.betas[: standin.num_betas], dtype=torch.float32),
            torch.as_tensor(m.trans[:FRAMES], dtype=torch.float32),
        )[0]
    points = posed[:, joints].numpy()
    return points, np.ones(points.shape[:2], bool), joints, m


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty cache folder; returns the folder floor fits go to."""
    monkeypatch.setenv("RBMCAP_CACHE", str(tmp_path))
    return tmp_path / "floor"


@pytest.fixture
def fits(monkeypatch):
    """Count the floor's L-BFGS fits (a list that grows by one per fit)."""
    calls = []
    real = floor._fit

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(floor, "_fit", counted)
    return calls


def test_a_second_fit_of_the_same_centres_is_read_from_the_cache(standin, centres, cache, fits):
    points, valid, joints, _ = centres
    first = fit_joint_centres(standin, points, valid, joints, iterations=ITERATIONS)
    assert len(fits) == 1 and len(list(cache.glob("*.npz"))) == 1
    second = fit_joint_centres(standin, points, valid, joints, iterations=ITERATIONS)
    assert len(fits) == 1
    for key in floor.FIELDS:
        np.testing.assert_array_equal(getattr(second, key), getattr(first, key))
    assert [p.name for p in cache.iterdir()] == [p.name for p in cache.glob("*.npz")]


@pytest.mark.parametrize("change", ["points", "valid", "iterations", "joints", "prior_weight"])
def test_any_other_input_is_fitted_again(standin, centres, cache, fits, change):
    points, valid, joints, _ = centres
    fit_joint_centres(standin, points, valid, joints, iterations=ITERATIONS)
    kwargs = {"iterations": ITERATIONS}
    if change == "points":
        points = points + np.float32(1e-4)
    elif change == "valid":
        valid = valid.copy()
        valid[0, 0] = False
    elif change == "iterations":
        kwargs["iterations"] = ITERATIONS + 1
    elif change == "joints":
        joints = list(reversed(joints))
    else:
        kwargs["prior_weight"] = 0.2
    fit_joint_centres(standin, points, valid, joints, **kwargs)
    assert len(fits) == 2 and len(list(cache.glob("*.npz"))) == 2


def test_without_the_cache_nothing_is_written(standin, centres, cache, fits):
    points, valid, joints, _ = centres
    for _ in range(2):
        fit_joint_centres(standin, points, valid, joints, iterations=ITERATIONS, cache=False)
    assert len(fits) == 2 and not cache.exists()


def test_a_damaged_cache_entry_is_fitted_again_and_rewritten(standin, centres, cache, fits):
    points, valid, joints, _ = centres
    first = fit_joint_centres(standin, points, valid, joints, iterations=ITERATIONS)
    (entry,) = cache.glob("*.npz")
    entry.write_bytes(b"not an npz")
    again = fit_joint_centres(standin, points, valid, joints, iterations=ITERATIONS)
    assert len(fits) == 2
    np.testing.assert_allclose(again.joints, first.joints)
    with np.load(entry) as z:
        assert set(z.files) == set(floor.FIELDS)


def test_eval_capture_fits_the_floor_once_per_capture(centres, cache, fits, tmp_path, capsys):
    points, valid, _, m = centres
    ref = ReferenceMap.load("plug-in-gait")
    cap = Capture(
        fps=60.0,
        names=[],
        pos=np.zeros((FRAMES, 0, 3)),
        rot=np.zeros((FRAMES, 0, 3, 3)),
        valid=np.zeros((FRAMES, 0), bool),
        point_names=list(ref.all_joints.values()),
        points=points,
        point_valid=valid,
    )
    cap.save(tmp_path / "capture.npz")
    motion = replace(m, poses=m.poses[:FRAMES], trans=m.trans[:FRAMES])
    motion.save(tmp_path / "motion.npz")
    args = ["eval-capture", str(tmp_path / "motion.npz"), str(tmp_path / "capture.npz")]
    args += ["--floor-iterations", str(ITERATIONS), "--json"]
    reports = []
    for _ in range(2):
        assert main(args) == 0
        reports.append(json.loads(capsys.readouterr().out))
    assert len(fits) == 1
    assert reports[0] == reports[1]
