"""Property-based fuzzing of the YAML readers: marker sets (resolved on the stand-in
body, as they are used), plate definitions, BVH joint maps, calibration files and capture-name
mappings, on text, byte and structural mutations of small valid files; plus one plain regression
test for each bug the fuzzing found.

Contract (:func:`helpers.fuzzing.check_reader`): every input is read or refused with an
:class:`~rbmcap.errors.RBMCapError`, in bounded time. Classification: a file that is not UTF-8,
not YAML or not a mapping at the top is a FormatError naming ``file:line:column`` where YAML
gives one; well-formed YAML with a bad value is a ConfigError naming the file and the key.
NumPy's RuntimeWarnings (overflow, invalid value) count as errors inside the readers.
"""

from __future__ import annotations

import contextlib
import shutil
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers.fuzzing import check_reader, fuzz_settings, yaml_mutated
from hypothesis import given
from hypothesis import strategies as st

from rbmcap.calibrate.calibration import Calibration, PlateOffset
from rbmcap.config.packaged import conf_file
from rbmcap.errors import ConfigError, FormatError
from rbmcap.io.names import load_mapping, map_names
from rbmcap.io.plates import load_plate_definitions
from rbmcap.markers.markerset import load_marker_set
from rbmcap.motion.joint_map import JointMap

PLATES_SEED = b"""\
# plates.yaml: plate -> member markers, local coordinates in metres (plate frame)
boite:
  markers: [boite:gauche_ext, boite:gauche_int, boite:droite_int, boite:droite_ext]
  local:
    boite:gauche_ext: [0.051, 0.020, 0.000]
    boite:gauche_int: [0.020, 0.021, 0.001]
    boite:droite_int: [-0.020, 0.019, 0.000]
    boite:droite_ext: [-0.050, -0.020, 0.002]
tibia: {markers: [t1, t2, t3]}
"""
NAMES_SEED = b"""\
# map.yaml: capture object name -> marker-set plate name
S01:LeftShin: left_shin
S01:RightShin: right_shin
S01:Head: head
"""
CAPTURE_NAMES = ["S01:LeftShin", "S01:RightShin", "S01:Head", "Prop"]
RBM14_NAMES = list(load_marker_set("rbm14").names)
BVH_NAMES = ["Hips", "LeftHip", "LeftKnee", "LeftAnkle", "Chest", "Head"]


def _calibration_seed(tmp: Path) -> bytes:
    calib = Calibration(
        betas=np.array([0.12, -0.4, 0.0]),
        frames=[[0], [12, 40, 131]],
        rotation=np.array([0.0, 0.1, -0.2]),
        translation=np.array([1.0, 2.0, 0.05]),
        plates={
            "left_shin": PlateOffset(np.array([0.01, -0.02, 0.3]), np.array([0.0, 0.01, 0.02])),
            "head": PlateOffset(np.zeros(3), np.array([0.0, 0.0, -0.01])),
        },
    )
    return calib.save(tmp / "seed_calib.yaml").read_bytes()


@contextlib.contextmanager
def _warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def _fuzz(name: str, path: Path, data: bytes, read) -> str:
    path.write_bytes(data)

    def call():
        with _warnings_are_errors():
            return read(path)

    return check_reader(name, call)


# ------------------------------------------------------------------------------------ readers
_PLACED: dict[tuple, np.ndarray] = {}


def _read_marker_set(path: Path, body):
    """Load and place on the stand-in (anchors) and on an SMPL-sized mesh (vertex ids).

    Anchors already placed in an earlier example are not placed again (same anchors, same
    vertices): the fuzzing time goes to new values.
    """
    markers = load_marker_set(path)
    if markers.anchors not in _PLACED or any(a is None for a in markers.anchors):
        _PLACED[markers.anchors] = markers.resolve(body)
    if all(v is not None for v in markers.vertex_ids):
        markers.resolve(SimpleNamespace(num_vertices=6890), method="vertex")
    return markers


