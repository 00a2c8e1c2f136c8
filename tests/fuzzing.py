"""The fuzzing harness every reader's fuzz test shares: mutations of a valid file, and a checked
call of the reader on each.

A fuzz test takes one valid input (``seed``: the bytes of a file the reader accepts), lets
hypothesis draw a mutated copy (:func:`mutated`), writes it, and calls :func:`check_reader`. The
contract (issue 16) for every input, however broken:

- the reader returns, or raises an :class:`~rbmcap.errors.RBMCapError` (nothing else);
- it finishes within a bounded time (:data:`TIME_LIMIT_S`, enforced with SIGALRM, so a real hang
  is caught, not only a slow return);
- it leaves no partial output: every ``outputs`` path either does not exist or was accepted by
  its own reader (``verify``).

Counts per reader (inputs tried, accepted, refused with a library error, uncaught exceptions,
hangs, partial outputs) are kept in :data:`STATS`; with ``RBMCAP_FUZZ_REPORT=FILE`` set they are
written there as JSON when the session ends (``tests/conftest.py``), which is where the table of
``docs/reliability.md`` comes from.

Examples per reader: :func:`fuzz_settings` gives 200 in the default run, ``FUZZ_EXAMPLES`` in
the environment (the slow run uses 2,000) overrides it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from rbmcap.errors import RBMCapError

TIME_LIMIT_S = 10.0
"""Wall-clock bound per input; far above any reader's time on these small files (milliseconds)."""

DEFAULT_EXAMPLES = 200
SLOW_EXAMPLES = 2000

STATS: dict[str, dict[str, int]] = defaultdict(
    lambda: {"tried": 0, "accepted": 0, "refused": 0, "uncaught": 0, "hangs": 0, "partial": 0}
)
FAILURES: dict[str, list[str]] = defaultdict(list)


