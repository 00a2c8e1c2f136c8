"""BVH (Biovision hierarchy) files: parse, pose and write.

A BVH holds a joint tree with rest offsets (in the file's own length unit, in the parent's frame,
which at rest is aligned with the file's world frame), per-joint channels and one line of channel
values per frame. Rotation channels are Euler angles in degrees applied in the listed order
(``Zrotation Yrotation Xrotation`` means R = Rz Ry Rx, i.e. intrinsic ZYX). Position channels give
the joint's whole local translation (they replace the offset, as Blender reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import roma
import torch

from rbmcap.errors import FormatError

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
    """

    names: list[str]
    parents: list[int]
    offsets: np.ndarray
    channels: list[list[str]]
    end_sites: dict[int, np.ndarray]
    frames: np.ndarray
    frame_time: float
    path: str = ""
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
def read_bvh(path: str | Path) -> BVH:
    """Parse a BVH file.

    Raises:
        FormatError: the file does not follow the BVH grammar (with the line and what was
            expected), or its frame data is short or not numeric.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(2, "No such file", str(path))
    try:
        text = path.read_text(errors="replace")
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
    frames, frame_time = _read_motion(tokens, sum(len(c) for c in tree.channels))
    return BVH(
        names=tree.names,
        parents=tree.parents,
        offsets=np.array(tree.offsets, dtype=np.float64),
        channels=tree.channels,
        end_sites=tree.end_sites,
        frames=frames,
        frame_time=frame_time,
        path=label,
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
        self.offsets.append(tokens.floats(3))
        self.channels.append(_read_channels(tokens))
        while True:
            word = tokens.next_upper()
            if word == "JOINT":
                self.read_joint(tokens, j)
            elif word == "END":
                tokens.expect("SITE")
                tokens.expect("{")
                tokens.expect("OFFSET")
                self.end_sites[j] = tokens.floats(3)
                tokens.expect("}")
            elif word == "}":
                return
            else:
                tokens.fail("JOINT, End Site or '}'", word)


def _read_channels(tokens: _Tokens) -> list[str]:
    """A joint's optional ``CHANNELS n name…`` line (no line: no channels)."""
    if tokens.peek_upper() != "CHANNELS":
        return []
    tokens.next()
    count = tokens.int()
    chans = [tokens.next() for _ in range(count)]
    bad = [c for c in chans if c.lower() not in _ROT and c.lower() not in _POS]
    if bad:
        tokens.fail(f"channel names like Xposition/Zrotation, not {bad[0]!r}")
    return chans


def _read_motion(tokens: _Tokens, width: int) -> tuple[np.ndarray, float]:
    """The ``MOTION`` section: frames (T, width) and the frame time (s)."""
    label = tokens.label
    tokens.expect("MOTION")
    tokens.expect("FRAMES:")
    num_frames = tokens.int()
    tokens.expect("FRAME")
    tokens.expect("TIME:")
    frame_time = tokens.float()
    if not frame_time > 0:
        raise FormatError(f"{label}: Frame Time must be positive, got {frame_time}")
    values = tokens.remaining_floats()
    if values.size < num_frames * width:
        raise FormatError(
            f"{label}: truncated motion data: {num_frames} frames of {width} channels declared, "
            f"{values.size // max(width, 1)} complete frame(s) present"
        )
    frames = values[: num_frames * width].reshape(num_frames, width)
    if num_frames == 0:
        raise FormatError(f"{label}: the file declares no frames")
    if not np.isfinite(frames).all():
        raise FormatError(f"{label}: motion data contains NaN or infinite values")
    return frames, frame_time


class _Tokens:
    """Whitespace tokens with line numbers, for a recursive-descent parse with clear errors."""

    def __init__(self, text: str, label: str) -> None:
        self.label = label
        self.lines = text.splitlines()
        self.items: list[tuple[str, int]] = []
        motion_line = None
        # Tokenise the hierarchy and the three MOTION header lines; the frame data (often MBs)
        # is read in one go by remaining_floats.
        self.data_start = len(self.lines)
        for index, line in enumerate(self.lines):
            if motion_line is None and line.strip().upper() == "MOTION":
                motion_line = index
            if motion_line is not None and index > motion_line + 2:
                self.data_start = index
                break
            self.items.extend((tok, index + 1) for tok in line.split())
        self.pos = 0

    def fail(self, expected: str, got: str | None = None) -> None:
        if 0 < self.pos <= len(self.items):
            where = f"line {self.items[self.pos - 1][1]}"
            found = f", found {got!r}" if got is not None else ""
        else:
            where, found = "end of file", ", found end of file"
        raise FormatError(f"{self.label}: {where}: expected {expected}{found}")

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
        line = self.items[self.pos][1] if self.pos < len(self.items) else -1
        words = []
        while self.pos < len(self.items) and self.items[self.pos][1] == line:
            words.append(self.next())
        return " ".join(words)

    def float(self) -> float:
        tok = self.next()
        try:
            return float(tok)
        except ValueError:
            self.fail("a number", tok)
            raise  # unreachable

    def floats(self, n: int) -> np.ndarray:
        return np.array([self.float() for _ in range(n)])

    def int(self) -> int:
        value = self.float()
        if value != int(value) or value < 0:
            self.fail("a non-negative integer", str(value))
        return int(value)

    def remaining_floats(self) -> np.ndarray:
        body = "\n".join(self.lines[self.data_start :])
        try:
            return np.array(body.split(), dtype=np.float64)
        except ValueError:
            bad = next(t for t in body.split() if not _is_float(t))
            raise FormatError(f"{self.label}: non-numeric motion value {bad!r}") from None


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
