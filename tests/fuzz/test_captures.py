"""Property-based fuzzing of the capture-export readers: Vicon CSV (each section kind),
OptiTrack Motive CSV, C3D and the ``rbmcap import`` command, on mutated copies of small valid
files; plus one plain regression test for each bug the fuzzing found.

Contract (:func:`helpers.fuzzing.check_reader`): every input is read or refused with an
:class:`~rbmcap.errors.RBMCapError`, in bounded time, with no partial output file. NumPy's
RuntimeWarnings (overflow, invalid value) count as errors inside the readers.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from functools import cache
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import roma
import torch
from helpers.fuzzing import COMMAND_EXAMPLES, check_reader, fuzz_settings, mutated
from helpers.writers_c3d import cluster_names, cluster_points, write_c3d
from helpers.writers_optitrack import write_optitrack
from helpers.writers_vicon import (
    plate_section,
    point_section,
    section_lines,
    write_segments,
    write_trajectories,
    write_vicon,
)
from hypothesis import given
from hypothesis import strategies as st

from rbmcap.cli.main import build_parser as _build_parser
from rbmcap.errors import FormatError, RBMCapError
from rbmcap.io.c3d import read_c3d
from rbmcap.io.capture import Capture
from rbmcap.io.optitrack import read_optitrack
from rbmcap.io.vicon import read_vicon

T = 4
"""Frames of every seed: few, so that each fuzzed input costs milliseconds."""


# ------------------------------------------------------------------------------------- seeds
def _plates(n: int = 2):
    """Names, (T, n, 3) m, (T, n, 3, 3), (T, n) valid with one gap: small random plates."""
    rng = np.random.default_rng(n)
    pos = rng.uniform(-1, 1, (T, n, 3))
    rot = roma.rotvec_to_rotmat(torch.from_numpy(rng.normal(size=(T, n, 3)))).numpy()
    valid = np.ones((T, n), bool)
    valid[1, 0] = False
    return [f"Sub:Plate{k}" for k in range(n)], pos, rot, valid


def _points(m: int = 3):
    rng = np.random.default_rng(10 + m)
    valid = np.ones((T, m), bool)
    valid[2, 1] = False
    return [f"Sub:M{k}" for k in range(m)], rng.uniform(-1, 1, (T, m, 3)), valid


def _model_outputs_lines(sep: str = ",") -> list[str]:
    """A ``Model Outputs`` section: one 3-column angle group, then two 6-column plates."""
    header, vals = plate_section(*_plates())
    names, axis, units = header
    names = ["", "", "Sub:LKneeAngles", "", "", *names[2:]]
    axis = ["Frame", "Sub Frame", "X", "Y", "Z", *axis[2:]]
    units = ["", "", "deg", "deg", "deg", *units[2:]]
    angles = np.arange(3 * T, dtype=float).reshape(T, 3)
    vals = np.concatenate([angles, vals], 1)
    return section_lines(
        "Model Outputs", 100.0, [names, axis, units], vals, np.arange(1, T + 1), sep=sep
    )


def _devices_lines(sep: str = ",") -> list[str]:
    """A ``Devices`` section (force plate at 2 sub frames per frame): skipped by the reader."""
    lines = ["Devices", "200", ",,Force Plate 1,,", "Frame,Sub Frame,Fx,Fy,Fz", ",,N,N,N"]
    lines += [f"{f},{s},1.5,-2,{s}" for f in range(1, T + 1) for s in (0, 1)]
    return [line.replace(",", sep) for line in lines]


def _vicon_seed(kind: str, variant: int, path: Path) -> None:
    opts = [{}, {"sep": ";"}, {"trimmed": True}, {"crlf": True, "bom": True, "pad": 2}][variant]
    if kind == "vicon-segments":
        write_segments(path, *_plates(), **opts)
    elif kind == "vicon-tracker":
        write_segments(path, *_plates(3), tracker=True, rotation="euler_xyz", unit="rad", **opts)
    elif kind == "vicon-trajectories":
        write_trajectories(path, *_points(), **opts)
    elif kind == "vicon-combined":
        write_segments(path, *_plates(), points=_points(), **opts)
    elif kind == "vicon-model-outputs":
        sep = opts.get("sep", ",")
        ph, pv = point_section(*_points(2))
        traj = section_lines("Trajectories", 100.0, ph, pv, np.arange(1, T + 1), sep=sep)
        secs = [_devices_lines(sep), _model_outputs_lines(sep), traj]
        write_vicon(path, secs, sep=sep, crlf=opts.get("crlf", False), bom=opts.get("bom", False))


VICON_KINDS = (
    "vicon-segments",
    "vicon-model-outputs",
    "vicon-trajectories",
    "vicon-combined",
    "vicon-tracker",
)
VARIANTS = 4


def _optitrack_seed(variant: int, path: Path) -> None:
    names, pos, rot, valid = _plates()
    pnames, pts, pvalid = _points(2)
    markers = {
        "points": pts,
        "point_names": pnames,
        "point_valid": pvalid,
        "point_types": ["Rigid Body Marker", "Marker"],
    }
    opts = [
        {},
        {"rotation": "XYZ", **markers},
        {"rotation": "ZXY", "units": "Millimeters"},
        {"label_cells": True, "newline": "\n", "pad": 1, **markers},
    ][variant]
    write_optitrack(path, names, pos, rot, valid, **opts)


def _c3d_seed(variant: int, path: Path) -> None:
    names, pos, rot, valid = _plates()
    pts = cluster_points(pos, rot)
    pvalid = np.repeat(valid, 4, axis=1)
    plates = {"plate_names": names, "pos": pos, "rot": rot, "valid": valid} if variant else {}
    write_c3d(path, cluster_names(names), pts, pvalid, units=["mm", "m"][variant], **plates)


@cache
def seed(kind: str, variant: int) -> bytes:
    """The bytes of one valid file of ``kind`` (variant 0…3: layout variants of real files)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("seed.c3d" if kind == "c3d" else "seed.csv")
        if kind.startswith("vicon"):
            _vicon_seed(kind, variant, path)
        elif kind == "optitrack":
            _optitrack_seed(variant, path)
        else:
            _c3d_seed(variant, path)
        return path.read_bytes()