def _read_joint_map(path: Path):
    jmap = JointMap.load(path)
    bvh = SimpleNamespace(names=BVH_NAMES, num_frames=10, path="x.bvh")
    with contextlib.suppress(FormatError):  # a map for another skeleton: refused there, fine
        jmap.check_covers(bvh)
    return jmap


def _read_names(path: Path):
    mapping = load_mapping(path)
    with contextlib.suppress(ConfigError):  # names outside the capture or the set: refused
        map_names(CAPTURE_NAMES, RBM14_NAMES, mapping)
    return mapping


def _marker_seeds(tmp: Path) -> list[tuple[str, bytes]]:
    shutil.copy(conf_file("markers", "rbm14.yaml"), tmp / "rbm14.yaml")
    local = b"defaults: [rbm14.yaml, _self_]\nname: sel\nselect: [chest, left_hand, head]\n"
    return [
        ("rbm14.yaml", conf_file("markers", "rbm14.yaml").read_bytes()),
        ("rbm_a.yaml", conf_file("markers", "rbm_a.yaml").read_bytes()),
        ("vr3.yaml", conf_file("markers", "vr3.yaml").read_bytes()),
        ("sel.yaml", local),
    ]


def _run_markerset(tmp_path, standin):
    seeds = _marker_seeds(tmp_path)

    @fuzz_settings()
    @given(data=st.data())
    def run(data):
        name, seed = data.draw(st.sampled_from(seeds))
        _fuzz(
            "markerset-yaml",
            tmp_path / f"fuzz_{name}",
            data.draw(yaml_mutated(seed)),
            lambda p: _read_marker_set(p, standin),
        )

    run()


def _run_simple(tmp_path, stat, seeds, read):
    @fuzz_settings()
    @given(data=st.data())
    def run(data):
        seed = data.draw(st.sampled_from(seeds))
        _fuzz(stat, tmp_path / "fuzz.yaml", data.draw(yaml_mutated(seed)), read)

    run()


def _joint_map_seeds() -> list[bytes]:
    return [conf_file("joint_maps", f"{n}.yaml").read_bytes() for n in ("cmu", "iclone_cc")]


FUZZED = {
    "plates-yaml": (lambda tmp: [PLATES_SEED], load_plate_definitions),
    "joint-map-yaml": (lambda tmp: _joint_map_seeds(), _read_joint_map),
    "calibration-yaml": (lambda tmp: [_calibration_seed(tmp)], Calibration.load),
    "name-map-yaml": (lambda tmp: [NAMES_SEED], _read_names),
}
"""The readers fuzzed by :func:`_run_simple`: seeds (made in a scratch folder) and the reader."""


# -------------------------------------------------------------------------------- fuzz tests
@pytest.mark.acceptance
def test_fuzz_markerset_yaml(tmp_path, standin):
    _run_markerset(tmp_path, standin)


@pytest.mark.acceptance
@pytest.mark.parametrize("name", FUZZED)
def test_fuzz(tmp_path, name):
    seeds, read = FUZZED[name]
    _run_simple(tmp_path, name, seeds(tmp_path), read)


def test_the_seeds_are_accepted(tmp_path, standin):
    for name, seed in _marker_seeds(tmp_path):
        (tmp_path / f"s_{name}").write_bytes(seed)
        _read_marker_set(tmp_path / f"s_{name}", standin)
    (tmp_path / "p.yaml").write_bytes(PLATES_SEED)
    assert list(load_plate_definitions(tmp_path / "p.yaml")) == ["boite", "tibia"]
    for seed in _joint_map_seeds():
        (tmp_path / "j.yaml").write_bytes(seed)
        _read_joint_map(tmp_path / "j.yaml")
    _calibration_seed(tmp_path)
    assert Calibration.load(tmp_path / "seed_calib.yaml").frames == [[0], [12, 40, 131]]
    (tmp_path / "n.yaml").write_bytes(NAMES_SEED)
    assert _read_names(tmp_path / "n.yaml")["S01:Head"] == "head"


