"""The fuzzing harness every reader's fuzz test shares: mutations of a valid file, and a checked
call of the reader on each.

A fuzz test takes one valid input (``seed``: the bytes of a file the reader accepts), lets
hypothesis draw a mutated copy (:func:`mutated`), writes it, and calls :func:`check_reader`. The
contract for every input, however broken:

- the reader returns, or raises an :class:`~rbmcap.errors.RBMCapError` (nothing else);
- it finishes within a bounded time (:data:`TIME_LIMIT_S`, enforced with SIGALRM, so a real hang
  is caught, not only a slow return);
- it leaves no partial output: every ``outputs`` path either does not exist or was accepted by
  its own reader (``verify``).

Counts per reader (inputs tried, accepted, refused with a library error, uncaught exceptions,
hangs, partial outputs) are kept in :data:`STATS`; with ``RBMCAP_FUZZ_REPORT=FILE`` set they are
written there as JSON when the session ends (``tests/conftest.py``), which is where the table of
``docs/reliability.md`` comes from.

Examples per reader: :func:`fuzz_settings` gives 200 in the default run, 50 for a whole command
(:data:`COMMAND_EXAMPLES`), and 2,000 for each in an acceptance run (``RBMCAP_ACCEPTANCE=1``,
:mod:`helpers.acceptance`); ``FUZZ_EXAMPLES`` in the environment overrides both.
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

from helpers.acceptance import length
from rbmcap.errors import RBMCapError

TIME_LIMIT_S = 10.0
"""Wall-clock bound per input; far above any reader's time on these small files (milliseconds)."""

DEFAULT_EXAMPLES = length(200, 2000)
"""Inputs per reader: 200 in the default run, 2,000 in an acceptance run."""
COMMAND_EXAMPLES = length(50, 2000)
"""Inputs for a whole command (import, from-bvh: a reader plus its writer and the retargeting, up
to 0.5 s each): 50 in the default run (its reader gets DEFAULT_EXAMPLES on its own), 2,000 in an
acceptance run."""

STATS: dict[str, dict[str, int]] = defaultdict(
    lambda: {"tried": 0, "accepted": 0, "refused": 0, "uncaught": 0, "hangs": 0, "partial": 0}
)
FAILURES: dict[str, list[str]] = defaultdict(list)


def fuzz_settings(examples: int = DEFAULT_EXAMPLES) -> settings:
    """hypothesis settings for one reader's fuzz test: ``examples`` inputs (``FUZZ_EXAMPLES``
    from the environment instead, where set), no deadline (:func:`check_reader` bounds time).
    The rest (``derandomize`` in CI) comes from the loaded profile (``tests/conftest.py``)."""
    count = int(os.environ.get("FUZZ_EXAMPLES", examples))
    return settings(
        max_examples=count,
        deadline=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.function_scoped_fixture,
        ],
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
    except Exception as exc:  # any other exception is the bug we look for
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


def report() -> dict[str, dict]:
    """{reader: counts} of this process (:data:`STATS`), with the first failure of each reader
    that had one (``first_failure``)."""
    data = {k: dict(v) for k, v in sorted(STATS.items())}
    for k, fails in FAILURES.items():
        data.setdefault(k, {})["first_failure"] = fails[0][-2000:]
    return data


def write_report(path: str | os.PathLike, parts: Iterable[dict[str, dict]]) -> dict[str, dict]:
    """Write the sum of several :func:`report` results (one per pytest-xdist worker) as JSON;
    returns it."""
    total: dict[str, dict] = {}
    for part in parts:
        for reader, counts in part.items():
            into = total.setdefault(reader, {})
            for key, value in counts.items():
                if isinstance(value, int):
                    into[key] = into.get(key, 0) + value
                else:
                    into.setdefault(key, value)
    data = dict(sorted(total.items()))
    Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


COUNTS = ("tried", "accepted", "refused", "uncaught", "hangs", "partial")


def table(data: dict[str, dict]) -> list[str]:
    """One line per reader of a :func:`write_report` result: its name and counts."""
    return [
        f"{reader:22s} " + "  ".join(f"{k} {counts.get(k, 0)}" for k in COUNTS)
        for reader, counts in data.items()
    ]


