"""Atomic writes: the file appears whole or not at all, with the permissions of a plain open()."""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from rbmcap.atomic import atomic_path, remove_stale_temporaries, write_text_atomic


@pytest.fixture
def umask():
    """Set the process umask for one test; the old one is put back."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_written_file_has_the_mode_open_gives_under_the_umask(tmp_path, umask, mask):
    umask(mask)
    written = write_text_atomic(tmp_path / "calib.yaml", "betas: []\n")
    with open(tmp_path / "plain.yaml", "w") as fh:
        fh.write("x")
    mode = stat.S_IMODE(written.stat().st_mode)
    assert mode == 0o666 & ~mask
    assert mode == stat.S_IMODE((tmp_path / "plain.yaml").stat().st_mode)


def test_a_writer_that_reopens_the_temporary_keeps_the_mode(tmp_path, umask):
    umask(0o022)
    with atomic_path(tmp_path / "take.npz") as tmp:
        np.savez(tmp, x=np.zeros(3))
    assert stat.S_IMODE((tmp_path / "take.npz").stat().st_mode) == 0o644
    assert np.load(tmp_path / "take.npz")["x"].shape == (3,)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = write_text_atomic(tmp_path / "out.txt", "old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer failed")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_temporaries_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    target = tmp_path / "out.txt"
    code = (
        "import os, sys; from rbmcap.atomic import atomic_path\n"
        "with atomic_path(sys.argv[1]) as tmp:\n"
        "    tmp.write_text('half'); os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(target)], check=False)
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]
    assert len(left) == 1 and left[0].name.endswith(".tmp.txt")
    assert remove_stale_temporaries(target) == left
    write_text_atomic(target, "whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]