# ------------------------------------------------------------------ regressions: every reader
READERS = {
    "markerset": load_marker_set,
    "plates": load_plate_definitions,
    "joint-map": JointMap.load,
    "calibration": Calibration.load,
    "name-map": load_mapping,
}


def _refused(tmp_path: Path, reader: str, text: str | bytes, error=FormatError) -> str:
    path = tmp_path / "bad.yaml"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    with pytest.raises(error) as info:
        READERS[reader](path)
    assert str(path) in str(info.value)
    return str(info.value)


@pytest.mark.parametrize("reader", READERS)
def test_yaml_regression_deep_nesting_is_a_format_error_not_a_recursion_error(tmp_path, reader):
    message = _refused(tmp_path, reader, "a: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "bad.yaml:1:" in message and "nested deeper" in message


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    "scalar", ["!!int x", "!!float x", "2001-13-45", "!!timestamp x", "9" * 5000]
)
def test_yaml_regression_unconstructible_scalar_is_a_format_error(tmp_path, reader, scalar):
    message = _refused(tmp_path, reader, f"a: 1\nb: {scalar}\n")
    assert "bad.yaml:2:4: not valid YAML" in message


@pytest.mark.parametrize("reader", READERS)
def test_yaml_regression_billion_laughs_is_refused_at_once(tmp_path, reader):
    import time

    from helpers.fuzzing import billion_laughs

    start = time.perf_counter()
    message = _refused(tmp_path, reader, f"betas: {billion_laughs()}\nname: x\n")
    assert "aliases expand to more than" in message
    assert time.perf_counter() - start < 2.0


@pytest.mark.parametrize("reader", READERS)
def test_yaml_regression_recursive_alias_is_a_format_error(tmp_path, reader):
    assert "recursive alias" in _refused(tmp_path, reader, "a: &r [1, *r]\n")


@pytest.mark.parametrize("reader", READERS)
def test_yaml_regression_syntax_error_is_a_format_error_with_line_and_column(tmp_path, reader):
    message = _refused(tmp_path, reader, "a: 1\nb: [1, 2\nc: 3\n")
    assert "bad.yaml:3:2: not valid YAML" in message


@pytest.mark.parametrize("reader", READERS)
def test_yaml_regression_not_utf8_is_a_format_error(tmp_path, reader):
    assert "not UTF-8" in _refused(tmp_path, reader, "name: s\u00e9t\n".encode("latin-1"))


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "", "~\n"])
def test_yaml_regression_top_level_not_a_mapping_is_a_format_error(tmp_path, reader, text):
    message = _refused(tmp_path, reader, text)
    assert "expected" in message and "got" in message


# --------------------------------------------------------------------- regressions: marker sets
ANCHOR = "{{joint: head, along: {along}, direction: {direction}}}"


def _marker_file(tmp_path: Path, along="0.5", direction="[0, 1, 0]", head: str = "") -> Path:
    path = tmp_path / "m.yaml"
    anchor = ANCHOR.format(along=along, direction=direction)
    path.write_text(f"name: m\nkind: point\n{head}markers:\n  - {{name: a, anchor: {anchor}}}\n")
    return path


def test_markerset_regression_huge_integer_along_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"m\.yaml: marker 'a' anchor: along="):
        load_marker_set(_marker_file(tmp_path, along="1" + "0" * 400))


def test_markerset_regression_huge_integer_direction_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"m\.yaml: marker 'a' anchor: direction"):
        load_marker_set(_marker_file(tmp_path, direction=f"[1{'0' * 400}, 0, 0]"))


def test_markerset_regression_direction_of_huge_numbers_is_not_zero(tmp_path, standin):
    with _warnings_are_errors():
        huge = "[1.0e+308, 1.0e+308, 1.0e+308]"
        markers = load_marker_set(_marker_file(tmp_path, direction=huge))
        np.testing.assert_allclose(markers.anchors[0].direction, [3**-0.5] * 3)
        assert markers.resolve(standin).shape == (1,)


