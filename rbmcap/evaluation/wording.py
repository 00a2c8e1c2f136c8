"""Numbers as the report words them, computed from the values they describe."""

from __future__ import annotations

import math

_FRACTION_WORDS = {1.0: "all", 0.5: "half", 0.25: "a quarter", 0.2: "a fifth", 0.1: "a tenth"}


def fraction_in_words(fraction: float) -> str:
    """A fraction as the report writes it: ``0.2`` → "a fifth", ``1/3`` → "a third",
    otherwise the number and "×" (``0.3`` → "0.3×")."""
    f = float(fraction)
    for value, words in _FRACTION_WORDS.items():
        if math.isclose(f, value, rel_tol=1e-9):
            return words
    if math.isclose(f, 1 / 3, rel_tol=1e-6):
        return "a third"
    return f"{f:g}×"


def share_of(fraction: float, whole: str) -> str:
    """``fraction`` of ``whole`` in words: "a fifth of the time", "0.3 × the time"."""
    words = fraction_in_words(fraction)
    return f"{fraction:g} × {whole}" if words.endswith("×") else f"{words} of {whole}"
