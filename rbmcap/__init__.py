"""rbmcap: Rigid Body Marker motion capture to SMPL.

The package follows the data: ``motion`` → ``body`` → ``markers`` → ``dataset`` → ``model`` /
``training`` → ``inference``, ``evaluation``, ``baseline`` → ``io``.
"""

from rbmcap.errors import (
    ConfigError,
    DataError,
    FormatError,
    Interrupted,
    ModelError,
    RBMCapError,
)

__version__ = "0.1.0"
__all__ = [
    "ConfigError",
    "DataError",
    "FormatError",
    "Interrupted",
    "ModelError",
    "RBMCapError",
    "__version__",
]
