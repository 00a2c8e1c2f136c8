"""Recognise a BVH rig by its joint names, and draft a joint map for a rig rbmcap does not know.

``joint_map="auto"`` (the command line's default) picks, among the maps shipped under
``conf/joint_maps/``, one whose BVH joints the file all has (the one naming most joints where
several do). For a rig none of them covers, :func:`template_joint_map` drafts a map to fill in:
each SMPL joint paired with the BVH joint whose name reads like it (side and body part), the
units guessed from the leg's length, the up axis from the first frame, and ``alignment: motion``,
which needs neither a usable rest pose nor a T-pose frame.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np

from rbmcap.atomic import write_text_atomic
from rbmcap.config.packaged import conf_names
from rbmcap.errors import DataError
from rbmcap.motion.bvh import BVH
from rbmcap.motion.joint_map import JointMap
from rbmcap.skeleton import SMPL_JOINT_NAMES

AUTO = "auto"

# Body-part words per SMPL joint (side removed), best first.
_PART_WORDS = {
    "pelvis": ("hips", "hip", "pelvis", "root"),
    "hip": ("upleg", "upperleg", "thigh", "hip"),
    "knee": ("leg", "lowerleg", "calf", "shin", "knee"),
    "ankle": ("foot", "ankle"),
    "foot": ("toebase", "toes", "toe", "ball"),
    "spine1": ("spine", "lowerback", "spine1", "waist"),
    "spine2": ("spine1", "spine2", "chest"),
    "spine3": ("chest", "spine2", "spine3", "upperchest", "upperback"),
    "neck": ("neck", "neck1", "lowerneck"),
    "head": ("head",),
    "collar": ("clavicle", "collar", "shoulder"),
    "shoulder": ("arm", "upperarm", "humerus", "shoulder"),
    "elbow": ("forearm", "lowerarm", "elbow"),
    "wrist": ("hand", "wrist"),
    "hand": ("handmiddle1", "middle1", "mid1", "fingers", "handend"),
}


class UnknownRigError(DataError):
    """No shipped joint map covers the file at ``path``; ``template`` is a drafted map (YAML
    text)."""

    def __init__(self, message: str, path: str, template: str) -> None:
        super().__init__(message)
        self.path = path
        self.template = template


@cache
def shipped_joint_maps() -> tuple[JointMap, ...]:
    """Every joint map under ``conf/joint_maps/``, by name (read once: a folder of clips asks
    for each clip)."""
    return tuple(JointMap.load(name) for name in conf_names("joint_maps"))


def detect_joint_map(bvh: BVH) -> JointMap:
    """The shipped joint map for ``bvh``'s rig, recognised by its joint names.

    Raises:
        UnknownRigError: no shipped map covers the file; the message names the closest map and
            what it lacks, and the error carries a drafted map (:func:`template_joint_map`).
    """
    names = set(bvh.names)
    scored = []
    for jm in shipped_joint_maps():
        missing = [b for b in jm.joints.values() if b not in names]
        scored.append((len(missing), -len(jm.joints), jm.name, jm, missing))
    scored.sort(key=lambda s: s[:3])
    if scored and not scored[0][0]:
        return scored[0][3]
    closest = (
        f"; closest: {scored[0][2]!r}, which lacks {', '.join(scored[0][4][:5])}"
        f"{' …' if len(scored[0][4]) > 5 else ''}"
        if scored
        else ""
    )
    raise UnknownRigError(
        f"{bvh.path}: no known joint map fits this rig ({len(bvh.names)} joints: "
        f"{', '.join(bvh.names[:6])}{' …' if len(bvh.names) > 6 else ''}){closest}",
        str(bvh.path),
        template_joint_map(bvh),
    )


def resolve_joint_map(bvh: BVH, spec: JointMap | str | Path | None) -> JointMap:
    """``spec`` as a :class:`JointMap`: detected for ``'auto'``, loaded for a name or path."""
    if isinstance(spec, JointMap):
        return spec
    if spec is None or str(spec) == AUTO:
        return detect_joint_map(bvh)
    return JointMap.load(spec)


def write_template(error: UnknownRigError, path: str | Path) -> Path:
    """Write ``error``'s drafted map to ``path`` (made whole or not at all); returns the path."""
    path = Path(path)
    write_text_atomic(path, error.template)
    return path


