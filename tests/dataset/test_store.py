"""The dataset store: layout, reader, resumption, refusal, shards and merge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers.motions import write_motion
from helpers.shared import REPO

from rbmcap.dataset import (
    ARRAY_DTYPES,
    Manifest,
    RBMDataset,
    SynthOptions,
    dataset_info,
    merge_datasets,
    synthesize_dataset,
)
from rbmcap.dataset.store import CRASH_ENV, WORK
from rbmcap.errors import ConfigError, DataError, FormatError
from rbmcap.markers.synth import Synthesizer
from rbmcap.motion.smpl_motion import read_motion


@pytest.fixture(scope="module")
def motions(tmp_path_factory) -> Path:
    """Six train sequences (one at 120 Hz), one val, one test, one with NaN."""
    root = tmp_path_factory.mktemp("motions")
    for i in range(6):
        fps = 120.0 if i == 3 else 60.0
        write_motion(root / "CMU" / f"s{i % 2}" / f"m{i}_poses.npz", 60 + 23 * i, i, fps)
    write_motion(root / "HumanEva" / "s0" / "h0_poses.npz", 70, 10)
    write_motion(root / "Transitions" / "s0" / "t0_poses.npz", 50, 11)
    write_motion(root / "CMU" / "bad" / "nan_poses.npz", 40, 12, nan=True)
    return root


@pytest.fixture(scope="module")
def body():
    from rbmcap.body import load_body_model

    return load_body_model("standin")


def _build(motions, out, body, **kw):
    skipped = []
    options = SynthOptions(motions=motions, out=out, progress=False, **kw)
    report = synthesize_dataset(options, body=body, on_skip=lambda s, r: skipped.append((s, r)))
    return report, skipped


@pytest.fixture(scope="module")
def built(motions, body, tmp_path_factory):
    out = tmp_path_factory.mktemp("built") / "ds"
    report, skipped = _build(motions, out, body, realism="realistic", seed=5)
    return out, report, skipped


def _tree_bytes(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_layout_is_a_manifest_and_one_array_per_name_per_split(built):
    out, _, _ = built
    assert (out / "manifest.json").is_file() and not (out / WORK).exists()
    m = Manifest.load(out)
    assert list(m.splits()) == ["train", "val", "test"]
    assert m.splits()["train"]["sequences"] == 6 and m.splits()["val"]["frames"] == 70
    for split in ("train", "val", "test"):
        for name in ARRAY_DTYPES:
            arr = np.load(out / split / f"{name}.npy", mmap_mode="r")
            assert arr.shape[0] == m.splits()[split]["frames"]
            assert arr.dtype == np.dtype(ARRAY_DTYPES[name])
    entry = m.sequences[0]
    assert set(vars(entry)) >= {"name", "source", "split", "frames", "offset", "fps", "checksum"}
    raw = json.loads((out / "manifest.json").read_text())
    assert raw["format_version"] == 1 and raw["marker_set"] == "rbm14"
    assert raw["config_hash"] == m.config_hash and raw["realism"] == "realistic"


def test_motions_are_resampled_to_the_output_rate(built, motions):
    m = Manifest.load(built[0])
    fast = next(s for s in m.sequences if s.source == "CMU/s1/m3_poses.npz")
    assert fast.fps == 60.0
    assert fast.frames == read_motion(motions / fast.source).resample(60.0).num_frames


def test_bad_file_is_skipped_and_named(built):
    _, _, skipped = built
    assert [s for s, _ in skipped] == ["CMU/bad/nan_poses.npz"]
    assert "NaN" in skipped[0][1]
    assert Manifest.load(built[0]).skipped[0]["source"] == "CMU/bad/nan_poses.npz"


def test_stored_rows_equal_direct_synthesis(built, motions, body):
    out, _, _ = built
    data = RBMDataset(out, "val")
    motion = read_motion(motions / "HumanEva/s0/h0_poses.npz")
    obs = Synthesizer(body, "rbm14", "realistic")(
        motion.poses, motion.trans, motion.betas[:10], fps=60.0, seed=5, key="HumanEva/s0/h0_poses"
    )
    seq = data.sequence("HumanEva/s0/h0_poses")
    np.testing.assert_array_equal(seq["rbm_pos"], obs.pos)
    np.testing.assert_array_equal(seq["rbm_rot"], obs.rot)
    np.testing.assert_array_equal(seq["rbm_valid"], obs.valid)
    np.testing.assert_array_equal(seq["joints"], obs.joints)
    np.testing.assert_array_equal(seq["poses"], motion.poses.astype(np.float32))
    np.testing.assert_array_equal(seq["betas"], np.tile(motion.betas[:10], (70, 1)).astype("f4"))


def test_reader_gives_any_window_by_slicing_memory_maps(built):
    data = RBMDataset(built[0], "train")
    assert isinstance(data.arrays["rbm_rot"], np.memmap)
    windows = data.windows(length=30, stride=10)
    expected = sum(max(0, (s.frames - 30) // 10 + 1) for s in data.sequences)
    assert len(windows) == expected
    for k in (0, len(windows) // 2, len(windows) - 1):
        seq, start = windows.locate(k)
        w = windows[k]
        s = data.sequences[seq]
        assert w["rbm_pos"].shape == (30, 14, 3) and start + 30 <= s.frames
        np.testing.assert_array_equal(
            w["trans"], data.arrays["trans"][s.offset + start : s.offset + start + 30]
        )
    with pytest.raises(IndexError):
        windows[len(windows)]
    with pytest.raises(IndexError):
        data.window(0, start=data.sequences[0].frames - 5, length=10)


def test_reader_checksums_and_errors(built, tmp_path):
    out = built[0]
    assert RBMDataset(out, "train").verify() == []
    with pytest.raises(DataError, match="no split 'holdout'"):
        RBMDataset(out, "holdout")
    with pytest.raises(FormatError, match="not an rbmcap dataset"):
        RBMDataset(tmp_path, "train")


def test_info_summarises_the_dataset(built):
    info = dataset_info(built[0])
    frames = sum(s.frames for s in Manifest.load(built[0]).sequences if s.split == "train")
    assert info["splits"]["train"] == {"sequences": 6, "frames": frames}
    assert info["sequences"] == 8 and info["skipped"] == 1
    assert info["marker_set"] == "rbm14" and info["realism"] == "realistic"
    assert info["body_model"].startswith("standin")
    assert len(info["config_hash"]) == 64


def test_rerun_with_the_same_configuration_is_up_to_date(built, motions, body):
    out = built[0]
    before = _tree_bytes(out)
    report, _ = _build(motions, out, body, realism="realistic", seed=5)
    assert report.up_to_date and _tree_bytes(out) == before


def test_output_made_with_another_configuration_is_refused(built, motions, body):
    out = built[0]
    before = _tree_bytes(out)
    with pytest.raises(ConfigError, match=r"another configuration \(differs in: seed\)"):
        _build(motions, out, body, realism="realistic", seed=6)
    with pytest.raises(ConfigError, match="realism"):
        _build(motions, out, body, realism="none", seed=5)
    assert _tree_bytes(out) == before


def test_unrelated_non_empty_folder_is_refused(motions, body, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty"):
        _build(motions, tmp_path, body)


def test_single_bad_motion_file_is_one_clear_error(motions, body, tmp_path):
    with pytest.raises(DataError, match=r"nan_poses.npz: .*NaN"):
        _build(motions / "CMU/bad/nan_poses.npz", tmp_path / "o", body)


def _cli_synth(motions: Path, out: Path, crash: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "disabled"}
    env.pop(CRASH_ENV, None)
    if crash:
        env[CRASH_ENV] = crash
    cmd = [
        sys.executable,
        "-m",
        "rbmcap.cli.main",
        "synth",
        "--motions",
        str(motions),
        "--out",
        str(out),
        "--realism",
        "harsh",
        "--seed",
        "3",
        "--no-progress",
    ]
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)


def test_interrupted_runs_resume_to_a_byte_identical_dataset(motions, body, tmp_path, monkeypatch):
    reference = tmp_path / "reference"
    _build(motions, reference, body, realism="harsh", seed=3)
    out = tmp_path / "out"
    # the process dies (os._exit, no clean-up) while writing the 3rd sequence's part
    first = _cli_synth(motions, out, crash="chunk:3")
    assert first.returncode == 86, first.stderr
    assert not (out / "manifest.json").exists()
    assert len(list((out / WORK / "parts").iterdir())) == 3  # 2 parts + 1 half-written
    # dies again half-way through renaming the final arrays into place (in-process stand-in for
    # a kill: nothing is cleaned up on the way out)
    from rbmcap.dataset import store

    class Killed(BaseException):
        pass

    def die_at_second_rename(event, count=[0]):  # noqa: B006 - a call counter
        if event == "finalize":
            count[0] += 1
            if count[0] == 2:
                raise Killed

    monkeypatch.setattr(store, "crash_point", die_at_second_rename)
    with pytest.raises(Killed):
        _build(motions, out, body, realism="harsh", seed=3)
    monkeypatch.undo()
    assert not (out / "manifest.json").exists() and list(out.glob("train/.*.tmp-*"))
    report, _ = _build(motions, out, body, realism="harsh", seed=3)
    assert report.made == 0 and report.reused == 8
    assert _tree_bytes(out) == _tree_bytes(reference)


def test_a_damaged_part_is_detected_removed_and_redone(motions, body, built, tmp_path, monkeypatch):
    from rbmcap.dataset import store

    class Killed(BaseException):
        pass

    def die(event):
        if event == "finalize":
            raise Killed

    out = tmp_path / "out"
    monkeypatch.setattr(store, "crash_point", die)
    with pytest.raises(Killed):
        _build(motions, out, body, realism="realistic", seed=5)
    monkeypatch.undo()
    part = next(p for p in sorted((out / WORK / "parts").iterdir()) if p.name[0] != ".")
    data = bytearray((part / "rbm_rot.npy").read_bytes())
    data[-3] ^= 0x40  # e.g. a power cut before the unsynced part reached the disk
    (part / "rbm_rot.npy").write_bytes(bytes(data))
    with pytest.raises(DataError, match=r"do not match their checksum.*run again"):
        _build(motions, out, body, realism="realistic", seed=5)
    report, _ = _build(motions, out, body, realism="realistic", seed=5)
    assert report.made == 1 and report.reused == 7
    assert _tree_bytes(out) == _tree_bytes(built[0])


def test_shards_merge_to_the_unsharded_dataset(motions, body, built, tmp_path):
    shards = []
    for i in range(3):
        shard = tmp_path / f"shard{i}"
        _build(motions, shard, body, realism="realistic", seed=5, shard=(i, 3))
        shards.append(shard)
    assert Manifest.load(shards[1]).shard == {"index": 1, "count": 3, "total_sequences": 9}
    merged = tmp_path / "merged"
    merge_datasets(shards[::-1], merged)
    assert _tree_bytes(merged) == _tree_bytes(built[0])
    merge_datasets(shards, merged)  # merging again is a no-op
    assert _tree_bytes(merged) == _tree_bytes(built[0])
    with pytest.raises(ConfigError, match="missing shard"):
        merge_datasets(shards[:2], tmp_path / "partial")
    with pytest.raises(ConfigError, match="given twice"):
        merge_datasets([shards[0], shards[0], shards[1]], tmp_path / "twice")


def test_merge_refuses_datasets_of_different_configurations(motions, body, built, tmp_path):
    other = tmp_path / "other"
    _build(motions, other, body, realism="none", seed=5, shard=(0, 2))
    with pytest.raises(ConfigError, match="another configuration"):
        merge_datasets([built[0], other], tmp_path / "m")


@pytest.mark.slow
def test_workers_give_the_same_bytes_as_one_process(motions, body, built, tmp_path):
    out = tmp_path / "par"
    _build(motions, out, body, realism="realistic", seed=5, workers=2)
    assert _tree_bytes(out) == _tree_bytes(built[0])


@pytest.mark.slow
def test_sigkill_part_way_then_rerun_is_byte_identical(body, tmp_path):
    import signal
    import time

    root = tmp_path / "many"
    for i in range(16):
        write_motion(root / "CMU" / "s" / f"m{i:02d}_poses.npz", 600, i)
    reference = tmp_path / "ref"
    _build(root, reference, body, realism="harsh", seed=3)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    cmd = [
        sys.executable,
        "-m",
        "rbmcap.cli.main",
        "synth",
        "--motions",
        str(root),
        "--out",
        str(out),
        "--realism",
        "harsh",
        "--seed",
        "3",
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stderr=subprocess.DEVNULL)
    parts = out / WORK / "parts"
    deadline = time.time() + 120
    while time.time() < deadline and not (parts.is_dir() and len(list(parts.iterdir())) >= 4):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the synthesis ended before it was killed"
    assert not (out / "manifest.json").exists()
    rerun = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert _tree_bytes(out) == _tree_bytes(reference)
