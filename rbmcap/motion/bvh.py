"""BVH (Biovision hierarchy) files: parse, pose and write.

A BVH holds a joint tree with rest offsets (in the file's own length unit, in the parent's frame,
which at rest is aligned with the file's world frame), per-joint channels and one line of channel
values per frame. Rotation channels are Euler angles in degrees applied in the listed order
(``Zrotation Yrotation Xrotation`` means R = Rz Ry Rx, i.e. intrinsic ZYX). Position channels give
the joint's whole local translation (they replace the offset, as Blender reads them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.errors import DataError, FormatError, location

_ROT = {"xrotation": "X", "yrotation": "Y", "zrotation": "Z"}
_POS = {"xposition": 0, "yposition": 1, "zposition": 2}


@dataclass(eq=False)
class BVH:
    """A parsed BVH file.

    Attributes:
        names: joint names, parents before children.
        parents: parent index per joint (-1 for the root).
        offsets: (J, 3) rest offsets from the parent, file units.
        channels: per joint, its channel names as written (e.g. ``Xposition``).
        end_sites: joint index → (3,) offset of its ``End Site``, file units.
        frames: (T, C) channel values, C = total channel count.
        frame_time: seconds per frame.
        path: the file read (for messages), if any.
        frame_lines: the 1-based line of each frame in the file (for messages), if known.
    """

    names: list[str]
    parents: list[int]
    offsets: np.ndarray
    channels: list[list[str]]
    end_sites: dict[int, np.ndarray]
    frames: np.ndarray
    frame_time: float
    path: str = ""
    frame_lines: list[int] = field(default_factory=list, repr=False)
    _first_channel: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        starts, total = [], 0
        for chans in self.channels:
            starts.append(total)
            total += len(chans)
        self._first_channel = starts
        if self.frames.ndim != 2 or self.frames.shape[1] != total:
            raise FormatError(
                f"{self.path or 'BVH'}: frame data has {self.frames.shape[-1]} values per frame, "
                f"the hierarchy declares {total} channels"
            )

    @property
    def num_frames(self) -> int:
        return int(self.frames.shape[0])

    @property
    def fps(self) -> float:
        """Frames per second; a rate within 0.01% of a whole number is taken as that number
        (files print the frame time with few digits: CMU's 0.0083333 s means 120 Hz)."""
        rate = 1.0 / self.frame_time
        return float(round(rate)) if abs(rate - round(rate)) < 1e-4 * rate else rate

    def index(self, name: str) -> int:
        return self.names.index(name)

    def rest_positions(self) -> np.ndarray:
        """(J, 3) joint positions in the rest pose (all channels zero), file units."""
        pos = np.zeros((len(self.names), 3))
        for j, p in enumerate(self.parents):
            pos[j] = self.offsets[j] + (pos[p] if p >= 0 else 0.0)
        return pos

    def local_rotmats(self) -> np.ndarray:
        """(T, J, 3, 3) parent-from-joint rotations from the rotation channels."""
        t = self.num_frames
        out = np.broadcast_to(np.eye(3), (t, len(self.names), 3, 3)).copy()
        groups: dict[str, list[tuple[int, list[int]]]] = {}
        for j, chans in enumerate(self.channels):
            cols = [self._first_channel[j] + c for c, n in enumerate(chans) if n.lower() in _ROT]
            if cols:
                order = "".join(_ROT[n.lower()] for n in chans if n.lower() in _ROT)
                groups.setdefault(order, []).append((j, cols))
        for order, members in groups.items():
            joints = [j for j, _ in members]
            angles = np.stack([self.frames[:, cols] for _, cols in members], axis=1)
            rot = roma.euler_to_rotmat(order, torch.from_numpy(angles), degrees=True)
            out[:, joints] = rot.numpy()
        return out

    def local_translations(self) -> np.ndarray:
        """(T, J, 3) joint translations from the parent: offsets, or position channels."""
        out = np.broadcast_to(self.offsets, (self.num_frames, *self.offsets.shape)).copy()
        for j, chans in enumerate(self.channels):
            for c, n in enumerate(chans):
                if n.lower() in _POS:
                    out[:, j, _POS[n.lower()]] = self.frames[:, self._first_channel[j] + c]
        return out

    def global_transforms(self) -> tuple[np.ndarray, np.ndarray]:
        """World-from-joint rotations (T, J, 3, 3) and joint positions (T, J, 3), file units."""
        local_r, local_t = self.local_rotmats(), self.local_translations()
        rot, pos = np.empty_like(local_r), np.empty_like(local_t)
        for j, p in enumerate(self.parents):
            if p < 0:
                rot[:, j], pos[:, j] = local_r[:, j], local_t[:, j]
            else:
                rot[:, j] = rot[:, p] @ local_r[:, j]
                pos[:, j] = pos[:, p] + (rot[:, p] @ local_t[:, j, :, None])[..., 0]
        return rot, pos


# ----------------------------------------------------------------------------------- parsing
MIN_FRAME_TIME = 1e-6
MAX_FRAME_TIME = 60.0
"""Bounds (s) of a believable ``Frame Time``: 1 MHz to one frame a minute."""


def read_bvh(path: str | Path) -> BVH:
    """Parse a BVH file (UTF-8, a byte-order mark allowed; undecodable bytes become U+FFFD and
    then fail the grammar where they matter).

    Raises:
        FormatError: the file does not follow the BVH grammar (``FILE:LINE:COLUMN`` and what was
            expected), or its frame data is short, long or not numeric.
        DataError: a number is NaN or infinite (an offset, or a frame: its line and index).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(2, "No such file", str(path))
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror})") from None
    return parse_bvh(text, str(path))


def parse_bvh(text: str, label: str = "BVH") -> BVH:
    """Parse BVH text (see :func:`read_bvh`); ``label`` names it in error messages."""
    tokens = _Tokens(text, label)
    tokens.expect("HIERARCHY")
    tree = _Hierarchy()
    tokens.expect("ROOT")
    tree.read_joint(tokens, -1)
    frames, frame_time, lines = _read_motion(tokens, sum(len(c) for c in tree.channels))
    return BVH(
        names=tree.names,
        parents=tree.parents,
        offsets=np.array(tree.offsets, dtype=np.float64),
        channels=tree.channels,
        end_sites=tree.end_sites,
        frames=frames,
        frame_time=frame_time,
        path=label,
        frame_lines=lines,
    )


@dataclass
class _Hierarchy:
    """The joint tree as it is read, parents before children."""

    names: list[str] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    offsets: list[np.ndarray] = field(default_factory=list)
    channels: list[list[str]] = field(default_factory=list)
    end_sites: dict[int, np.ndarray] = field(default_factory=dict)

    def read_joint(self, tokens: _Tokens, parent: int) -> None:
        """One ``ROOT``/``JOINT`` block after its keyword, with its children, up to its ``}``."""
        name = tokens.rest_of_line()
        if not name:
            tokens.fail("a joint name")
        j = len(self.names)
        self.names.append(name)
        self.parents.append(parent)
        tokens.expect("{")
        tokens.expect("OFFSET")
        self.offsets.append(tokens.finite_floats(3, "OFFSET"))
        self.channels.append(_read_channels(tokens))
        while True:
            word = tokens.next_upper()
            if word == "JOINT":
                self.read_joint(tokens, j)
            elif word == "END":
                tokens.expect("SITE")
                tokens.expect("{")
                tokens.expect("OFFSET")
                self.end_sites[j] = tokens.finite_floats(3, "End Site OFFSET")
                tokens.expect("}")
            elif word == "}":
                return
            else:
                tokens.fail("JOINT, End Site or '}'", word)


def _read_channels(tokens: _Tokens) -> list[str]:
    """A joint's optional ``CHANNELS n name…`` line (no line: no channels); the n names are on
    the line of ``CHANNELS``."""
    if tokens.peek_upper() != "CHANNELS":
        return []
    tokens.next()
    line = tokens.line()
    count = tokens.int()
    chans = []
    while tokens.pos < len(tokens.items) and tokens.items[tokens.pos][1] == line:
        chans.append(tokens.next())
    if len(chans) != count:
        tokens.fail(
            f"{count} channel name(s) after CHANNELS {count} on its line, found {len(chans)}"
        )
    for k, c in enumerate(chans):
        if c.lower() not in _ROT and c.lower() not in _POS:
            tokens.pos -= len(chans) - k - 1  # point at the bad name
            tokens.fail("channel names like Xposition/Zrotation", c)
    return chans


def _read_motion(tokens: _Tokens, width: int) -> tuple[np.ndarray, float, list[int]]:
    """The ``MOTION`` section: frames (T, width), the frame time (s) and each frame's line."""
    tokens.expect("MOTION")
    tokens.expect("FRAMES:")
    num_frames = tokens.int()
    tokens.expect("FRAME")
    tokens.expect("TIME:")
    frame_time = tokens.float()
    if not MIN_FRAME_TIME <= frame_time <= MAX_FRAME_TIME:
        tokens.fail(
            f"a Frame Time between {MIN_FRAME_TIME:g} and {MAX_FRAME_TIME:g} s",
            tokens.items[tokens.pos - 1][0],
        )
    if tokens.pos < len(tokens.items):
        tokens.pos += 1
        tokens.fail("the frame data on the line after Frame Time", tokens.items[tokens.pos - 1][0])
    if width == 0:
        raise FormatError(f"{tokens.label}: the hierarchy declares no CHANNELS (no motion)")
    if num_frames == 0:
        raise FormatError(f"{tokens.label}: the file declares no frames (Frames: 0)")
    frames, lines = _frame_values(tokens, num_frames, width)
    return frames, frame_time, lines