# ------------------------------------------------------------------------------------- calls
@contextlib.contextmanager
def _strict():
    """NumPy's RuntimeWarnings raised as errors (the readers must not emit them); a reader's own
    UserWarnings (a trimmed Vicon file's assumed rate) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("error", RuntimeWarning)
        yield


def _read(reader, path: Path, **kw):
    def call():
        with _strict():
            return reader(path, **kw)

    return call


@pytest.fixture(scope="module")
def fuzzdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _fuzz_vicon(kind: str, fuzzdir: Path, data) -> None:
    variant = data.draw(st.integers(0, VARIANTS - 1), label="variant")
    blob = data.draw(mutated(seed(kind, variant)), label="file")
    path = fuzzdir / f"{kind}.csv"
    path.write_bytes(blob)
    rotation = "euler_xyz" if kind == "vicon-tracker" else "helical"
    check_reader(kind, _read(read_vicon, path, rotation=rotation))


def _fuzz_optitrack(name: str, fuzzdir: Path, data) -> None:
    variant = data.draw(st.integers(0, VARIANTS - 1), label="variant")
    blob = data.draw(mutated(seed("optitrack", variant)), label="file")
    path = fuzzdir / "take.csv"
    path.write_bytes(blob)
    check_reader(name, _read(read_optitrack, path))


def _fuzz_c3d(name: str, fuzzdir: Path, data) -> None:
    from helpers.fuzzing import c3d_mutation

    variant = data.draw(st.integers(0, 1), label="variant")
    blob = seed("c3d", variant)
    if data.draw(st.booleans(), label="structured"):
        blob = data.draw(c3d_mutation(blob), label="structured file")
    if data.draw(st.booleans(), label="bytes"):
        blob = data.draw(mutated(blob, text=False), label="file")
    path = fuzzdir / "take.c3d"
    path.write_bytes(blob)
    check_reader(name, _read(read_c3d, path))


@cache
def _parser():
    """The command line's parser, built once (building it costs more than an import)."""
    return _build_parser()


class _ExitStatus(RBMCapError):
    """The command's non-zero exit status, raised so that check_reader counts a refusal."""


