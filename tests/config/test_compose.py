"""Structured configs from YAML (rbmcap.config.compose.load_config): defaults lists compose files in
Hydra's order, OmegaConf checks keys and types against the dataclass, and every refusal is one
ConfigError line naming the file (or 'overrides') and the dotted key."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rbmcap.config.compose import ConfigValueError, load_config
from rbmcap.errors import ConfigError


@dataclass(frozen=True)
class Inner:
    rate: float
    count: int


@dataclass(frozen=True)
class Settings:
    name: str
    inner: Inner
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.inner.rate < 0:
            raise ConfigValueError("inner.rate", self.inner.rate, "must be ≥ 0")


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def _load(path: Path, overrides=None) -> Settings:
    return load_config(path, "baseline", Settings, "test config", overrides)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return _write(tmp_path, "base.yaml", "inner: {rate: 1.5, count: 3}\ntags: [a, b]\n")


def test_defaults_compose_in_order_then_overrides(tmp_path, base):
    child = _write(tmp_path, "child.yaml", "defaults: [base.yaml, _self_]\ninner: {count: 7}\n")
    cfg = _load(child)
    assert cfg == Settings(name="child", inner=Inner(rate=1.5, count=7), tags=["a", "b"])
    # _self_ first: the file's own keys come before (under) its defaults
    under = _write(tmp_path, "under.yaml", "defaults: [_self_, base.yaml]\ninner: {count: 7}\n")
    assert _load(under).inner.count == 3
    # overrides, nested or dotted, come last
    assert _load(child, {"inner.rate": 0.5, "inner": {"count": 9}}).inner == Inner(0.5, 9)


def test_a_file_without_defaults_must_set_every_key(tmp_path):
    alone = _write(tmp_path, "alone.yaml", "inner: {count: 7}\n")
    with pytest.raises(ConfigError, match=r"alone\.yaml: misses keys \['inner\.rate'\]"):
        _load(alone)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("inner: {cuont: 7}\n", r"unknown key inner\.cuont; known: \['count', 'rate'\]"),
        ("colour: red\n", r"unknown key colour"),
        ("inner: {count: many}\n", r"inner\.count = 'many' has the wrong type"),
        ("inner: {count: 1.5}\n", r"inner\.count = 1\.5 has the wrong type"),
        ("inner: 3\n", r"inner = 3 has the wrong type"),
        ("tags: [a, [b]]\n", r"tags\[1\] = \['b'\]: expected a name or number"),
        ("inner: {rate: -1}\n", r"inner\.rate = -1\.0: must be ≥ 0"),
        ("tags: ['${oc.env:HOME}']\n", r"tags\[0\]: .*interpolations .* are not allowed"),
    ],
)
def test_a_bad_key_or_value_is_one_line_naming_the_file_and_the_key(tmp_path, base, text, message):
    child = _write(tmp_path, "child.yaml", "defaults: [base.yaml, _self_]\n" + text)
    with pytest.raises(ConfigError, match=message) as info:
        _load(child)
    assert str(info.value).startswith(f"{child}: ")
    assert "\n" not in str(info.value)


def test_a_value_out_of_range_names_the_layer_that_set_it(tmp_path, base):
    child = _write(tmp_path, "child.yaml", "defaults: [base.yaml, _self_]\n")
    broken = _write(tmp_path, "broken.yaml", "inner: {rate: -2, count: 1}\n")
    with pytest.raises(ConfigError, match=r"^overrides: inner\.rate = -1\.0: must be ≥ 0$"):
        _load(child, {"inner.rate": -1})
    child.write_text("defaults: [broken.yaml, _self_]\n")
    with pytest.raises(ConfigError, match=rf"^{broken}: inner\.rate = -2\.0"):
        _load(child)


def test_defaults_that_lead_back_to_the_file_are_refused(tmp_path):
    _write(tmp_path, "a.yaml", "defaults: [b.yaml, _self_]\n")
    b = _write(tmp_path, "b.yaml", "defaults: [a.yaml, _self_]\n")
    with pytest.raises(ConfigError, match=r"b\.yaml: its defaults lead back to itself"):
        _load(b)


@pytest.mark.parametrize("defaults", ["base.yaml", "[base.yaml, 3]", "{a: 1}"])
def test_defaults_that_are_not_a_list_of_names_are_refused(tmp_path, base, defaults):
    child = _write(tmp_path, "child.yaml", f"defaults: {defaults}\n")
    with pytest.raises(ConfigError, match=r"child\.yaml: defaults: expected a list"):
        _load(child)


def _packaged_with_defaults(group: str) -> list[str]:
    from rbmcap.config.packaged import conf_dir, conf_names
    from rbmcap.config.safe_yaml import load_yaml_mapping

    return [
        name
        for name in conf_names(group)
        if "defaults" in load_yaml_mapping(conf_dir() / group / f"{name}.yaml")
    ]


@pytest.mark.parametrize(
    ("group", "name"),
    [(g, n) for g in ("baseline", "markers") for n in _packaged_with_defaults(g)],
)
def test_packaged_defaults_lists_compose_as_under_hydra(group, name):
    """Every packaged file composed from others gives, through load_config, what Hydra's own
    composition of the same file gives (the files are also groups of the Hydra tree)."""
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    from rbmcap.baseline.config import SolverConfig
    from rbmcap.config.compose import build_config
    from rbmcap.config.packaged import HYDRA_CONFIG_MODULE
    from rbmcap.markers.markerset import MarkerSetFile

    schema = {"baseline": SolverConfig, "markers": MarkerSetFile}[group]
    with initialize_config_module(HYDRA_CONFIG_MODULE, version_base=None):
        composed = compose(f"{group}/{name}")[group]
    hydra = OmegaConf.to_container(composed, resolve=True)
    if "name" in {f.name for f in dataclasses.fields(schema)}:
        hydra.setdefault("name", name)
    assert load_config(name, group, schema, group) == build_config(schema, [(hydra, "hydra")])
