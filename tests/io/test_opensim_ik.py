"""OpenSim's inverse kinematics through rbmcap's runner: OpenSim's own example walk gives
OpenSim's own result, and a bad model or marker file is one clear error with nothing written."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest
from helpers.shared import SHARED_DATA

from rbmcap.errors import DataError, FormatError
from rbmcap.io.opensim.files import read_mot
from rbmcap.io.opensim.ik import run_inverse_kinematics

pytest.importorskip("opensim")

EXAMPLE = SHARED_DATA / "opensim"
LOCKED = ("subtalar_angle_r", "subtalar_angle_l", "mtp_angle_r", "mtp_angle_l")


@pytest.fixture(scope="module")
def example():
    if not (EXAMPLE / "subject01_walk1_ik.mot").is_file():
        pytest.skip(f"{EXAMPLE} is absent")
    return EXAMPLE


def model_with_reference_defaults(example, folder):
    """The scaled model present with the default values of its locked coordinates (held by the
    setup's coordinate tasks) set to those of the model OpenSim's result was made with,
    ``subject01_simbody.osim``: there, read off its result, the subtalar angles rest at 5.04° and
    15.13°; in the torso-adjusted model they rest at 0."""
    names, ref = read_mot(example / "subject01_walk1_ik.mot")
    text = (example / "subject01_simbody_adjusted.osim").read_text(encoding="utf-8")
    for name in LOCKED:
        value = math.radians(ref[0, names.index(name)])
        text = re.sub(
            rf'(<Coordinate name="{name}">.*?<default_value>)[^<]*(</default_value>)',
            rf"\g<1>{value!r}\g<2>",
            text,
            count=1,
            flags=re.DOTALL,
        )
    path = folder / "subject01_simbody.osim"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_runner_reproduces_opensims_own_ik_of_its_example_walk(example, tmp_path):
    model = model_with_reference_defaults(example, tmp_path)
    began = time.perf_counter()
    result = run_inverse_kinematics(
        model,
        example / "subject01_walk1.trc",
        tmp_path / "ik.mot",
        setup=example / "subject01_Setup_IK.xml",
        time_range=(0.5, 2.5),
    )
    print(f"IK of {result.frames} frames: {time.perf_counter() - began:.2f} s")
    names, got = read_mot(result.mot)
    ref_names, ref = read_mot(example / "subject01_walk1_ik.mot")
    assert names == ref_names and result.frames == 121
    rows = [int(np.argmin(abs(ref[:, 0] - t))) for t in got[:, 0]]
    assert np.abs(ref[rows, 0] - got[:, 0]).max() < 1e-3
    worst = np.abs(got - ref[rows]).max(axis=0)
    print(dict(zip(names[1:], np.round(worst[1:], 3), strict=True)))
    assert worst[1:].max() < 0.5, dict(zip(names, worst, strict=True))
    assert 0.01 < result.marker_rms_m < 0.03


def test_a_model_file_that_does_not_parse_is_one_format_error_and_writes_nothing(tmp_path):
    bad = tmp_path / "gait.osim"
    bad.write_text("<OpenSimDocument><Model", encoding="utf-8")
    trc = tmp_path / "m.trc"
    trc.write_text("PathFileType\t4\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"gait\.osim: not an OpenSim model") as info:
        run_inverse_kinematics(bad, trc, tmp_path / "out" / "ik.mot")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_marker_file_sharing_no_marker_with_the_model_is_a_data_error(example, tmp_path):
    from rbmcap.io.opensim.files import write_trc

    trc = write_trc(tmp_path / "m.trc", ["A", "B", "C"], np.zeros((3, 3, 3)), 60.0)
    with pytest.raises(DataError, match="0 of its markers are in the model"):
        run_inverse_kinematics(
            example / "subject01_simbody_adjusted.osim", trc, tmp_path / "ik.mot"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.trc"]