@pytest.mark.parametrize(
    ("topology", "message"),
    [("100000000000000000000", "must be an integer in"), ("true", "= True has the wrong type")],
)
def test_markerset_regression_vertex_topology_out_of_range_is_a_config_error(
    tmp_path, topology, message
):
    path = tmp_path / "m.yaml"
    path.write_text(f"kind: point\nvertex_topology: {topology}\nmarkers: [{{name: a, vertex: 0}}]")
    with pytest.raises(ConfigError, match=rf"m\.yaml: vertex_topology {message}"):
        load_marker_set(path)


@pytest.mark.parametrize("name", ["[a, b]", "{a: 1}", "null", "''", "true"])
def test_markerset_regression_marker_name_that_is_no_name_is_a_config_error(tmp_path, name):
    path = tmp_path / "m.yaml"
    path.write_text(f"kind: point\nmarkers: [{{name: {name}, vertex: 0}}]\n")
    with pytest.raises(ConfigError, match=r"m\.yaml: markers\[0\]\.name: expected a name"):
        load_marker_set(path)


@pytest.mark.parametrize("base", ["a" * 300, "~no_such_user_xyz/x"])
def test_markerset_regression_impossible_defaults_name_is_a_config_error(tmp_path, base):
    path = tmp_path / "m.yaml"
    path.write_text(f"defaults: [{base}, _self_]\nselect: [head]\n")
    with pytest.raises(ConfigError, match="unknown marker set"):
        load_marker_set(path)