# ---------------------------------------------------------------------------------------------
# Mutations. Text mutations work on lines and cells (the structure of CSV, BVH and YAML files);
# byte mutations suit binary files (C3D, npz, checkpoints) and also apply to text.

NASTY_NUMBERS = [
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e308",
    "-1e308",
    "1e400",
    "-0",
    "-1",
    "-99999999",
    "99999999999999999999999",
    "0",
    "1e-320",
    "0x10",
    "1,5",
    "",
    " ",
    "--1",
    "1e",
    "١٢",
]
DELIMITERS = [",", ";", "\t", " ", "|", ",,", ""]
STRAY = ["\x00", '"', "'", ":", "-", "[", "{", "#", "é", "\ufeff", "\r", "  ", "*", "&a"]
TEXT_MUTATIONS = [
    "number",
    "dup_line",
    "del_line",
    "swap_lines",
    "add_cell",
    "del_cell",
    "delimiter",
    "cut_line",
    "insert",
    "blank_line",
]
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
    kind = draw(st.sampled_from(TEXT_MUTATIONS))
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
            cells.insert(k, draw(st.sampled_from([*NASTY_NUMBERS, "x", "Frame"])))
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
        lines[i] = line[:k] + draw(st.sampled_from(STRAY)) + line[k:]
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
    choice = draw(
        st.sampled_from(
            ["empty", "encoding", "text", "text", "text", "bytes"] if text else ["empty", "bytes"]
        )
    )
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


# ---------------------------------------------------------------------------------------------
# Structured C3D mutations: nasty values in the data and parameters through ezc3d, and nasty
# words patched straight into the header and the parameter section (values ezc3d's writer would
# normalise: POINT:USED, ROTATION:RATIO, DATA_START, label counts, …).

C3D_HEADER_FIELDS = {
    "points": (2, "h"),
    "analogs": (4, "h"),
    "first_frame": (6, "H"),
    "last_frame": (8, "H"),
    "gap": (10, "h"),
    "scale": (12, "f"),
    "data_start": (16, "h"),
    "analog_ratio": (18, "h"),
    "rate": (20, "f"),
}
NASTY_WORDS = {
    "h": [0, -1, 1, 2, 255, 32767, -32768],
    "H": [0, 1, 65535, 32768, 2],
    "b": [0, -1, 1, 127, -128],
    "f": [0.0, -1.0, float("nan"), float("inf"), -float("inf"), 1e38, -1e38, 1e-40, 3.0, 1e9],
}


def c3d_parameters(data: bytes) -> dict[tuple[str, str], tuple[int, tuple[int, ...], int]]:
    """{(GROUP, NAME): (type, dims, byte offset of the data)} of a little-endian C3D file's
    parameter section (type -1 char, 1 byte, 2 int16, 4 float); {} where it does not parse."""
    import struct

    out: dict = {}
    try:
        p = (data[0] - 1) * 512 + 4
        groups: dict[int, str] = {}
        records = []
        while 0 <= p < len(data) - 2:
            nchar, gid = struct.unpack_from("<bb", data, p)
            if nchar == 0:
                break
            name = data[p + 2 : p + 2 + abs(nchar)].decode("ascii", "replace").upper()
            q = p + 2 + abs(nchar)
            (offset,) = struct.unpack_from("<h", data, q)
            if gid < 0:
                groups[-gid] = name
            else:
                kind, ndim = struct.unpack_from("<bB", data, q + 2)
                dims = tuple(data[q + 4 : q + 4 + ndim])
                records.append((gid, name, kind, dims, q + 4 + ndim))
            if offset <= 0:
                break
            p = q + offset
        for gid, name, kind, dims, at in records:
            out[(groups.get(gid, "?"), name)] = (kind, dims, at)
    except (IndexError, struct.error):
        return out
    return out


def _patch(buf: bytearray, at: int, fmt: str, value) -> None:
    import struct

    size = struct.calcsize("<" + fmt)
    if 0 <= at and at + size <= len(buf):
        buf[at : at + size] = struct.pack("<" + fmt, value)


