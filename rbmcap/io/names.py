"""Capture object names → marker-set plate names (docs/capture.md, ``map.yaml``).

A mapping YAML gives the names explicitly (``S01:LeftShin: left_shin``). Without one, the default
rule: a capture name maps to the marker-set plate whose body-part words it contains and whose
side it has. Subject prefixes (``S01:``), case and separators are ignored, and ``L``/``R``/
``Left``/``Right`` prefixes are read as the side: ``S01:LeftShin``, ``L_Shin``, ``left-shin`` →
``left_shin``; ``RThigh`` → ``right_thigh``; ``Head`` → ``head``. Capture names matching no
plate are left out (props, other subjects); an ambiguous name, or a plate that no name maps to,
is one ConfigError listing the candidates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from rbmcap.config.safe_yaml import read_yaml, type_name
from rbmcap.config.values import short_repr
from rbmcap.errors import ConfigError, FormatError
from rbmcap.io.capture import Capture
from rbmcap.markers.markerset import load_marker_set

_SIDES = {"l": "left", "left": "left", "r": "right", "right": "right"}


def _words(name: str) -> list[str]:
    """Lower-case words of a name: subject prefix dropped, split at separators and camel case."""
    name = name.rsplit(":", 1)[-1]
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    name = re.sub(r"([A-Z])([A-Z][a-z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", name.lower()) if w]


def _side_and_part(name: str) -> tuple[str | None, str]:
    """(side or None, body-part words joined): 'LeftUpperArm' → ('left', 'upperarm')."""
    words = _words(name)
    side = None
    if words and words[0] in _SIDES:
        side, words = _SIDES[words[0]], words[1:]
    elif words and words[0].startswith(("left", "right")):
        side = "left" if words[0].startswith("left") else "right"
        words = [words[0][len(side) :], *words[1:]]
    elif words and words[-1] in _SIDES:  # 'Shin_L'
        side, words = _SIDES[words[-1]], words[:-1]
    return side, "".join(words)


def rule_candidates(capture_name: str, marker_set_names: Sequence[str]) -> list[str]:
    """Marker-set names the default rule allows for ``capture_name`` (same side, part contained)."""
    side, part = _side_and_part(capture_name)
    out = []
    for target in marker_set_names:
        t_side, t_part = _side_and_part(target)
        if t_side == side and t_part and t_part in part:
            out.append(target)
    return out


def load_mapping(path: str | Path) -> dict[str, str]:
    """Read a mapping YAML (capture name: marker-set name).

    Raises:
        FormatError: the file is missing, not UTF-8, not YAML (``file:line:column``) or not a
            mapping.
        ConfigError: a name that is not a string (the capture name is given).
    """
    path = Path(path)
    data = read_yaml(path, missing=FormatError)
    if not isinstance(data, dict):
        raise FormatError(
            f"{path}: expected 'capture name: marker-set name' lines, got {type_name(data)}"
        )
    out: dict[str, str] = {}
    for k, v in data.items():
        if isinstance(k, (list, dict, bool)) or k is None or k == "":
            raise ConfigError(f"{path}: {short_repr(k)}: not a capture name")
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{path}: {k}: expected a marker-set plate name, got {short_repr(v)}")
        if str(k) in out:
            raise ConfigError(f"{path}: {k}: mapped twice")
        out[str(k)] = v
    return out


def map_names(
    capture_names: Sequence[str],
    marker_set_names: Sequence[str],
    mapping: Mapping[str, str] | None = None,
    *,
    allow_missing: bool = False,
) -> dict[str, str]:
    """{capture name: marker-set name} by ``mapping`` when given, else by the default rule.

    Raises:
        ConfigError: one error listing every problem: a mapping naming an unknown capture object
            or plate, a capture name matching several plates, a plate matched by several names,
            and (unless ``allow_missing``) the plates no name maps to, with their candidates.
    """
    problems: list[str] = []
    if mapping is not None:
        result = dict(mapping)
        for k, v in mapping.items():
            if k not in capture_names:
                problems.append(f"mapped name {k!r} is not in the capture")
            if v not in marker_set_names:
                problems.append(f"{k!r} maps to {v!r}, not a plate of the marker set")
    else:
        result = {}
        for name in capture_names:
            cands = rule_candidates(name, marker_set_names)
            if len(cands) > 1:
                problems.append(f"{name!r} is ambiguous: it matches {', '.join(cands)}")
            elif cands:
                result[name] = cands[0]
    problems += _claims(result, marker_set_names, capture_names, allow_missing)
    if problems:
        raise ConfigError(
            "cannot map capture names to the marker set: "
            + "; ".join(problems)
            + f" (capture names: {', '.join(capture_names)}; plates: {', '.join(marker_set_names)}"
            "; give a mapping YAML with --map)"
        )
    return result


def _claims(
    result: dict[str, str],
    targets: Sequence[str],
    capture_names: Sequence[str],
    allow_missing: bool,
) -> list[str]:
    """Problems of plates claimed by several names, or (unless allowed) by none."""
    problems = []
    for t in targets:
        by = [k for k, v in result.items() if v == t]
        if len(by) > 1:
            problems.append(f"plate {t!r} is matched by {', '.join(by)}")
        elif not by and not allow_missing:
            cands = [c for c in capture_names if t in rule_candidates(c, [t]) and c not in result]
            hint = f" (candidates: {', '.join(cands)})" if cands else " (no capture name matches)"
            problems.append(f"plate {t!r} is unassigned{hint}")
    return problems


def apply_mapping(
    capture: Capture,
    marker_set,
    mapping: Mapping[str, str] | None = None,
    *,
    allow_missing: bool = False,
) -> Capture:
    """The capture's plates renamed and reordered into ``marker_set``'s order.

    Args:
        capture: any capture.
        marker_set: a :class:`~rbmcap.markers.markerset.MarkerSet`, its name or YAML path.
        mapping: explicit {capture name: plate name}, or None for the default rule.
        allow_missing: plates without a capture object become all-invalid columns.

    Returns:
        A capture with ``names`` = the marker set's names, (T, N_set, ...) arrays.
    """
    targets = list(load_marker_set(marker_set).names)
    result = map_names(capture.names, targets, mapping, allow_missing=allow_missing)
    src = {v: capture.index(k) for k, v in result.items()}
    t, n = capture.num_frames, len(targets)
    pos, rot = np.zeros((t, n, 3), np.float32), np.tile(np.eye(3, dtype=np.float32), (t, n, 1, 1))
    valid, res = np.zeros((t, n), bool), np.full((t, n), np.nan, np.float32)
    for j, name in enumerate(targets):
        if name in src:
            i = src[name]
            pos[:, j], rot[:, j] = capture.pos[:, i], capture.rot[:, i]
            valid[:, j], res[:, j] = capture.valid[:, i], capture.residual_mm[:, i]
    return replace(capture, names=targets, pos=pos, rot=rot, valid=valid, residual_mm=res)