def _fuzz_import_cli(name: str, fuzzdir: Path, data) -> None:
    from rbmcap.cli.main import main

    kind = data.draw(
        st.sampled_from(
            ["vicon-segments", "vicon-combined", "vicon-trajectories", "optitrack", "c3d"]
        ),
        label="kind",
    )
    variant = data.draw(st.integers(0, 1), label="variant")
    blob = data.draw(mutated(seed(kind, variant), text=kind != "c3d"), label="file")
    path = fuzzdir / ("in.c3d" if kind == "c3d" else "in.csv")
    path.write_bytes(blob)
    out = fuzzdir / "out.npz"
    out.unlink(missing_ok=True)

    def call():
        sink = io.StringIO()
        with (
            _strict(),
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
            mock.patch("rbmcap.cli.main.build_parser", _parser),
        ):
            code = main(["import", str(path), "--out", str(out)])
        if code != 0:
            raise _ExitStatus(f"exit status {code}: {sink.getvalue()}")

    check_reader(name, call, outputs=[out], verify=Capture.load)


FUZZERS = {
    **dict.fromkeys(VICON_KINDS, _fuzz_vicon),
    "optitrack": _fuzz_optitrack,
    "c3d": _fuzz_c3d,
    "import-cli": _fuzz_import_cli,
}


def test_every_seed_is_accepted(fuzzdir):
    for kind in FUZZERS:
        if kind == "import-cli":
            continue
        for variant in range(2 if kind == "c3d" else VARIANTS):
            path = fuzzdir / ("ok.c3d" if kind == "c3d" else "ok.csv")
            path.write_bytes(seed(kind, variant))
            reader = (
                read_c3d
                if kind == "c3d"
                else read_optitrack
                if kind == "optitrack"
                else (read_vicon)
            )
            kw = {"rotation": "euler_xyz"} if kind == "vicon-tracker" else {}
            assert check_reader(f"seed-{kind}", _read(reader, path, **kw)) == "accepted"


# ----------------------------------------------------------------------------- fuzz tests
@pytest.mark.acceptance
@pytest.mark.parametrize("name", [name for name in FUZZERS if name != "import-cli"])
@fuzz_settings()
@given(data=st.data())
def test_fuzz(name, fuzzdir, data):
    FUZZERS[name](name, fuzzdir, data)


@pytest.mark.acceptance
@fuzz_settings(COMMAND_EXAMPLES)
@given(data=st.data())
def test_fuzz_import_cli(fuzzdir, data):
    _fuzz_import_cli("import-cli", fuzzdir, data)


# ------------------------------------------------------------------------- regression tests
def _refused(reader, path: Path, text: str | bytes, match: str, **kw) -> FormatError:
    """Write ``text`` to ``path`` and check the reader refuses it with a FormatError whose
    message contains ``match`` (after the file's path)."""
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    with _strict(), pytest.raises(FormatError) as err:
        reader(path, **kw)
    assert str(err.value).startswith(str(path)), err.value
    assert match in str(err.value), err.value
    return err.value


VICON_HEAD = (
    "Segments\n100\n,,Sub:A,,,,,\nFrame,Sub Frame,RX,RY,RZ,TX,TY,TZ\n,,deg,deg,deg,mm,mm,mm\n"
)


def test_vicon_regression_huge_frame_number_is_a_format_error(tmp_path):
    # was: numpy's "invalid value encountered in cast" (int64 of 1e308), or garbage frames
    text = VICON_HEAD + "1,0,0,0,0,1,2,3\n1e308,0,0,0,0,1,2,3\n"
    _refused(read_vicon, tmp_path / "f.csv", text, ":7:1: frame number 1e+308 is not a whole")


def test_vicon_regression_fractional_frame_number_is_a_format_error(tmp_path):
    # was: silently truncated to frame 1, a duplicate of the first row's frame
    text = VICON_HEAD + "1,0,0,0,0,1,2,3\n1.5,0,0,0,0,1,2,3\n"
    _refused(read_vicon, tmp_path / "f.csv", text, ":7:1: frame number 1.5 is not a whole")


def test_vicon_regression_infinite_cell_is_named_not_an_earlier_nan_cell(tmp_path):
    # was: the message blamed the 'nan' cell (read as empty, accepted) on line 6, not the 'inf'
    text = VICON_HEAD + "1,0,nan,0,0,1,2,3\n2,0,0,0,0,inf,2,3\n"
    _refused(read_vicon, tmp_path / "f.csv", text, ":7:6: expected a number, got 'inf'")


def test_vicon_regression_non_positive_rate_line_names_its_line(tmp_path):
    # was: "frame rate -100.0 is not positive" from the Capture, without a line
    text = VICON_HEAD.replace("\n100\n", "\n-100\n") + "1,0,0,0,0,1,2,3\n"
    _refused(read_vicon, tmp_path / "f.csv", text, ":2:1: frame rate '-100' is not a positive")


