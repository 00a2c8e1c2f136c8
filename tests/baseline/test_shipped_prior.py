"""The pose prior shipped in the package, and ``rbmcap baseline fit-prior --motions`` that makes
one from motions folders."""

from __future__ import annotations

import pytest
import torch

from rbmcap.baseline.prior import (
    DEFAULT_PRIOR_FILE,
    default_pose_prior,
    load_pose_prior,
    motion_poses,
)
from rbmcap.cli.main import main
from rbmcap.errors import EXIT_DATA
from rbmcap.paths import pretrained_dir


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread: small batches, where torch's thread pool costs more than it gives,
    and on busy cores its threads spin."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_shipped_prior_loads_small_and_prefers_a_natural_pose():
    path = pretrained_dir() / DEFAULT_PRIOR_FILE
    assert path.is_file() and path.stat().st_size < 2**20
    prior = default_pose_prior()
    assert prior.num_components == 8 and prior.dim == 69 and prior.means.dtype == torch.float32
    assert default_pose_prior(torch.float64).means.dtype == torch.float64
    relaxed = torch.zeros(24, 3)
    relaxed[[4, 5], 0] = 0.3  # knees a little bent
    twisted = relaxed.clone()
    twisted[[4, 5], 1] = 1.5  # knees twisted 86° about the shin
    assert prior(twisted) - prior(relaxed) > 10.0  # nats


@pytest.fixture(scope="module")
def motions(tmp_path_factory, standin):
    """A procedural motions folder of 6 motions with split lists."""
    from rbmcap.motion.procedural import generate_library

    root = tmp_path_factory.mktemp("motions")
    generate_library(root, 6, seed=0, body=standin, num_subjects=3)
    return root


def test_fit_prior_from_a_motions_folder_reads_its_split(motions, tmp_path, capsys):
    train, n_train = motion_poses(motions, "train")
    every, n_all = motion_poses(motions, None)
    assert 0 < n_train < n_all and len(train) < len(every) and train.shape[1:] == (24, 3)
    out = tmp_path / "prior.npz"
    assert (
        main(
            [
                "baseline",
                "fit-prior",
                "--motions",
                str(motions),
                "--components",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert f"{n_train} motions" in capsys.readouterr().err
    prior = load_pose_prior(out)
    assert prior.num_components == 2 and prior.num_samples == len(train)
    assert torch.isfinite(prior.means).all() and torch.isfinite(prior.covariances).all()


def test_fit_prior_from_a_folder_without_motions_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code = main(
        [
            "baseline",
            "fit-prior",
            "--motions",
            str(tmp_path / "empty"),
            "--out",
            str(tmp_path / "p.npz"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == EXIT_DATA and len(err.splitlines()) == 1 and "no motion files" in err
    assert not (tmp_path / "p.npz").exists()
