"""Checks of single values read from configuration files: finite numbers and vectors within a
bound, and short quotations of a value for messages.

A bad value inside well-formed YAML is each reader's ConfigError naming the file and the key;
these helpers decide what is acceptable and quote what is not.
"""

from __future__ import annotations

import math
import numbers
import reprlib
from collections.abc import Sequence
from typing import Any

import numpy as np

MAX_MAGNITUDE = 1e6
"""Largest magnitude :func:`finite_vector` accepts by default (metres, radians, shape
coefficients: far beyond any real value, far below where squares and norms overflow)."""


def finite_float(value: Any, bound: float = MAX_MAGNITUDE) -> float | None:
    """``value`` as a float if it is a real number (not a boolean) with ``|value| ≤ bound``
    (finite), else None; a huge integer is None, not an OverflowError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        x = float(value)
    except (OverflowError, ValueError):
        return None
    return x if math.isfinite(x) and abs(x) <= bound else None


def finite_vector(
    value: Any, size: int | None = None, bound: float = MAX_MAGNITUDE
) -> np.ndarray | None:
    """``value`` as a float64 array if it is a sequence (list, tuple, OmegaConf list) of
    ``size`` (any count when None) numbers accepted by :func:`finite_float`, else None."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        return None
    if size is not None and len(value) != size:
        return None
    xs = [finite_float(v, bound) for v in value]
    if any(x is None for x in xs):
        return None
    return np.asarray(xs, dtype=np.float64).reshape(len(xs))


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages (a value may be huge)."""
    short = reprlib.Repr()
    short.maxlevel, short.maxstring, short.maxother = 3, limit, limit
    text = short.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
