"""The length of the acceptance runs (tests marked ``acceptance``): short by default, so that CI
runs each one in seconds and it still fails when the code it guards breaks; the release lengths
(minute streams, thousands of fuzzed inputs, twenty kills) with ``RBMCAP_ACCEPTANCE=1`` in the
environment, which ``make acceptance`` sets."""

from __future__ import annotations

import os

FULL = os.environ.get("RBMCAP_ACCEPTANCE", "") not in ("", "0")
"""True when ``RBMCAP_ACCEPTANCE`` is set (and not ``0``): the release lengths."""


def length(short, full):
    """``full`` in an acceptance run (:data:`FULL`), else ``short``."""
    return full if FULL else short
