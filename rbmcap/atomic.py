"""Atomic file writes: a crash or a kill leaves either the old file or the new one, never half.

Write to a temporary file beside the target (same file system), then ``os.replace`` it onto the
target; on any error the temporary file is removed. A process killed outright (SIGKILL, a power
cut) cannot remove its temporary file: the name says which machine and process wrote it
(``.STEM.HOST-PID-XXXX.tmpSUFFIX``), and the next write of the same target on that machine
removes those whose process is gone. The temporary file is created with mode ``0666`` less the
process's umask, so the file written has the permissions a plain ``open(path, "w")`` gives.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:16] or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that writers of ``path`` on this machine left behind when they
    were killed (their process no longer runs); returns the files removed."""
    path = Path(path)
    prefix = f".{path.stem}.{_host()}-"
    pattern = f"{glob.escape(prefix)}*.tmp{glob.escape(path.suffix)}"
    removed = []
    for p in path.parent.glob(pattern):
        pid = p.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    The temporary name keeps ``path``'s suffix (some writers, e.g. ``np.savez`` or trimesh,
    choose the format from it) and starts with a dot, so a folder listing does not show it as a
    result while it is being written. Temporaries of ``path`` left by killed writers are removed
    first (:func:`remove_stale_temporaries`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp_path = _create_temporary(path)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


def _create_temporary(path: Path) -> Path:
    """Create an empty ``.STEM.HOST-PID-XXXXXXXX.tmpSUFFIX`` beside ``path`` (mode ``0666`` less
    the umask, as ``open`` creates files) and return its path."""
    prefix = f".{path.stem}.{_host()}-{os.getpid()}-"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = path.parent / f"{prefix}{secrets.token_hex(4)}.tmp{path.suffix}"
        try:
            os.close(os.open(tmp, flags, 0o666))
        except FileExistsError:
            continue
        return tmp


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)