def _frame_values(tokens: _Tokens, num_frames: int, width: int) -> tuple[np.ndarray, list[int]]:
    """The frame lines after the MOTION header: ``num_frames`` lines of ``width`` finite
    numbers (blank lines skipped); (T, width) and each one's 1-based line."""
    label, rows, where = tokens.label, [], []
    for index in range(tokens.data_start, len(tokens.lines)):
        cells = tokens.lines[index].split()
        if not cells:
            continue
        at = location(label, index + 1)
        if len(rows) == num_frames:
            raise FormatError(f"{at}: frame data beyond the {num_frames} frame(s) declared")
        if len(cells) != width:
            raise FormatError(
                f"{at}: frame {len(rows)} has {len(cells)} values, the hierarchy declares "
                f"{width} channels"
            )
        rows.append(cells)
        where.append(index)
    if len(rows) < num_frames:
        raise FormatError(
            f"{location(label, len(tokens.lines))}: truncated motion data: {num_frames} frames "
            f"declared, {len(rows)} present"
        )
    try:
        frames = np.array(rows, dtype=np.float64)
    except ValueError:
        frames = None
    bad = _first_bad_value(frames, rows)
    if bad is not None:
        f, c = bad
        line = tokens.lines[where[f]]
        at = location(label, where[f] + 1, _column(line, c) + 1)
        if frames is None:
            raise FormatError(f"{at}: frame {f}: non-numeric motion value {rows[f][c]!r}")
        raise DataError(f"{at}: frame {f}: motion value {rows[f][c]!r} is not a finite number")
    return frames, [i + 1 for i in where]


