"""Rotation matrices read from files: checked, and re-orthonormalised to the nearest rotation.

Every rotation matrix that enters rbmcap from a file (a capture's plates, through
:class:`rbmcap.io.capture.Capture`) goes through :func:`orthonormalize`: a matrix that is a
rotation up to rounding is replaced by the nearest rotation in the Frobenius norm
(``roma.special_procrustes``), and the largest correction made is reported; a matrix that is not
a rotation (a reflection, or scaled or sheared beyond :data:`ROTATION_TOLERANCE`) is a
:class:`~rbmcap.errors.DataError` naming where it is.

The check is vectorised (elementwise arithmetic on the matrices' columns, no batched SVD): the
singular values come from a closed-form eigen decomposition of ``MᵀM − I``. Only matrices that
are not rotations to the caller's precision (``atol``) are corrected, so exact rotations written
in float32 or float64 cost the check alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import roma
import torch

from rbmcap.errors import ConfigError, DataError, location

ROTATION_TOLERANCE = 1e-3
"""Largest accepted deviation of a singular value from 1 (``max |σᵢ − 1|``) for a matrix read
from a file to count as a rotation up to rounding: rotations written with 4 or more decimals
pass, a matrix scaled by 1 % (deviation 1e-2) is refused. Inside it the correction changes a
plate's axes far less than its tracking noise (docs/reliability.md).
"""

_MAX_TOLERANCE = 0.1
"""The largest tolerance accepted: a matrix scaled or sheared by more than 10 % is no rotation
written with rounding."""


def orthonormalize(
    mats: np.ndarray,
    valid: np.ndarray | None = None,
    *,
    tolerance: float = ROTATION_TOLERANCE,
    atol: float = 0.0,
    dtype: type = np.float64,
    where: Callable[[tuple[int, ...]], str] | None = None,
) -> tuple[np.ndarray, float]:
    """The nearest rotation to each valid matrix, refusing matrices that are not rotations.

    Args:
        mats: (..., 3, 3) matrices (any float dtype). Entries outside ``valid`` are ignored
            (they may hold NaN).
        valid: (...) bool, or None (all valid).
        tolerance: largest accepted ``max |σᵢ − 1|`` (see :data:`ROTATION_TOLERANCE`), at most
            0.1.
        atol: matrices already orthonormal within ``atol`` (``‖MᵀM − I‖_F ≤ atol``) are returned
            as given, and the others are replaced by their nearest rotation; 0 (default): every
            matrix not orthonormal to float64 precision is replaced.
            :class:`~rbmcap.io.capture.Capture`, which stores float32, passes :data:`FLOAT32_ATOL`.
        dtype: of the result (float32 for a capture: converting in chunks is cheaper).
        where: turns the batch index of a bad matrix into the start of the error message (e.g.
            ``"take.npz: plate 'head', frame 12"``); default ``"matrix (i, j)"``.

    Returns:
        rotations (..., 3, 3) of ``dtype`` (identity where not valid), and the largest deviation
        ``max |σᵢ − 1|`` over the valid matrices (0.0 when there are none): the size of the
        correction made, to report.

    Raises:
        DataError: a valid matrix is not finite, has a determinant ≤ 0 (a reflection or a
            singular matrix), or deviates by more than ``tolerance``; the message names the first
            one in index order (for (T, N, 3, 3) plates: the earliest frame).
    """
    if not 0 < tolerance <= _MAX_TOLERANCE:
        raise ConfigError(f"tolerance {tolerance} is outside (0, {_MAX_TOLERANCE}]")
    mats = np.asarray(mats)
    batch = mats.shape[:-2]
    valid = np.broadcast_to(np.asarray(True if valid is None else valid, dtype=bool), batch)
    m, flags = mats.reshape(-1, 3, 3), valid.reshape(-1)
    where = where or (lambda index: f"matrix {index}")
    out = np.empty((len(m), 3, 3), dtype=dtype)
    deviation = 0.0
    for start in range(0, len(m), _CHUNK):
        # (9, c) entries (3i + j) of a chunk that fits in cache: ~100 elementwise passes each;
        # entries that are not valid become identities (deviation 0, nothing to correct)
        x = np.ascontiguousarray(m[start : start + _CHUNK].reshape(-1, 9).T, dtype=np.float64)
        seen = flags[start : start + _CHUNK]
        if not seen.all():
            x[:, ~seen] = _EYE9
        dev, bad, why = _check_chunk(x, tolerance, atol, deviation)
        if bad is not None:
            index = np.unravel_index(start + bad, batch)
            raise DataError(f"{where(tuple(int(i) for i in index))}: {why}")
        deviation = max(deviation, dev)
        out[start : start + _CHUNK] = x.T.reshape(-1, 3, 3)
    return out.reshape(*batch, 3, 3), deviation


_EYE9 = np.eye(3).reshape(9, 1)

_CHUNK = 8192
"""Matrices per chunk: the chunk's temporaries (64 KiB each) stay in cache."""


