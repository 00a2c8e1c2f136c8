"""OpenSim's Python API, the optional ``opensim`` extra (``pip install rbmcap[opensim]``).

The extra is the ``opensim`` wheel from PyPI (OpenSim 4.6 and later ship self-contained manylinux
wheels: their BLAS/LAPACK is inside, nothing is needed from the system). Only the inverse
kinematics runner (:mod:`rbmcap.io.opensim.ik`) and the tests that read files back through
OpenSim import it; writing ``.trc``/``.mot`` files needs no OpenSim.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rbmcap.errors import ConfigError

INSTALL_HINT = "pip install 'rbmcap[opensim]'"


def load_opensim(log_level: str = "error") -> ModuleType:
    """The ``opensim`` module, with its log at ``log_level`` ('info', 'warn', 'error', 'off').

    Raises:
        ConfigError: OpenSim's Python API is not installed (or does not load), naming the extra.
    """
    try:
        opensim = importlib.import_module("opensim")
        opensim.Logger.setLevelString(log_level)
        opensim.Logger.removeFileSink()  # else OpenSim writes opensim.log in the working folder
    except (ImportError, AttributeError, OSError) as exc:
        raise ConfigError(
            f"OpenSim's Python API is not available ({exc}); install it with {INSTALL_HINT}"
        ) from None
    return opensim