def template_joint_map(bvh: BVH) -> str:
    """A drafted joint map (YAML text) for ``bvh``: see the module docstring. Joints it could
    not pair are left empty with a comment; the pelvis is always filled (the root)."""
    guesses = _guess_joints(bvh.names)
    units, up = _guess_units(bvh, guesses), _guess_up(bvh, guesses)
    lines = [
        f"# Joint map drafted by rbmcap for {Path(bvh.path).name} ({len(bvh.names)} joints).",
        "# Check every pairing: SMPL joint -> the BVH joint whose rotation drives the segment",
        "# from that joint to its child. Delete a line to let SMPL interpolate that joint.",
        f"# BVH joints: {', '.join(bvh.names)}",
        f"name: {re.sub(r'[^A-Za-z0-9_-]+', '_', Path(bvh.path).stem)}",
        f"units_to_metres: {units:g}   # guessed from the leg's length",
        f"up_axis: {up}   # guessed from the first frame",
        "alignment: motion",
        "joints:",
    ]
    for smpl in SMPL_JOINT_NAMES:
        if smpl in guesses:
            lines.append(f"  {smpl}: {guesses[smpl]}")
        else:
            lines.append(f"  # {smpl}:   (no BVH joint found)")
    return "\n".join(lines) + "\n"


_PREFIXES = {"cc", "base", "mixamorig", "bip", "def"}


def _split_side(name: str) -> tuple[str | None, str]:
    """(side 'left'/'right'/None, the name's body-part words joined, lower case): the name is
    cut into words at case changes, digits and separators (``UpperArm_L`` → upper, arm, l)."""
    words = [w.lower() for w in re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", name)]
    side = None
    for w in words:
        if w in ("left", "l"):
            side = "left"
        elif w in ("right", "r"):
            side = "right"
    body = [w for w in words if w not in ("left", "l", "right", "r") and w not in _PREFIXES]
    return side, "".join(body)


def _guess_joints(names: list[str]) -> dict[str, str]:
    """SMPL joint → the BVH joint whose name reads like it (the same side; the body-part words
    equal to one of the joint's words, or ending in it)."""
    parsed = [(n, *_split_side(n)) for n in names]
    out: dict[str, str] = {}
    used: set[str] = set()
    for smpl in SMPL_JOINT_NAMES:
        side = next((s for s in ("left", "right") if smpl.startswith(f"{s}_")), None)
        part = smpl.split("_", 1)[1] if side else smpl
        best = None
        for rank, word in enumerate(_PART_WORDS.get(part, (part,))):
            for name, s, body in parsed:
                if name in used or s != side:
                    continue
                score = 0 if body == word else 1 if body.endswith(word) else None
                if score is not None and (best is None or (score, rank) < best[0]):
                    best = ((score, rank), name)
        if best is not None:
            out[smpl] = best[1]
            used.add(best[1])
    if "pelvis" not in out and names:
        out["pelvis"] = next((n for n in names if n not in used), names[0])
    return out


def _guess_units(bvh: BVH, guesses: dict[str, str]) -> float:
    """Metres per unit, from the rest leg (hip to ankle) taken as about 0.85 m."""
    rest = bvh.rest_positions()
    legs = [
        np.linalg.norm(rest[bvh.index(guesses[f"{s}_knee"])] - rest[bvh.index(guesses[f"{s}_hip"])])
        + np.linalg.norm(
            rest[bvh.index(guesses[f"{s}_ankle"])] - rest[bvh.index(guesses[f"{s}_knee"])]
        )
        for s in ("left", "right")
        if all(f"{s}_{j}" in guesses for j in ("hip", "knee", "ankle"))
    ]
    if not legs or max(legs) <= 0:
        return 1.0
    raw = 0.85 / max(legs)
    for unit in (1.0, 0.01, 0.0254, 0.001):
        if 0.6 < raw / unit < 1.6:
            return unit
    return float(f"{raw:.3g}")


def _guess_up(bvh: BVH, guesses: dict[str, str]) -> str:
    """'y' or 'z': the axis along which the head (or the neck) lies furthest above the pelvis
    in the first frame."""
    top = guesses.get("head") or guesses.get("neck")
    if top is None or bvh.num_frames == 0:
        return "y"
    _, pos = bvh.global_transforms()
    rise = pos[0, bvh.index(top)] - pos[0, bvh.index(guesses["pelvis"])]
    return "z" if abs(rise[2]) > abs(rise[1]) else "y"