@st.composite
def c3d_word_patch(draw, data: bytes) -> bytes:
    """A header field or one word of a parameter's data overwritten with a nasty value of its
    type, or a parameter's dimension byte changed."""
    import numpy as np

    buf = bytearray(data)
    params = c3d_parameters(data)
    if not params or draw(st.integers(0, 3)) == 0:
        at, fmt = C3D_HEADER_FIELDS[draw(st.sampled_from(sorted(C3D_HEADER_FIELDS)))]
        _patch(buf, at, fmt, draw(st.sampled_from(NASTY_WORDS[fmt])))
        return bytes(buf)
    kind, dims, at = params[draw(st.sampled_from(sorted(params)))]
    if dims and draw(st.integers(0, 3)) == 0:
        k = draw(st.integers(0, len(dims) - 1))
        _patch(
            buf, at - len(dims) + k, "B", draw(st.sampled_from([0, 1, 2, 255, (dims[k] + 1) % 256]))
        )
        return bytes(buf)
    count = max(int(np.prod(dims)) if dims else 1, 1)
    fmt = {-1: "b", 1: "b", 2: "h", 4: "f"}.get(kind, "b")
    size = {-1: 1, 1: 1, 2: 2, 4: 4}.get(kind, 1)
    k = draw(st.integers(0, count - 1))
    _patch(buf, at + k * size, fmt, draw(st.sampled_from(NASTY_WORDS[fmt])))
    return bytes(buf)


NASTY_FLOATS = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 1e39, 0.0, -1.0, 1e-320]


def _ezc3d_edit(draw, c) -> None:
    """One edit of an ezc3d object: nasty point / residual / rotation values, or a nasty
    POINT:UNITS, POINT:RATE, label list or first frame."""
    import numpy as np

    params, data = c["parameters"], c["data"]
    kind = draw(
        st.sampled_from(
            [
                "points",
                "residuals",
                "rotations",
                "units",
                "rate",
                "labels",
                "rot_labels",
                "first_frame",
                "no_points",
            ]
        )
    )
    if kind in ("points", "residuals", "rotations"):
        key = {
            "points": ("points",),
            "residuals": ("meta_points", "residuals"),
            "rotations": ("rotations",),
        }[kind]
        arr = np.array(data[key[0]] if len(key) == 1 else data[key[0]][key[1]], dtype=np.float64)
        if arr.size:
            flat = arr.reshape(-1)
            for _ in range(draw(st.integers(1, 4))):
                flat[draw(st.integers(0, flat.size - 1))] = draw(st.sampled_from(NASTY_FLOATS))
            if draw(st.booleans()):
                flat[:] = draw(st.sampled_from(NASTY_FLOATS))
        if len(key) == 1:
            data[key[0]] = arr
        else:
            data[key[0]][key[1]] = arr
    elif kind == "units":
        params["POINT"]["UNITS"]["value"] = [
            draw(
                st.sampled_from(
                    ["furlong", "", " ", "MM", "m ", "é", "mm\x00", "millimeters", "deg"]
                )
            )
        ]
    elif kind == "rate":
        # not 0: ezc3d's writer aborts the process on it (the word patch puts a 0 in instead)
        rates = [f for f in NASTY_FLOATS if f != 0.0]
        params["POINT"]["RATE"]["value"] = [draw(st.sampled_from(rates))]
    elif kind in ("labels", "rot_labels"):
        group = "POINT" if kind == "labels" else "ROTATION"
        old = list(params.get(group, {}).get("LABELS", {}).get("value", []))
        new = draw(st.sampled_from(["", "a", "é", "x" * 40, " : ", "\x01"]))
        labels = [new] * len(old) if draw(st.booleans()) else [*old[:-1], new] if old else old
        if group in params and "LABELS" in params[group]:
            params[group]["LABELS"]["value"] = labels
    elif kind == "first_frame":
        c["header"]["points"]["first_frame"] = draw(st.sampled_from([0, 1, 65535, 32767, 65534]))
    elif kind == "no_points":
        data["points"] = np.zeros((4, 0, data["points"].shape[-1]))
        data["meta_points"]["residuals"] = np.zeros((1, 0, data["points"].shape[-1]))
        params["POINT"]["LABELS"]["value"] = []


