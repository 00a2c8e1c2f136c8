"""Capture names → marker-set names: the default rule and map.yaml."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rbmcap.errors import ConfigError
from rbmcap.io.capture import Capture
from rbmcap.io.names import apply_mapping, load_mapping, map_names
from rbmcap.markers.markerset import load_marker_set

SET = list(load_marker_set("rbm14").names)


@pytest.mark.parametrize(
    "name, target",
    [
        ("S01:LeftShin", "left_shin"),
        ("L_Shin", "left_shin"),
        ("left-shin", "left_shin"),
        ("RThigh", "right_thigh"),
        ("S02:Head", "head"),
        ("CHEST", "chest"),
        ("LeftUpperArm", "left_upper_arm"),
        ("r_forearm", "right_forearm"),
        ("Foot_R", "right_foot"),
    ],
)
def test_default_rule_maps_side_and_body_part(name: str, target: str):
    assert map_names([name], SET, allow_missing=True) == {name: target}


def _all_plates(prefix: str = "S01:") -> list[str]:
    return [prefix + "".join(w.capitalize() for w in n.split("_")) for n in SET]


def test_a_full_subject_maps_one_to_one_and_extra_objects_are_left_out():
    names = [*_all_plates(), "Table", "S01:Wand"]
    result = map_names(names, SET)
    assert sorted(result.values()) == sorted(SET)
    assert "Table" not in result


def test_ambiguous_and_missing_names_are_one_error_listing_candidates():
    names = [n for n in _all_plates() if n != "S01:RightShin"] + ["S02:LeftShin"]
    with pytest.raises(ConfigError) as info:
        map_names(names, SET)
    msg = str(info.value)
    assert "\n" not in msg
    assert "'left_shin' is matched by S01:LeftShin, S02:LeftShin" in msg
    assert "'right_shin' is unassigned" in msg


def test_a_name_matching_two_plates_is_ambiguous():
    with pytest.raises(ConfigError, match="ambiguous: it matches left_arm, left_upper_arm"):
        map_names(["LeftUpperArm"], ["left_arm", "left_upper_arm"], allow_missing=True)


def test_mapping_yaml_is_used_and_checked(tmp_path: Path):
    path = tmp_path / "map.yaml"
    path.write_text("Box1: left_shin\nBox2: right_shin\n")
    mapping = load_mapping(path)
    assert map_names(["Box1", "Box2"], ["left_shin", "right_shin"], mapping) == mapping
    with pytest.raises(ConfigError, match="'right_shin' is unassigned"):
        map_names(["Box1"], ["left_shin", "right_shin"], {"Box1": "left_shin"})
    with pytest.raises(ConfigError, match="not a plate of the marker set"):
        map_names(["Box1"], ["left_shin"], {"Box1": "left_knee"})


def test_apply_mapping_orders_plates_like_the_set_and_invalidates_missing_ones():
    t = 5
    names = ["S01:RightShin", "S01:LeftShin"]
    pos = np.arange(t * 2 * 3, dtype=np.float32).reshape(t, 2, 3)
    cap = Capture(
        fps=100.0,
        names=names,
        pos=pos,
        rot=np.tile(np.eye(3), (t, 2, 1, 1)),
        valid=np.ones((t, 2), bool),
    )
    with pytest.raises(ConfigError, match="unassigned"):
        apply_mapping(cap, "rbm14")
    out = apply_mapping(cap, "rbm14", allow_missing=True)
    assert out.names == SET
    np.testing.assert_array_equal(out.pos[:, SET.index("left_shin")], pos[:, 1])
    np.testing.assert_array_equal(out.pos[:, SET.index("right_shin")], pos[:, 0])
    assert out.valid.sum(0).tolist() == [t if n in ("left_shin", "right_shin") else 0 for n in SET]
