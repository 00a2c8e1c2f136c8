"""The notebooks under ``notebooks/``: stored without outputs, and executed so they cannot rot.

Each executed notebook runs top to bottom in a fresh ``python3`` kernel (ipykernel, the
environment's own interpreter) with a temporary working directory, and must write the files it
promises there. A notebook joins :data:`EXECUTED` once it runs cleanly on the CPU in CI's time.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from helpers.shared import PIG, REPO

NOTEBOOKS = REPO / "notebooks"
CELL_TIMEOUT_S = 600
"""Per cell; the longest cells are the tiny training runs of the walkthrough and of
training_and_eval (15–40 s each on an idle 2-core machine, minutes when the cores are shared)."""
# The walkthrough runs on the real Vicon Plug-in Gait session when it is there (the notebook's own
# rule, the same folder); without it, it makes a synthetic Vicon CSV and writes that instead.
WALKTHROUGH_INPUT = (
    "outputs/vicon_walkthrough/static.npz"  # the Plug-in Gait static, imported
    if PIG.is_dir()
    else "outputs/vicon_walkthrough/walk_segments.csv"  # the synthetic Vicon export
)

EXECUTED = {
    # notebook -> files (relative to its working directory) a run must leave behind
    "live_replay.ipynb": ("live_replay.png",),
    "quickstart.ipynb": (
        "quickstart_body.png",
        "quickstart_plates.png",
        "quickstart_error.png",
        "quickstart_prediction.png",
    ),
    "training_and_eval.ipynb": (
        "outputs/training_and_eval/train/checkpoints/last.ckpt",
        "outputs/training_and_eval/training_loss.png",
        "outputs/training_and_eval/eval/report.md",
        "outputs/training_and_eval/eval/metrics.json",
        "outputs/training_and_eval/eval/per_sequence.csv",
        "outputs/training_and_eval/eval/per_joint_error.png",
        "outputs/training_and_eval/eval/error_over_time.png",
        "outputs/training_and_eval/eval/speed_vs_accuracy.png",
        "outputs/training_and_eval/eval_pretrained/metrics.json",
    ),
    "vicon_walkthrough.ipynb": (
        WALKTHROUGH_INPUT,
        "outputs/vicon_walkthrough/capture.npz",
        "outputs/vicon_walkthrough/calib.yaml",
        "outputs/vicon_walkthrough/motion.npz",
        "outputs/vicon_walkthrough/motion.bvh",
        "outputs/vicon_walkthrough/motion.glb",
        "outputs/vicon_walkthrough/walkthrough.png",
        "outputs/vicon_walkthrough/angles.csv",
        *(("outputs/vicon_walkthrough/angles_cycles.png",) if PIG.is_dir() else ()),
    ),
}


def _stored() -> list[str]:
    return sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


def test_the_executed_notebooks_exist():
    assert set(EXECUTED) <= set(_stored())


@pytest.mark.parametrize("name", _stored())
def test_stored_notebook_is_valid_and_has_no_outputs(name):
    import nbformat

    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(nb)
    dirty = [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and (c.outputs or c.execution_count is not None)
    ]
    assert not dirty, (
        f"{name}: code cells {dirty} hold outputs or execution counts; clear them before "
        f"committing (Jupyter: Edit > Clear Outputs of All Cells)"
    )
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """``executed(name)``: the notebook run once per module in its own temporary directory;
    returns (executed notebook, working directory, seconds). A failing cell raises nbclient's
    CellExecutionError, which shows the cell and its traceback."""
    import nbformat
    from nbclient import NotebookClient

    runs: dict[str, tuple] = {}

    def run(name: str):
        if name not in runs:
            cwd = tmp_path_factory.mktemp(Path(name).stem)
            nb = nbformat.read(NOTEBOOKS / name, as_version=4)
            client = NotebookClient(
                nb,
                timeout=CELL_TIMEOUT_S,
                kernel_name="python3",
                resources={"metadata": {"path": str(cwd)}},
                extra_arguments=["--InteractiveShell.colors=nocolor"],  # plain tracebacks
            )
            start = time.perf_counter()
            client.execute()
            runs[name] = (nb, cwd, time.perf_counter() - start)
        return runs[name]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXECUTED))
def test_notebook_runs_and_writes_what_it_promises(name, executed):
    nb, cwd, seconds = executed(name)
    errors = [
        o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"
    ]
    assert not errors
    for rel in EXECUTED[name]:
        path = cwd / rel
        assert path.is_file() and path.stat().st_size > 0, f"{name} did not write {rel}"
    shown = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "image/png" in o.get("data", {})
    ]
    assert shown, f"{name} shows no picture"
    print(f"{name}: {seconds:.0f} s")


@pytest.mark.slow
def test_walkthrough_exports_hold_the_whole_capture(executed):
    """The walkthrough's exports describe one motion of the capture's length and rate (the
    Plug-in Gait walk's 255 frames when the shared session is there): the ``.npz``, the BVH (24
    SMPL joints) and the ``.glb`` (one skinned body)."""
    import trimesh

    from rbmcap.io.capture import Capture
    from rbmcap.motion.bvh import read_bvh
    from rbmcap.motion.smpl_motion import SMPLMotion

    _, cwd, _ = executed("vicon_walkthrough.ipynb")
    out = cwd / "outputs" / "vicon_walkthrough"
    capture = Capture.load(out / "capture.npz")
    motion = SMPLMotion.load(out / "motion.npz")
    assert motion.num_frames == capture.num_frames and motion.fps == capture.fps == 100.0
    if PIG.is_dir():
        assert capture.num_frames == 255 and "LFEO" in capture.point_names
    assert np.isfinite(motion.poses).all()
    bvh = read_bvh(out / "motion.bvh")
    assert len(bvh.names) == 24 and bvh.num_frames == capture.num_frames
    assert bvh.frame_time == pytest.approx(1 / capture.fps)
    scene = trimesh.load(out / "motion.glb")
    assert len(scene.geometry) == 1


@pytest.mark.slow
def test_training_notebook_scores_its_own_checkpoint_beside_the_baseline(executed):
    """training_and_eval's report scores the checkpoint the notebook trained, beside the 6-DoF
    baseline, on 40 test frames of the dataset its overrides made (12 motions, data seed 1); the
    shipped model, scored on the same frames, is well ahead of one short epoch."""
    import json

    _, cwd, _ = executed("training_and_eval.ipynb")
    out = cwd / "outputs" / "training_and_eval"
    metrics = json.loads((out / "eval" / "metrics.json").read_text())
    ckpt = Path(metrics["options"]["ckpt"])
    assert (cwd / ckpt).resolve().parent == (out / "train" / "checkpoints").resolve()
    assert Path(metrics["options"]["data"]).name == "procedural_n12_s1_b0_rbm14_realistic"
    assert set(metrics["methods"]) == {"network", "baseline_6dof"}
    for m in metrics["methods"].values():
        assert m["frames"] == 40 and np.isfinite(m["metrics"]["mpjpe_mm"])
    pretrained = json.loads((out / "eval_pretrained" / "metrics.json").read_text())
    assert pretrained["options"]["ckpt"] == "standin-rbm14"
    assert pretrained["methods"]["network"]["frames"] == 40
    tiny = metrics["methods"]["network"]["metrics"]["mpjpe_mm"]
    assert pretrained["methods"]["network"]["metrics"]["mpjpe_mm"] < tiny / 2