@st.composite
def c3d_mutation(draw, seed: bytes) -> bytes:
    """A structured mutation of the C3D file ``seed``: one to three edits through ezc3d (nasty
    values in the data, units, rate, labels, first frame) and/or one to three words patched into
    the header or the parameter section. An edit ezc3d refuses to write is left out."""
    import tempfile

    import ezc3d

    data = seed
    if draw(st.booleans()):
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "a.c3d", Path(tmp) / "b.c3d"
            src.write_bytes(seed)
            c = ezc3d.c3d(str(src))
            for _ in range(draw(st.integers(1, 3))):
                _ezc3d_edit(draw, c)
            try:
                c.write(str(dst))
                data = dst.read_bytes()
            except Exception:  # ezc3d refused the edit: keep the seed
                data = seed
    if data is seed or draw(st.booleans()):
        for _ in range(draw(st.integers(1, 3))):
            data = draw(c3d_word_patch(data))
    return data


# ---------------------------------------------------------------------------------------------
# YAML-specific structured mutations: parse the (valid) seed, change one node of the tree, dump
# it again. Raw YAML that no Python value dumps to (anchors and aliases, deep nesting, bad tags)
# goes in through a placeholder scalar replaced in the dumped text.

_RAW = "RAWYAMLPLACEHOLDER"


def billion_laughs(levels: int = 10, width: int = 9) -> str:
    """A flow sequence whose aliases expand to ``width ** levels`` scalars ("billion laughs")."""
    parts = ["&l0 [" + ", ".join(["lol"] * width) + "]"]
    for k in range(1, levels):
        parts.append(f"&l{k} [" + ", ".join([f"*l{k - 1}"] * width) + "]")
    return "[" + ", ".join(parts) + "]"


YAML_RAW_VALUES = [
    billion_laughs(),
    billion_laughs(4, 4),
    "&r [*r]",
    "&r {a: *r, b: 1}",
    "*undefined",
    "[" * 60 + "1" + "]" * 60,
    "[" * 5000 + "]" * 5000,
    "{a: " * 3000 + "1" + "}" * 3000,
    "2001-13-45",
    "2001-02-03",
    "!!int x",
    "!!float x",
    "!!binary 'AAA'",
    "!!str 3",
    "!!python/object/apply:os.getcwd []",
    "!!set {a, b}",
    "!!omap [{a: 1}]",
    "!!timestamp x",
    "9" * 5000,
    "0x" + "f" * 400,
    "0b101",
    "0o17",
    "1_000",
    "10:30",
    ".NaN",
    "-.Inf",
    "1e999",
    "'\\x00'",
    '"\\ud800"',
    '"\\x00"',
    "!<tag:yaml.org,2002:int> 3",
    "!custom 3",
    "|\n  x",
]
YAML_VALUES = [
    None,
    [],
    {},
    [1, 2],
    [1, 2, 3, 4],
    {"a": 1},
    True,
    False,
    "",
    "text",
    0,
    -1,
    1.5,
    10**30,
    10**400,
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    -1e-320,
    [[1, 2, 3]],
    [None, None, None],
    ["a", "b", "c"],
    [True, 0, 0],
    [float("nan"), 0.0, 0.0],
    [10**400, 0, 0],
    [1e308, 1e308, 1e308],
]


_PARSED: dict[bytes, object] = {}


def _parsed_yaml(seed: bytes):
    """The seed's YAML tree, parsed once per seed (callers copy it before changing it)."""
    if seed not in _PARSED:
        import yaml

        _PARSED[seed] = yaml.safe_load(seed.decode("utf-8"))
    return _PARSED[seed]


def _yaml_paths(data, prefix=()) -> list[tuple]:
    """Every path into a parsed YAML tree (keys of mappings, indexes of lists), root first."""
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _yaml_paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _yaml_paths(v, (*prefix, i))
    return out


def _yaml_get(data, path: tuple):
    for k in path:
        data = data[k]
    return data