def _check_chunk(
    x: np.ndarray, tolerance: float, atol: float, floor: float
) -> tuple[float, int | None, str]:
    """Check the (9, c) matrices ``x`` and orthonormalise them in place; returns the largest
    deviation, and the index of the first matrix that is not a rotation (None if all are)
    with the reason."""
    # NaN, infinite or far from [-1, 1] (a rotation's entries): refused before any arithmetic
    # that could overflow; set aside as identities so the rest is checked as well
    wild = ~(np.abs(x) <= 2.0).all(axis=0)
    first_wild = int(np.argmax(wild)) if wild.any() else None
    if first_wild is not None:
        wild_entries = x[:, first_wild].copy()
        x[:, wild] = _EYE9
    e = _gram(x)
    frob = np.sqrt(_frobenius_sq(e))
    deviation, bad = _deviation_and_bad(x, e, frob, tolerance, floor)
    if first_wild is not None and (bad.size == 0 or first_wild < bad[0]):
        return deviation, first_wild, _wild(wild_entries)
    if bad.size:
        k = int(bad[0])
        dev_k = float(_exact_deviation(e[:, k]))
        return deviation, k, _why(x[:, k].reshape(3, 3), dev_k, float(_det(x[:, k])), tolerance)
    _nearest_rotations(x, frob > atol)
    return deviation, None, ""


def _wild(entries: np.ndarray) -> str:
    if not np.isfinite(entries).all():
        return "the rotation matrix has NaN or infinite entries"
    big = float(entries[np.argmax(np.abs(entries))])
    return f"not a rotation: an entry is {big:.6g} (a rotation's entries lie in [-1, 1])"


FLOAT32_ATOL = 2.0**-21
"""``‖MᵀM − I‖_F`` of exact rotations rounded to float32 (entries off by up to 2⁻²⁴ each) stays
below this (about 4.8e-7): such matrices are rotations to float32 precision already."""


def _deviation_and_bad(x, e, frob, tolerance, floor: float) -> tuple[float, np.ndarray]:
    """The largest ``max |σᵢ − 1|`` over all matrices and the (sorted) indices of those that are
    not rotations: det ≤ 0 or deviation > tolerance.

    The spectral norm of E = MᵀM − I (the largest |σᵢ² − 1|) lies in [‖E‖_F / √3, ‖E‖_F]; the
    exact eigenvalues are computed only where that bracket cannot rule a matrix out of being
    the largest (above ``floor``, the largest of the chunks before) or a bad one."""
    lower = _sigma_minus_one(frob / np.sqrt(3.0))
    upper = frob / (np.sqrt(np.maximum(1.0 - frob, 0.0)) + 1.0)
    best = max(float(lower.max(initial=0.0)), floor)
    cand = np.flatnonzero((upper >= best) | (upper > tolerance))
    exact = _exact_deviation(e[:, cand])
    deviation = float(exact.max(initial=0.0))
    det = _det(x)
    bad = np.union1d(cand[exact > tolerance], np.flatnonzero(det <= 0))
    return deviation, bad