def fuzz_settings(examples: int | None = None) -> settings:
    """hypothesis settings for one reader's fuzz test: ``examples`` inputs (default: 200, or
    ``FUZZ_EXAMPLES`` from the environment), no deadline (:func:`check_reader` bounds time)."""
    count = examples or int(os.environ.get("FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                               HealthCheck.function_scoped_fixture],  # fmt: skip
    )


class Hang(BaseException):
    """Raised by the alarm inside a reader that ran past :data:`TIME_LIMIT_S` (a BaseException,
    so a reader's own ``except Exception`` cannot swallow it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def _alarm(signum, frame):
        raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_reader(
    name: str,
    read: Callable[[], object],
    outputs: Iterable[Path] = (),
    verify: Callable[[Path], object] | None = None,
) -> str:
    """Call ``read()`` on one fuzzed input and check the contract; returns the outcome
    (``accepted`` or ``refused``) and raises AssertionError (with the traceback) otherwise.

    ``outputs``: files the call may write; afterwards each must be absent or accepted by
    ``verify`` (a reader of that output), else it counts as a partial output.
    """
    stats = STATS[name]
    stats["tried"] += 1
    outcome = "accepted"
    try:
        with time_limit(TIME_LIMIT_S):
            read()
    except RBMCapError:
        outcome = "refused"
    except Hang:
        stats["hangs"] += 1
        FAILURES[name].append("hang")
        raise AssertionError(f"{name}: the reader hung (> {TIME_LIMIT_S} s)") from None
    except Exception as exc:  # noqa: BLE001 - any other exception is the bug we look for
        stats["uncaught"] += 1
        text = "".join(traceback.format_exception(exc))
        FAILURES[name].append(text)
        raise AssertionError(f"{name}: uncaught {type(exc).__name__}: {exc}\n{text}") from None
    for out in outputs:
        out = Path(out)
        if not out.exists():
            continue
        try:
            if verify is not None:
                verify(out)
            if outcome == "refused":
                raise AssertionError("written although the call failed")
        except (RBMCapError, AssertionError) as exc:
            stats["partial"] += 1
            FAILURES[name].append(f"partial output {out}: {exc}")
            raise AssertionError(f"{name}: partial output {out} left behind ({exc})") from None
    stats[outcome] += 1
    return outcome


def write_report(path: str | os.PathLike) -> None:
    """Write :data:`STATS` (and the first failure of each reader, if any) as JSON."""
    data = {k: dict(v) for k, v in sorted(STATS.items())}
    for k, fails in FAILURES.items():
        data.setdefault(k, {})["first_failure"] = fails[0][-2000:]
    Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Mutations. Text mutations work on lines and cells (the structure of CSV, BVH and YAML files);
# byte mutations suit binary files (C3D, npz, checkpoints) and also apply to text.

NASTY_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "1e308", "-1e308", "1e400",
                 "-0", "-1", "-99999999", "99999999999999999999999", "0", "1e-320",
                 "0x10", "1,5", "", " ", "--1", "1e", "١٢"]  # fmt: skip
DELIMITERS = [",", ";", "\t", " ", "|", ",,", ""]
ENCODINGS = ["utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252", "utf-8-sig"]


def _numeric_spans(text: str) -> list[tuple[int, int]]:
    import re

    return [m.span() for m in re.finditer(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)]


@st.composite
def text_mutation(draw, text: str) -> str:
    """One mutation of ``text``: a numeric token replaced by a nasty number, a line duplicated,
    deleted or swapped, a cell added or removed, the delimiter changed, a line truncated, or a
    stray character inserted."""
    lines = text.split("\n")
    kind = draw(st.sampled_from(["number", "dup_line", "del_line", "swap_lines", "add_cell",
                                 "del_cell", "delimiter", "cut_line", "insert", "blank_line"]))  # fmt: skip
    i = draw(st.integers(0, max(len(lines) - 1, 0)))
    if kind == "number":
        spans = _numeric_spans(text)
        if spans:
            a, b = spans[draw(st.integers(0, len(spans) - 1))]
            return text[:a] + draw(st.sampled_from(NASTY_NUMBERS)) + text[b:]
        kind = "insert"
    if kind == "dup_line":
        lines.insert(i, lines[i])
    elif kind == "del_line":
        del lines[i]
    elif kind == "swap_lines" and len(lines) > 1:
        j = draw(st.integers(0, len(lines) - 1))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind in ("add_cell", "del_cell"):
        cells = lines[i].split(",")
        k = draw(st.integers(0, len(cells) - 1))
        if kind == "add_cell":
            cells.insert(k, draw(st.sampled_from(NASTY_NUMBERS + ["x", "Frame"])))
        elif len(cells) > 1:
            del cells[k]
        lines[i] = ",".join(cells)
    elif kind == "delimiter":
        new = draw(st.sampled_from(DELIMITERS))
        if draw(st.booleans()):
            return text.replace(",", new)
        lines[i] = lines[i].replace(",", new)
    elif kind == "cut_line":
        lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    elif kind == "insert":
        line = lines[i]
        k = draw(st.integers(0, len(line)))
        lines[i] = line[:k] + draw(st.sampled_from(["\x00", "\"", "'", ":", "-", "[", "{", "#",
                                                    "é", "\ufeff", "\r", "  ", "*", "&a"])) + line[k:]  # fmt: skip
    elif kind == "blank_line":
        lines.insert(i, "")
    return "\n".join(lines)


@st.composite
def byte_mutation(draw, data: bytes) -> bytes:
    """One mutation of raw bytes: truncation, byte flips, a slice repeated or removed, or
    random bytes overwritten."""
    n = len(data)
    kind = draw(st.sampled_from(["truncate", "flip", "repeat", "remove", "overwrite"]))
    if n == 0:
        return draw(st.binary(max_size=64))
    if kind == "truncate":
        return data[: draw(st.integers(0, n - 1))]
    buf = bytearray(data)
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            k = draw(st.integers(0, n - 1))
            buf[k] ^= draw(st.integers(1, 255))
        return bytes(buf)
    a = draw(st.integers(0, n - 1))
    b = draw(st.integers(a, min(n, a + 256)))
    if kind == "repeat":
        return bytes(buf[:b] + buf[a:b] + buf[b:])
    if kind == "remove":
        return bytes(buf[:a] + buf[b:])
    junk = draw(st.binary(min_size=1, max_size=32))
    buf[a : a + len(junk)] = junk
    return bytes(buf)


@st.composite
def mutated(draw, seed: bytes, text: bool = True) -> bytes:
    """A mutated copy of ``seed`` (the bytes of a valid file): the empty file, a re-encoding
    (UTF-16, Latin-1, …; text only), or one to three text or byte mutations."""
    choice = draw(st.sampled_from(["empty", "encoding", "text", "text", "text", "bytes"]
                                  if text else ["empty", "bytes"]))  # fmt: skip
    if choice == "empty":
        return b""
    if choice == "encoding":
        src = seed.decode("utf-8", errors="replace")
        if draw(st.booleans()):
            src = src.replace("a", "ä", 3)
        return src.encode(draw(st.sampled_from(ENCODINGS)), errors="replace")
    if choice == "text":
        src = seed.decode("utf-8", errors="replace")
        for _ in range(draw(st.integers(1, 3))):
            src = draw(text_mutation(src))
        return src.encode("utf-8", errors="surrogatepass")
    data = seed
    for _ in range(draw(st.integers(1, 3))):
        data = draw(byte_mutation(data))
    return data