@st.composite
def yaml_tree_mutation(draw, seed: bytes) -> bytes:
    """One structural change of a valid YAML seed: a node replaced by another type, a nasty
    number, a list of the wrong length or raw YAML (aliases, deep nesting, tags, huge ints); a
    key deleted, renamed or added; the whole document replaced."""
    import copy

    import yaml

    data = _parsed_yaml(seed)
    raw = None
    for _ in range(draw(st.integers(1, 2))):
        data = copy.deepcopy(data)
        path = draw(st.sampled_from(_yaml_paths(data)))
        kind = draw(
            st.sampled_from(["value", "value", "raw", "delete", "rename", "add", "grow", "shrink"])
        )
        if kind == "raw":
            raw = draw(st.sampled_from(YAML_RAW_VALUES))
            new = _RAW
        else:
            new = draw(st.sampled_from(YAML_VALUES))
        if not path:
            data = new if kind in ("value", "raw") else data
            continue
        parent, key = _yaml_get(data, path[:-1]), path[-1]
        node = parent[key]
        if kind in ("value", "raw"):
            parent[key] = new
        elif kind == "delete":
            del parent[key]
        elif kind == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["zz", 1, None, True, "name", "", key]))] = parent.pop(key)
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["zz", "name", "markers", "local", 7]))] = new
        elif kind == "grow" and isinstance(node, list):
            node.append(draw(st.sampled_from(YAML_VALUES)) if node else 0)
        elif kind == "shrink" and isinstance(node, list) and node:
            node.pop(draw(st.integers(0, len(node) - 1)))
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml: faster, same output
    text = yaml.dump(
        data, Dumper=dumper, sort_keys=False, default_flow_style=None, allow_unicode=True
    )
    if raw is not None:
        text = text.replace(_RAW, raw.replace("\n", "\n    "))
    return text.encode("utf-8", errors="surrogatepass")


def yaml_mutated(seed: bytes) -> st.SearchStrategy[bytes]:
    """Text and byte mutations of a YAML seed (:func:`mutated`) or a structural one
    (:func:`yaml_tree_mutation`), about half each."""
    return st.one_of(mutated(seed), yaml_tree_mutation(seed))


# ---------------------------------------------------------------------------------------------
# Structured mutations of .npz archives (the capture-file and AMASS readers): the seed's arrays
# are loaded, one to three of them changed the ways real files go wrong (a key missing, a wrong
# dtype or shape, a NaN, a non-rotation, arrays of different lengths, no frames, text where a
# number goes), and the archive written again with np.savez (object arrays are pickled by
# np.savez, which the readers, opening with allow_pickle=False, must refuse).

NPZ_NASTY_VALUES = [
    float("nan"),
    float("inf"),
    float("-inf"),
    1e308,
    -1e308,
    3.5e38,
    1e38,
    -1.0,
    0.0,
    1e-320,
    2.0**63,
    -(2.0**31),
]
NPZ_DTYPES = [
    "float16",
    "float32",
    "int8",
    "int64",
    "uint8",
    "bool",
    "complex128",
    "U8",
    "S8",
    "datetime64[s]",
    "object",
    "V8",
]
NPZ_SCALARS = [
    0.0,
    -1.0,
    float("nan"),
    float("inf"),
    1e308,
    1e-300,
    "abc",
    "",
    True,
    [],
    [1.0, 2.0],
    [[60.0]],
]


def npz_arrays(data: bytes) -> dict:
    """The arrays of an ``.npz`` held in ``data`` (no pickles)."""
    import io

    import numpy as np

    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def npz_bytes(arrays: dict, compressed: bool = False) -> bytes:
    """``arrays`` written as an ``.npz`` (np.savez or np.savez_compressed), as bytes."""
    import io

    import numpy as np

    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def _npz_retype(arr, dtype: str):
    import warnings

    import numpy as np

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return arr.astype(dtype)
    except (TypeError, ValueError, OverflowError, RuntimeError):  # numpy: datetime to short text
        return np.array(["x"] * max(arr.size, 1)).astype(dtype if dtype in ("U8", "S8") else "U8")


def _npz_reshape(draw, arr):
    import numpy as np

    options = [arr.reshape(-1), arr[None], np.zeros((0, *arr.shape[1:]), arr.dtype)]
    if arr.ndim >= 1 and arr.shape[-1] > 0:
        options.append(arr[..., :-1])
    if arr.ndim >= 2:
        options.append(np.swapaxes(arr, 0, -1))
        if len(arr):
            options.append(arr[0])
    if arr.size == 1:
        options.append(arr.reshape(()))
    if arr.ndim >= 1 and len(arr) > 1:
        options.append(arr[:1])
    return options[draw(st.integers(0, len(options) - 1))]


