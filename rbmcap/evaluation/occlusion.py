"""Occlusion conditions: plates hidden for whole sequences (``rbmcap eval --occlude``).

A condition is a group of plate names. Hiding it sets ``valid`` to False for those plates in
every frame of every evaluated sequence, when the split is read (:class:`~rbmcap.evaluation.
sequences.Split`), so no method can see their data: the network's features mask invalid plates,
the solver drops their residual terms. The evaluation runs once with every plate seen and once
per condition; the report compares each method's MPJPE across them, overall and over the joints
near the hidden plates (:func:`joints_near`).

Kept free of heavy imports: :class:`~rbmcap.evaluation.options.EvalOptions` normalises its
``occlude`` field with :func:`occlusion_groups`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rbmcap.errors import ConfigError
from rbmcap.skeleton import SMPL_JOINT_NAMES, SMPL_PARENTS

Group = tuple[str, ...]


@dataclass(frozen=True)
class Condition:
    """One evaluated condition: the hidden ``plates`` (none: every plate seen), their
    ``indices`` in the marker set and the SMPL joints near them (:func:`joints_near`)."""

    plates: Group = ()
    indices: tuple[int, ...] = ()
    near_joints: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``"none"`` for every plate seen, else the hidden plates."""
        return ", ".join(self.plates) if self.plates else "none"

    def describe(self) -> dict:
        """JSON-ready: ``occluded`` (plate names) and ``near_joints``."""
        return {"occluded": list(self.plates), "near_joints": list(self.near_joints)}


def conditions(
    groups: Sequence[Group], markers: Sequence[Mapping], marker_set: str
) -> tuple[Condition, ...]:
    """Every plate seen, then one :class:`Condition` per group, checked against the data's
    ``markers`` (entries as the dataset stores them: ``name``, optional ``anchor``) of marker set
    ``marker_set`` (:func:`plate_indices` raises for an unknown plate)."""
    plates = [m["name"] for m in markers]
    out = [Condition()]
    for group in groups:
        indices = plate_indices(group, plates, marker_set)
        out.append(Condition(group, indices, joints_near(group, markers)))
    return tuple(out)


def occlusion_groups(value: str | Iterable[str | Iterable[str]] | None) -> tuple[Group, ...]:
    """The occlusion conditions ``value`` names, each a tuple of plate names.

    ``value`` is a string (one group, plates separated by commas: ``"left_foot,right_foot"``) or
    a sequence of groups, each a string of that form or a sequence of names (``--occlude
    left_hand --occlude left_foot,right_foot`` gives ``(("left_hand",), ("left_foot",
    "right_foot"))``). Names are stripped; repeated names and repeated groups (the same plates in
    any order) are dropped. An empty group stays, for :func:`check_groups` to refuse.
    """
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else list(value)
    groups: dict[frozenset, Group] = {}
    for item in items:
        names = [item] if isinstance(item, str) else list(item)
        parts = [p for name in names for p in name.split(",")]
        group = tuple(dict.fromkeys(p.strip() for p in parts if p.strip()))
        groups.setdefault(frozenset(group), group)
    return tuple(groups.values())


def check_groups(groups: Sequence[Group]) -> None:
    """Raises :class:`ConfigError` for an empty group (names are checked against the data by
    :func:`plate_indices`)."""
    if any(not g for g in groups):
        raise ConfigError(
            "eval option occlude: an empty plate group (give plate names, e.g. left_hand or "
            "left_foot,right_foot)"
        )


def plate_indices(group: Group, plates: Sequence[str], marker_set: str) -> tuple[int, ...]:
    """Indices of ``group``'s plates among the data's ``plates`` (marker set ``marker_set``).

    Raises:
        ConfigError: a name the marker set does not have (naming it and listing the valid ones),
            or a group that hides every plate (nothing would be left to fit).
    """
    unknown = [name for name in group if name not in plates]
    if unknown:
        raise ConfigError(
            f"eval option occlude: marker set {marker_set!r} has no plate "
            f"{', '.join(repr(n) for n in unknown)}; its plates: {', '.join(plates)}"
        )
    if len(group) >= len(plates):
        raise ConfigError(
            f"eval option occlude: {', '.join(group)} hides every plate of {marker_set!r}"
        )
    return tuple(plates.index(name) for name in group)


def hide_plates(valid: np.ndarray, indices: Sequence[int]) -> np.ndarray:
    """``valid`` (T, N) bool with the plates ``indices`` invalid in every frame (a copy)."""
    out = np.array(valid, dtype=bool)
    out[:, list(indices)] = False
    return out


def joints_near(group: Group, markers: Sequence[Mapping]) -> tuple[str, ...]:
    """The SMPL joints a hidden plate should affect most: for each plate, the joint whose
    segment carries it (its anchor's ``joint``) and that joint's children, the far end of the
    segment (``left_hand`` on ``left_wrist`` → left_wrist, left_hand; ``left_shin`` on
    ``left_knee`` → left_knee, left_ankle). In SMPL order; plates without an anchor add none.

    Args:
        group: the hidden plates' names.
        markers: the marker set's entries as the dataset stores them (``name`` and an optional
            ``anchor`` with ``joint``).
    """
    carriers = {
        m["name"]: m["anchor"]["joint"] for m in markers if "joint" in (m.get("anchor") or {})
    }
    near = set()
    for name in group:
        joint = carriers.get(name)
        if joint in SMPL_JOINT_NAMES:
            j = SMPL_JOINT_NAMES.index(joint)
            near |= {j, *(k for k, parent in enumerate(SMPL_PARENTS) if parent == j)}
    return tuple(SMPL_JOINT_NAMES[j] for j in sorted(near))
