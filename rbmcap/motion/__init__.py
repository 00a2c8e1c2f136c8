"""Motion sources, all producing one SMPL motion format.

* :class:`SMPLMotion` — poses, translation, shape, fps; resampling, slicing, ``.npz`` storage.
* AMASS files and folders — :func:`read_motion`, :func:`discover`, :func:`iter_motions`.
* BVH — :func:`read_bvh` and :func:`bvh_to_motion` / :func:`retarget_bvh` with a :class:`JointMap`.
* Procedural motion — :mod:`rbmcap.motion.procedural` (:func:`generate`,
  :func:`generate_library`).
* Quality and pictures — :func:`foot_skate_mm`, :func:`ground_penetration_mm`,
  :func:`rbmcap.motion.skeleton_animation.render_motion` (its own module: it loads matplotlib).
"""

from rbmcap.motion.amass import AMASSEntry, discover, iter_motions, read_split_lists
from rbmcap.motion.bvh import BVH, parse_bvh, read_bvh, write_bvh
from rbmcap.motion.joint_map import JointMap
from rbmcap.motion.limits import JointLimits
from rbmcap.motion.procedural import KINDS, generate, generate_library
from rbmcap.motion.quality import foot_skate_mm, ground_penetration_mm, motion_info
from rbmcap.motion.retarget import bvh_to_motion, retarget_bvh
from rbmcap.motion.smpl_motion import SMPLMotion, read_motion

__all__ = [
    "BVH",
    "KINDS",
    "AMASSEntry",
    "JointLimits",
    "JointMap",
    "SMPLMotion",
    "bvh_to_motion",
    "discover",
    "foot_skate_mm",
    "generate",
    "generate_library",
    "ground_penetration_mm",
    "iter_motions",
    "motion_info",
    "parse_bvh",
    "read_bvh",
    "read_motion",
    "read_split_lists",
    "retarget_bvh",
    "write_bvh",
]