def _npz_nasty_value(draw, arr):
    import numpy as np

    if arr.dtype.kind not in "biufc":
        return np.full(arr.shape, draw(st.sampled_from(NPZ_NASTY_VALUES)))
    out = np.array(arr, dtype=np.float64 if arr.dtype.kind not in "fc" else arr.dtype)
    if out.size == 0:
        return out
    with np.errstate(all="ignore"):
        value = draw(st.sampled_from(NPZ_NASTY_VALUES))
        out.reshape(-1)[draw(st.integers(0, out.size - 1))] = value
    return out


def _npz_non_rotation(draw, arr):
    """One (3, 3) matrix of ``arr`` (..., 3, 3) made a reflection, scaled, singular, sheared or
    random, or only nudged (1e-5: inside the tolerance)."""
    import numpy as np

    out = np.array(arr.real if arr.dtype.kind == "c" else arr, dtype=np.float64)
    flat = out.reshape(-1, 3, 3)
    k = draw(st.integers(0, len(flat) - 1))
    kind = draw(st.sampled_from(["reflect", "scale", "zero", "shear", "random", "nudge"]))
    if kind == "reflect":
        flat[k, :, 0] *= -1
    elif kind == "scale":
        flat[k] *= draw(st.sampled_from([1.01, 0.99, 1.0005, 1.002, 2.0, -1.0, 1e20]))
    elif kind == "zero":
        flat[k] = 0.0
    elif kind == "shear":
        flat[k, 0, 1] += draw(st.sampled_from([1e-4, 1e-2, 0.5]))
    elif kind == "random":
        flat[k] = np.random.default_rng(draw(st.integers(0, 2**16))).normal(size=(3, 3))
    else:
        flat[k] += 1e-5
    return out.astype(arr.dtype) if arr.dtype.kind == "f" else out


@st.composite
def npz_mutation(draw, seed: bytes) -> bytes:
    """A structurally mutated copy of the ``.npz`` ``seed``: one to three of: a key deleted or
    renamed, an array's dtype changed (object arrays included), its shape changed, a nasty
    number (NaN, ±inf, 1e308, …) put in it, a (3, 3) matrix made a non-rotation, one array cut
    shorter (lengths that disagree), every array cut to zero frames, text where numbers go, a
    scalar (fps) replaced by 0, −1, NaN, a string, an empty or longer array; an unknown key
    added. Written back with np.savez or np.savez_compressed."""
    import numpy as np

    arrays = npz_arrays(seed)
    for _ in range(draw(st.integers(1, 3))):
        if not arrays:
            break
        key = draw(st.sampled_from(sorted(arrays)))
        arr = arrays[key]
        kinds = [
            "delete",
            "rename",
            "dtype",
            "shape",
            "value",
            "cut",
            "zero_frames",
            "text",
            "scalar",
            "extra",
        ]
        if arr.ndim >= 2 and arr.shape[-2:] == (3, 3) and arr.size:
            kinds += ["rotation", "rotation"]
        kind = draw(st.sampled_from(kinds))
        if kind == "delete":
            del arrays[key]
        elif kind == "rename":
            arrays[key + "_"] = arrays.pop(key)
        elif kind == "dtype":
            arrays[key] = _npz_retype(arr, draw(st.sampled_from(NPZ_DTYPES)))
        elif kind == "shape":
            arrays[key] = _npz_reshape(draw, arr)
        elif kind == "value":
            arrays[key] = _npz_nasty_value(draw, arr)
        elif kind == "rotation":
            arrays[key] = _npz_non_rotation(draw, arr)
        elif kind == "cut" and arr.ndim >= 1 and len(arr):
            arrays[key] = arr[: draw(st.integers(0, len(arr) - 1))]
        elif kind == "zero_frames":
            lengths = [len(a) for a in arrays.values() if a.ndim >= 1]
            t = max(set(lengths), key=lengths.count) if lengths else 0
            arrays = {k: a[:0] if a.ndim >= 1 and len(a) == t else a for k, a in arrays.items()}
        elif kind == "text":
            arrays[key] = np.array(draw(st.sampled_from(["abc", "1.5", "", "nan"])))
        elif kind == "scalar":
            arrays[key] = np.array(draw(st.sampled_from(NPZ_SCALARS)))
        elif kind == "extra":
            arrays["unexpected"] = np.arange(3)
    return npz_bytes(arrays, compressed=draw(st.booleans()))