def _first_bad_value(frames: np.ndarray | None, rows: list[list[str]]) -> tuple[int, int] | None:
    """(frame, cell) of the first value that is not a number (``frames`` None) or not finite."""
    if frames is None:
        return next(
            (f, c) for f, row in enumerate(rows) for c, v in enumerate(row) if not _is_float(v)
        )
    bad = np.argwhere(~np.isfinite(frames))
    return (int(bad[0, 0]), int(bad[0, 1])) if len(bad) else None


def _column(line: str, cell: int) -> int:
    """0-based column where the ``cell``-th whitespace-separated token of ``line`` starts."""
    pos = 0
    for k, tok in enumerate(line.split()):
        pos = line.find(tok, pos)
        if k == cell:
            return pos
        pos += len(tok)
    return 0


class _Tokens:
    """Whitespace tokens with line and column numbers, for a recursive-descent parse with clear
    errors. Lines end at LF, CRLF or a lone CR."""

    def __init__(self, text: str, label: str) -> None:
        self.label = label
        self.lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.items: list[tuple[str, int, int]] = []
        motion_line = None
        # Tokenise the hierarchy and the three MOTION header lines; the frame data (often MBs)
        # is read line by line by _frame_values.
        self.data_start = len(self.lines)
        for index, line in enumerate(self.lines):
            if motion_line is None and line.strip().upper() == "MOTION":
                motion_line = index
            if motion_line is not None and index > motion_line + 2:
                self.data_start = index
                break
            col = 0
            for tok in line.split():
                col = line.find(tok, col)
                self.items.append((tok, index + 1, col + 1))
                col += len(tok)
        self.pos = 0

    def line(self) -> int:
        """The line of the next token (-1 at the end)."""
        return self.items[self.pos][1] if self.pos < len(self.items) else -1

    def fail(self, expected: str, got: str | None = None) -> None:
        if 0 < self.pos <= len(self.items):
            _, line, col = self.items[self.pos - 1]
            where = location(self.label, line, col)
            found = f", found {got!r}" if got is not None else ""
        else:
            where = f"{location(self.label, len(self.lines))}: end of file"
            found = ", found end of file"
        raise FormatError(f"{where}: expected {expected}{found}")

    def next(self, expected: str = "more of the hierarchy") -> str:
        if self.pos >= len(self.items):
            self.pos += 1
            self.fail(expected)
        tok = self.items[self.pos][0]
        self.pos += 1
        return tok

    def next_upper(self) -> str:
        return self.next().upper()

    def peek_upper(self) -> str:
        return self.items[self.pos][0].upper() if self.pos < len(self.items) else ""

    def expect(self, word: str) -> None:
        tok = self.next(repr(word))
        if tok.upper() != word:
            self.fail(repr(word), tok)

    def rest_of_line(self) -> str:
        line = self.line()
        words = []
        while self.pos < len(self.items) and self.items[self.pos][1] == line:
            words.append(self.next())
        return " ".join(words)

    def float(self) -> float:
        tok = self.next("a number")
        try:
            return float(tok)
        except ValueError:
            self.fail("a number", tok)
            raise  # unreachable

    def finite_floats(self, n: int, what: str) -> np.ndarray:
        """``n`` numbers; NaN or infinity is a DataError at its line and column."""
        values = []
        for _ in range(n):
            value = self.float()
            if not math.isfinite(value):
                tok, line, col = self.items[self.pos - 1]
                at = location(self.label, line, col)
                raise DataError(f"{at}: {what} value {tok!r} is not a finite number")
            values.append(value)
        return np.array(values)

    def int(self) -> int:
        value = self.float()
        if not (math.isfinite(value) and value >= 0 and value == int(value)):
            self.fail("a non-negative integer", self.items[self.pos - 1][0])
        return int(value)


