"""A seeded library of parametric SMPL motions: the embedded default motion source.

>>> from rbmcap.motion.procedural import KINDS, generate
>>> motion = generate("walk", seed=0)
"""

from rbmcap.motion.procedural.library import (
    GAIT_KINDS,
    KINDS,
    generate,
    generate_library,
    sample_betas,
)

__all__ = ["GAIT_KINDS", "KINDS", "generate", "generate_library", "sample_betas"]
