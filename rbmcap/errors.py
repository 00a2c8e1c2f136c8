"""One exception family for the whole library.

Every error a user can cause (a missing file, a malformed array, a bad configuration) is raised as
a subclass of :class:`RBMCapError`; the command-line tool turns these into one line on stderr and a
non-zero exit status. Anything else escaping the library is a bug.
"""

from __future__ import annotations


class RBMCapError(Exception):
    """Base class of every error rbmcap raises on purpose."""


class FormatError(RBMCapError):
    """A file exists but its content is not what was expected (keys, shapes, syntax)."""


class ModelError(RBMCapError):
    """A body model cannot be found, loaded or used as asked."""


class ConfigError(RBMCapError):
    """A configuration value is unknown, missing or out of range."""


class DataError(RBMCapError):
    """Input data is unusable (NaN, empty, inconsistent with other inputs)."""