def _is_float(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------------------- writing
def write_bvh(
    path: str | Path,
    names: list[str],
    parents: list[int],
    offsets: np.ndarray,
    local_rotmats: np.ndarray,
    root_positions: np.ndarray,
    frame_time: float,
    order: str = "ZYX",
    end_sites: dict[int, np.ndarray] | None = None,
) -> Path:
    """Write a BVH: a 6-channel root and 3 rotation channels per joint.

    Args:
        names, parents, offsets: the joint tree, parents before children; offsets (J, 3).
        local_rotmats: (T, J, 3, 3) parent-from-joint rotations.
        root_positions: (T, 3) root positions, file units.
        frame_time: seconds per frame.
        order: intrinsic Euler order of the rotation channels, e.g. 'ZYX' (R = Rz Ry Rx).
        end_sites: optional joint index → end-site offset; leaves without one get a zero offset.
    """
    order = order.upper()
    rot_channels = " ".join(f"{a}rotation" for a in order)
    children: dict[int, list[int]] = {j: [] for j in range(len(names))}
    for j, p in enumerate(parents):
        if p >= 0:
            children[p].append(j)
    lines = _hierarchy_lines(names, parents, offsets, children, end_sites or {}, rot_channels)
    # Channels are written in the order joints appear in the hierarchy (depth first).
    visit = _depth_first(children, 0)
    euler = roma.rotmat_to_euler(order, torch.from_numpy(np.asarray(local_rotmats)), degrees=True)
    euler = euler.numpy()[:, visit]
    data = np.concatenate([np.asarray(root_positions), euler.reshape(len(euler), -1)], axis=1)
    lines += ["MOTION", f"Frames: {len(data)}", f"Frame Time: {frame_time:.8f}"]
    lines += [" ".join(f"{v:.6f}" for v in row) for row in data]
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def _hierarchy_lines(
    names: list[str],
    parents: list[int],
    offsets: np.ndarray,
    children: dict[int, list[int]],
    end_sites: dict[int, np.ndarray],
    rot_channels: str,
) -> list[str]:
    """The ``HIERARCHY`` section's lines, tab-indented, from joint 0 down."""
    lines = ["HIERARCHY"]

    def emit(j: int, depth: int) -> None:
        pad = "\t" * depth
        kind = "ROOT" if parents[j] < 0 else "JOINT"
        lines.append(f"{pad}{kind} {names[j]}")
        lines.append(f"{pad}{{")
        lines.append(f"{pad}\tOFFSET " + " ".join(f"{v:.6f}" for v in offsets[j]))
        if parents[j] < 0:
            lines.append(f"{pad}\tCHANNELS 6 Xposition Yposition Zposition {rot_channels}")
        else:
            lines.append(f"{pad}\tCHANNELS 3 {rot_channels}")
        for c in children[j]:
            emit(c, depth + 1)
        if not children[j]:
            site = end_sites.get(j, np.zeros(3))
            lines.append(f"{pad}\tEnd Site")
            lines.append(f"{pad}\t{{")
            lines.append(f"{pad}\t\tOFFSET " + " ".join(f"{v:.6f}" for v in site))
            lines.append(f"{pad}\t}}")
        lines.append(f"{pad}}}")

    emit(0, 0)
    return lines


def _depth_first(children: dict[int, list[int]], j: int) -> list[int]:
    """Joint ``j`` and its descendants, depth first, children in order."""
    return [j] + [k for c in children[j] for k in _depth_first(children, c)]
