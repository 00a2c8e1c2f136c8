"""Streaming ``.npy`` files and atomic writes.

Arrays are written row block by row block through plain file writes (no memory map), so a writer's
memory does not grow with the file; the header is fixed up front from the known shape. Files are
written under a temporary name and renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

READ_ROWS_BYTES = 16 << 20
"""Bytes per block when copying rows between files."""


class NpyWriter:
    """Write a (rows, *tail) array of ``dtype`` to ``path`` in row blocks.

    Use as a context manager; the file is complete only when exactly ``rows`` rows were
    appended. ``durable`` flushes the file to the disk on close (``fsync``), for files that must
    survive a power cut once renamed into place.
    """

    def __init__(
        self, path: str | Path, rows: int, tail: tuple[int, ...], dtype, durable: bool = True
    ) -> None:
        self.path = Path(path)
        self.durable = durable
        self.rows = int(rows)
        self.tail = tuple(int(t) for t in tail)
        self.dtype = np.dtype(dtype)
        self.written = 0
        self._fh = open(self.path, "wb")
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": (self.rows, *self.tail),
        }
        np.lib.format.write_array_header_1_0(self._fh, header)

    def append(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        if block.shape[1:] != self.tail:
            raise ValueError(
                f"{self.path}: block rows of shape {block.shape[1:]}, expected {self.tail}"
            )
        if self.written + block.shape[0] > self.rows:
            raise ValueError(f"{self.path}: more than {self.rows} rows appended")
        self._fh.write(block.tobytes())
        self.written += block.shape[0]

    def close(self) -> None:
        if self._fh.closed:
            return
        self._fh.flush()
        if self.durable:
            os.fsync(self._fh.fileno())
        self._fh.close()
        if self.written != self.rows:
            raise ValueError(f"{self.path}: {self.written} rows written, {self.rows} declared")

    def abort(self) -> None:
        """Close without completing (the caller removes the file)."""
        self._fh.close()

    def __enter__(self) -> NpyWriter:
        return self

    def __exit__(self, exc_type, *_) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def npy_layout(path: str | Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """Shape, dtype and data offset (bytes) of a C-order ``.npy`` file."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        if fortran:
            raise ValueError(f"{path}: Fortran-order arrays are not supported")
        return tuple(shape), np.dtype(dtype), fh.tell()


def iter_row_blocks(path: str | Path, start: int = 0, stop: int | None = None):
    """Yield rows [start, stop) of a ``.npy`` file in blocks, read without a memory map."""
    shape, dtype, offset = npy_layout(path)
    stop = shape[0] if stop is None else stop
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
    per_block = max(1, READ_ROWS_BYTES // max(row_bytes, 1))
    with open(path, "rb") as fh:
        fh.seek(offset + start * row_bytes)
        for a in range(start, stop, per_block):
            n = min(per_block, stop - a)
            buf = fh.read(n * row_bytes)
            if len(buf) != n * row_bytes:
                raise EOFError(f"{path}: truncated (rows {a}..{a + n})")
            yield np.frombuffer(buf, dtype=dtype).reshape(n, *shape[1:])


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def canonical_json(data: Any) -> str:
    """Deterministic JSON text (sorted keys, fixed indentation, trailing newline)."""
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def atomic_write_text(path: str | Path, text: str, durable: bool = True) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        if durable:
            os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_json(path: str | Path) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)