# ---------------------------------------------------------------------- regressions: plates
def test_plates_regression_huge_integer_coordinate_is_a_config_error(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text(
        f"box: {{markers: [a, b, c], local: {{a: [1{'0' * 400}, 0, 0], b: [0, 0, 0], "
        "c: [0, 1, 0]}}\n"
    )
    with pytest.raises(ConfigError, match=r"p\.yaml: plate 'box': local\['a'\]"):
        load_plate_definitions(path)


def test_plates_regression_unknown_keys_of_mixed_types_are_a_config_error(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("box: {markers: [a, b, c], 1: x, zz: y}\n")
    with pytest.raises(ConfigError, match=r"plate 'box': unknown keys \['1', 'zz'\]"):
        load_plate_definitions(path)


@pytest.mark.parametrize("member", ["[x, y]", "{x: 1}", "null", "true"])
def test_plates_regression_member_that_is_no_name_is_a_config_error(tmp_path, member):
    path = tmp_path / "p.yaml"
    path.write_text(f"box: {{markers: [a, b, {member}]}}\n")
    with pytest.raises(ConfigError, match=r"plate 'box': markers: .* is not a marker name"):
        load_plate_definitions(path)


def test_plates_empty_mapping_is_a_config_error(tmp_path):
    assert "no plate defined" in _refused(tmp_path, "plates", "{}\n", ConfigError)


# ------------------------------------------------------------------- regressions: joint maps
JOINTS = "joints: {pelvis: Hips}\n"


@pytest.mark.parametrize("units", ["1" + "0" * 400, ".inf", "true"])
def test_joint_map_regression_units_not_a_positive_number_is_a_config_error(tmp_path, units):
    message = _refused(tmp_path, "joint-map", f"{JOINTS}units_to_metres: {units}\n", ConfigError)
    assert "bad.yaml: units_to_metres = " in message


@pytest.mark.parametrize("units", [".nan", "-1", "[1]", "0"])
def test_joint_map_bad_units_name_the_key(tmp_path, units):
    message = _refused(tmp_path, "joint-map", f"{JOINTS}units_to_metres: {units}\n", ConfigError)
    assert "bad.yaml: units_to_metres = " in message


@pytest.mark.parametrize("value", ["5", "{a: b}", "[1, 2]", "pelvis"])
def test_joint_map_regression_direction_only_not_a_name_list_is_a_config_error(tmp_path, value):
    message = _refused(tmp_path, "joint-map", f"{JOINTS}direction_only: {value}\n", ConfigError)
    assert "bad.yaml: direction_only = " in message


@pytest.mark.parametrize("key", ["name", "up_axis", "first_frame", "reference_frame"])
def test_joint_map_regression_list_for_a_single_value_is_a_config_error(tmp_path, key):
    message = _refused(tmp_path, "joint-map", f"{JOINTS}{key}: [y, z]\n", ConfigError)
    assert f"bad.yaml: {key} = ['y', 'z'] has the wrong type" in message


# ------------------------------------------------------------------ regressions: calibration
def _calib_text(tmp_path: Path, old: str, new: str) -> str:
    text = _calibration_seed(tmp_path).decode()
    assert old in text
    return text.replace(old, new, 1)


def test_calibration_regression_huge_integer_is_a_config_error(tmp_path):
    text = _calib_text(tmp_path, "betas: [", f"betas: [1{'0' * 400}, ")
    assert "betas: expected a list of finite numbers" in _refused(
        tmp_path, "calibration", text, ConfigError
    )


def test_calibration_regression_unknown_keys_of_mixed_types_are_a_config_error(tmp_path):
    text = _calib_text(tmp_path, "betas:", "1: x\nzz: y\nbetas:")
    assert "unknown key 1" in _refused(tmp_path, "calibration", text, ConfigError)
    text = _calib_text(tmp_path, "  translation_m:", "  1: x\n  zz: y\n  translation_m:")
    assert "alignment: unknown key 1" in _refused(tmp_path, "calibration", text, ConfigError)


def test_calibration_regression_negative_first_frame_is_a_config_error(tmp_path):
    text = _calib_text(tmp_path, "[12, 40, 131]", "[-12, 40, 131]")
    assert "frames: expected a list per capture of frame indices" in _refused(
        tmp_path, "calibration", text, ConfigError
    )


def test_calibration_regression_huge_rotation_offset_is_a_config_error(tmp_path):
    text = _calib_text(tmp_path, "rotation_offset: [0.01,", "rotation_offset: [1.0e+300,")
    message = _refused(tmp_path, "calibration", text, ConfigError)
    assert "bad.yaml: plates.left_shin.rotation_offset: expected 3 finite numbers" in message


@pytest.mark.parametrize("value", ["[.nan, 0, 0]", "[0, .inf, 0]", "[0, 0]", "[0, 0, x]"])
def test_calibration_rotation_offset_not_3_finite_numbers_is_a_config_error(tmp_path, value):
    text = _calib_text(tmp_path, "rotation_offset: [0.01, -0.02, 0.3]", f"rotation_offset: {value}")
    message = _refused(tmp_path, "calibration", text, ConfigError)
    assert "bad.yaml: plates.left_shin.rotation_offset: expected 3 finite numbers" in message


@pytest.mark.parametrize("name", ["null", "true", "''"])
def test_calibration_regression_plate_name_that_is_no_name_is_a_config_error(tmp_path, name):
    text = _calib_text(tmp_path, "  left_shin:", f"  {name}:")
    assert "is not a plate name" in _refused(tmp_path, "calibration", text, ConfigError)


# -------------------------------------------------------------------- regressions: name maps
@pytest.mark.parametrize("value", ["[head]", "null", "3", "''"])
def test_name_map_value_not_a_plate_name_names_the_key(tmp_path, value):
    text = NAMES_SEED.decode().replace("S01:Head: head", f"S01:Head: {value}")
    message = _refused(tmp_path, "name-map", text, ConfigError)
    assert "bad.yaml: S01:Head: expected a marker-set plate name" in message


@pytest.mark.parametrize("key", ["~", "''", "true"])
def test_name_map_regression_key_that_is_no_capture_name_is_a_config_error(tmp_path, key):
    text = NAMES_SEED.decode() + f"{key}: left_shin\n"
    assert "not a capture name" in _refused(tmp_path, "name-map", text, ConfigError)
