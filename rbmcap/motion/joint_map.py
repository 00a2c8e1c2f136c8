"""A joint map: which BVH joint drives each SMPL joint, the BVH's units and up axis, and how
:mod:`rbmcap.motion.retarget` aligns the two skeletons. Maps are YAML files, shipped under
``conf/joint_maps/`` or a user's own; :class:`JointMap` is their schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rbmcap.config.compose import ConfigValueError, load_config
from rbmcap.config.packaged import named_yaml
from rbmcap.errors import FormatError
from rbmcap.motion.bvh import BVH
from rbmcap.skeleton import SMPL_JOINT_NAMES

DEFAULT_JOINT_MAP = "auto"  # recognised by the joint names (rbmcap.motion.rigs)
MAX_UNITS_TO_METRES = 1e6
"""Largest ``units_to_metres`` a joint map may give (far beyond any real unit)."""
FIRST_FRAME_MODES = ("keep", "drop", "drop_if_tpose")
ALIGNMENTS = ("rest", "motion")
_INDEX = {name: i for i, name in enumerate(SMPL_JOINT_NAMES)}


@dataclass(frozen=True)
class JointMap:
    """Which BVH joint drives each SMPL joint, and the BVH's units and up axis.

    Attributes:
        name: a label for messages and metadata.
        joints: SMPL joint name → BVH joint name (the pelvis is required).
        units_to_metres: metres per BVH length unit (0.01 for cm).
        up_axis: the BVH world's up axis, 'y' or 'z'.
        reference_frame: None to align on the rest pose (all channels zero); else the index of
            a frame of the file in which the subject holds SMPL's T-pose
            (:mod:`rbmcap.motion.retarget`).
        first_frame: 'keep' the file's first frame, 'drop' it (a prepended T-pose), or
            'drop_if_tpose': drop it only where it retargets to a T-pose.
        alignment: 'rest' (the rest pose, or ``reference_frame`` where one is named) or
            'motion' (read from the motion itself; :mod:`rbmcap.motion.retarget`, step 2).
        neutral: with ``alignment: motion``, mapped SMPL joints aligned on the motion's average
            pose alone, without their bone's direction.
        direction_only: mapped SMPL joints that only give their parent's bone its direction
            and take no rotation of their own (their local rotation stays zero): for rig bones
            whose neutral pose differs from SMPL's in a way the rest pose cannot tell.
        path: the YAML it came from, if any.

    The dataclass is also the schema of a joint-map YAML (:meth:`load`); a file that does not
    set ``name`` is named after its stem.
    """

    name: str
    joints: dict[str, str]
    units_to_metres: float = 1.0
    up_axis: str = "y"
    reference_frame: int | None = None
    first_frame: str = "keep"
    alignment: str = "rest"
    direction_only: tuple[str, ...] = ()
    neutral: tuple[str, ...] = ()
    path: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "up_axis", self.up_axis.lower())
        object.__setattr__(self, "direction_only", tuple(self.direction_only))
        object.__setattr__(self, "neutral", tuple(self.neutral))
        problems = _map_problems(self)
        if problems:
            raise ConfigValueError(*problems[0])

    @classmethod
    def load(cls, spec: str | Path = DEFAULT_JOINT_MAP) -> JointMap:
        """Load a joint map from a YAML path, or by name from ``conf/joint_maps/<name>.yaml``
        (:func:`rbmcap.config.compose.load_config`; the name defaults to the file's stem)."""
        path = named_yaml(spec, "joint_maps", "joint map")
        return load_config(path, "joint_maps", cls, "joint map", {"path": str(path)})

    def check_covers(self, bvh: BVH) -> None:
        """Raise FormatError naming the BVH joints this map needs that the file lacks."""
        missing = [b for b in self.joints.values() if b not in bvh.names]
        if missing:
            raise FormatError(
                f"{bvh.path}: joint map {self.name!r} needs BVH joint(s) "
                f"{', '.join(missing)}, which the file lacks (it has: {', '.join(bvh.names)}); "
                f"pass a joint map for this skeleton"
            )
        if self.reference_frame is not None and self.reference_frame >= bvh.num_frames:
            raise FormatError(
                f"{bvh.path}: joint map {self.name!r} takes frame {self.reference_frame} as its "
                f"T-pose reference, but the file has {bvh.num_frames} frame(s)"
            )


def _map_problems(jm: JointMap) -> list[tuple[str, object, str]]:
    """``(key, value, problem)`` for each rule ``jm`` breaks (the first is raised)."""
    unknown = [j for j in jm.joints if j not in _INDEX]
    ref = jm.reference_frame
    loose_direction = [j for j in jm.direction_only if j not in jm.joints or j == "pelvis"]
    loose_neutral = [j for j in jm.neutral if j not in jm.joints]
    rules = [
        (
            "joints",
            unknown,
            not unknown,
            "unknown SMPL joint(s); expected names from rbmcap.skeleton.SMPL_JOINT_NAMES",
        ),
        (
            "joints",
            sorted(jm.joints),
            "pelvis" in jm.joints,
            "the pelvis must be mapped (it carries the root motion)",
        ),
        (
            "units_to_metres",
            jm.units_to_metres,
            0 < jm.units_to_metres <= MAX_UNITS_TO_METRES,
            f"expected a positive number (≤ {MAX_UNITS_TO_METRES:g})",
        ),
        ("up_axis", jm.up_axis, jm.up_axis in ("y", "z"), "expected 'y' or 'z'"),
        ("reference_frame", ref, ref is None or ref >= 0, "expected a frame index ≥ 0 or null"),
        ("direction_only", loose_direction, not loose_direction, "names unmapped joint(s)"),
        ("alignment", jm.alignment, jm.alignment in ALIGNMENTS, f"expected one of {ALIGNMENTS}"),
        (
            "reference_frame",
            ref,
            jm.alignment != "motion" or ref is None,
            "alignment 'motion' takes no reference_frame",
        ),
        ("neutral", loose_neutral, not loose_neutral, "names unmapped joint(s)"),
        (
            "neutral",
            list(jm.neutral),
            not jm.neutral or jm.alignment == "motion",
            "neutral joints need alignment: motion",
        ),
        (
            "first_frame",
            jm.first_frame,
            jm.first_frame in FIRST_FRAME_MODES,
            f"expected one of {FIRST_FRAME_MODES}",
        ),
    ]
    return [(key, value, problem) for key, value, ok, problem in rules if not ok]