def _why(m: np.ndarray, deviation: float, det: float, tolerance: float) -> str:
    sigma = np.sqrt(np.maximum(np.linalg.eigvalsh(m.T @ m), 0.0))[::-1]
    values = ", ".join(f"{s:.6g}" for s in sigma)
    if det < 0:
        return f"not a rotation: determinant {det:.6g} < 0 (a reflection; singular values {values})"
    return (
        f"not a rotation: singular values {values} (a rotation has 1, 1, 1), off by "
        f"{deviation:.3g}, beyond the tolerance {tolerance:g}"
    )


def _gram(x: np.ndarray) -> np.ndarray:
    """(6, ...) entries 00, 11, 22, 01, 02, 12 of ``MᵀM − I`` for matrices given as (9, ...)
    entries (row-major: entry (i, j) at 3i + j), from column dot products."""

    def dot(j, k):
        return x[j] * x[k] + x[3 + j] * x[3 + k] + x[6 + j] * x[6 + k]

    return np.stack(
        [dot(0, 0) - 1.0, dot(1, 1) - 1.0, dot(2, 2) - 1.0, dot(0, 1), dot(0, 2), dot(1, 2)]
    )


def _det(x: np.ndarray) -> np.ndarray:
    return (
        x[0] * (x[4] * x[8] - x[5] * x[7])
        - x[1] * (x[3] * x[8] - x[5] * x[6])
        + x[2] * (x[3] * x[7] - x[4] * x[6])
    )


def _frobenius_sq(e: np.ndarray) -> np.ndarray:
    return e[0] ** 2 + e[1] ** 2 + e[2] ** 2 + 2.0 * (e[3] ** 2 + e[4] ** 2 + e[5] ** 2)


def _exact_deviation(e: np.ndarray) -> np.ndarray:
    """``max |σᵢ − 1|`` from E = MᵀM − I given as (6, ...): the extreme eigenvalues λ of E in
    closed form (Smith 1961; accurate to the rounding of E's entries), σ² = 1 + λ."""
    e00, e11, e22, e01, e02, e12 = e
    q = (e00 + e11 + e22) / 3.0
    b00, b11, b22 = e00 - q, e11 - q, e22 - q
    p = np.sqrt((b00**2 + b11**2 + b22**2 + 2.0 * (e01**2 + e02**2 + e12**2)) / 6.0)
    det_b = (
        b00 * (b11 * b22 - e12**2) - e01 * (e01 * b22 - e12 * e02) + e02 * (e01 * e12 - b11 * e02)
    )
    safe = np.where(p > 0, p, 1.0)
    phi = np.arccos(np.clip(det_b / (2.0 * safe**3), -1.0, 1.0)) / 3.0
    hi = q + 2.0 * p * np.cos(phi)
    lo = q + 2.0 * p * np.cos(phi + 2.0 * np.pi / 3.0)
    return np.maximum(_sigma_minus_one(lo), _sigma_minus_one(hi))


def _sigma_minus_one(lam: np.ndarray) -> np.ndarray:
    """|σ − 1| for σ² = 1 + λ, without cancellation: |λ| / (σ + 1)."""
    return np.abs(lam) / (np.sqrt(np.maximum(1.0 + lam, 0.0)) + 1.0)


def _nearest_rotations(x: np.ndarray, needs: np.ndarray) -> None:
    """Replace the (9, K) matrices ``x`` flagged by ``needs`` (K,) bool by their nearest rotations,
    in place."""
    idx = np.flatnonzero(needs)
    if idx.size:
        m = torch.from_numpy(np.ascontiguousarray(x[:, idx].T)).view(-1, 3, 3)
        x[:, idx] = roma.special_procrustes(m).reshape(-1, 9).numpy().T


def where_plate(source: str, names: Sequence[str], kind: str = "plate") -> Callable:
    """``where`` for (T, N, …) arrays of named plates (or points): ``"SOURCE: plate 'NAME',
    frame F"`` (F the 0-based frame index)."""
    head = location(source or "capture")

    def where(index: tuple[int, ...]) -> str:
        return f"{head}: {kind} {names[index[1]]!r}, frame {index[0]}"

    return where