OPTI = (
    "Format Version,1.21,Export Frame Rate,120,Rotation Type,Quaternion,Length Units,Meters\n\n"
    ",,Rigid Body,Rigid Body,Rigid Body,Rigid Body,Rigid Body,Rigid Body,Rigid Body\n"
    ",,A,A,A,A,A,A,A\n"
    ",,Rotation,Rotation,Rotation,Rotation,Position,Position,Position\n"
    "Frame,Time,X,Y,Z,W,X,Y,Z\n"
    "0,0,0,0,0,1,1,2,3\n"
)


def test_optitrack_regression_infinite_cell_is_a_format_error(tmp_path):
    # was: numpy's "invalid value encountered in matmul" (inf · 0 turning Y up into Z up)
    text = OPTI + "1,0.008,0,0,0,1,1e400,2,3\n"
    _refused(read_optitrack, tmp_path / "o.csv", text, ":8:7: not a finite number: '1e400'")


def test_optitrack_regression_huge_frame_number_is_a_format_error(tmp_path):
    # was: numpy's "invalid value encountered in cast" (int64 of 1e23), found at 2,000 inputs
    text = OPTI + "99999999999999999999999,0.008,0,0,0,1,1,2,3\n"
    _refused(read_optitrack, tmp_path / "o.csv", text, ":8:1: frame number 1e+23 is not a whole")


def test_optitrack_regression_non_utf8_byte_names_line_and_column(tmp_path):
    # was: "not UTF-8 text (invalid start byte)" without a line and column
    text = OPTI.replace(",A,", ",\xe9,", 1).encode("latin-1")
    _refused(read_optitrack, tmp_path / "o.csv", text, ":4:3: not UTF-8 text")


def test_optitrack_regression_bad_frame_rate_names_its_column(tmp_path):
    # was: ":1: frame rate nan is not positive" without the column of the value
    text = OPTI.replace(",120,", ",nan,")
    _refused(read_optitrack, tmp_path / "o.csv", text, ":1:4: frame rate nan is not positive")


def _c3d_patched(tmp_path, group: str, name: str, word: int) -> Path:
    """The small C3D seed with parameter ``group:name`` patched: ``word`` into its first int16
    of data (an int16 parameter), its first float (a float ``word``) or its dimension-count
    byte (an int ``word``)."""
    import struct

    from helpers.fuzzing import c3d_parameters

    raw = bytearray(seed("c3d", 1))
    kind, dims, at = c3d_parameters(bytes(raw))[(group, name)]
    if kind == 2:
        raw[at : at + 2] = struct.pack("<h", word)
    elif isinstance(word, float):
        raw[at : at + 4] = struct.pack("<f", word)
    else:
        raw[at - len(dims) - 1] = word  # the number of dimensions
    path = tmp_path / "p.c3d"
    path.write_bytes(bytes(raw))
    return path


def test_c3d_regression_parameter_of_200_dimensions_is_a_format_error(tmp_path):
    # was: ezc3d crashed the whole process (segmentation fault) on POINT:RATE's 200 dimensions
    path = _c3d_patched(tmp_path, "POINT", "RATE", 200)
    _refused(read_c3d, path, path.read_bytes(), "parameter type 4, 200 dimensions")


def test_c3d_regression_negative_rotation_ratio_is_a_format_error(tmp_path):
    # was: ezc3d looped for ever (ROTATION:RATIO -32768), beyond SIGALRM's reach
    path = _c3d_patched(tmp_path, "ROTATION", "RATIO", -32768)
    _refused(read_c3d, path, path.read_bytes(), "ROTATION:RATIO is -32768")


def test_c3d_regression_rotation_ratio_beyond_the_data_is_a_format_error(tmp_path):
    # was: ezc3d aborted the whole process (std::out_of_range thrown through C++, SIGABRT) on a
    # well-formed file whose ROTATION:RATIO is 2 with one sample per frame; ezc3d now runs in a
    # worker process, whose crash is this file's FormatError, and the next read still works
    path = _c3d_patched(tmp_path, "ROTATION", "RATIO", 2)
    _refused(read_c3d, path, path.read_bytes(), "not a readable C3D file (the C3D reader")
    assert read_c3d(_ok_c3d(tmp_path)).num_frames == T


def _ok_c3d(tmp_path) -> Path:
    path = tmp_path / "ok.c3d"
    path.write_bytes(seed("c3d", 1))
    return path
