"""Finding, reading, checking and converting SMPL-family model files.

Official SMPL/SMPL-H ``.pkl`` files hold chumpy objects; chumpy does not import on current Python
and numpy, so pickles are read with an unpickler that turns every chumpy class into a stub and
keeps its array state. That unpickler resolves only the globals a model file needs (numpy arrays,
dtypes and scalars, scipy sparse matrices, chumpy), so loading a ``.pkl`` runs no other code.
``.npz`` files (AMASS's SMPL+H release, converted pickles, the stand-in) are read with numpy.
"""

from __future__ import annotations

import io
import os
import pickle
import warnings
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse

from rbmcap.errors import FormatError, ModelError

GENDERS = ("neutral", "male", "female")
KIND_BY_JOINTS = {24: "smpl", 52: "smplh", 55: "smplx"}
MODEL_KEYS = ("v_template", "f", "weights", "J_regressor", "kintree_table", "shapedirs", "posedirs")


class _ChumpyStub:
    """Stands in for any chumpy class during unpickling; keeps the pickled state."""

    def __init__(self, *args, **kwargs) -> None:
        self._args = args

    def __setstate__(self, state) -> None:
        self.__dict__["_state"] = state


# The globals a model pickle may name, as numpy 1 and 2, old and new scipy, and Python 2 and 3
# write them. Everything else (os.system, builtins.eval, ...) is refused before it is imported.
_ALLOWED_GLOBALS = frozenset(
    {
        # numpy arrays, dtypes and scalars (numpy 1 writes numpy.core, numpy 2 numpy._core)
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        # scipy sparse matrices (the official joint regressor is a csc_matrix)
        ("scipy.sparse.csc", "csc_matrix"),
        ("scipy.sparse._csc", "csc_matrix"),
        ("scipy.sparse.csr", "csr_matrix"),
        ("scipy.sparse._csr", "csr_matrix"),
        # how protocols 0-2 rebuild objects, sets and bytes
        ("copyreg", "_reconstructor"),
        ("builtins", "object"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("_codecs", "encode"),
    }
)
_PYTHON2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}  # the official files' names


class _ModelUnpickler(pickle.Unpickler):
    """Unpickles a model file: chumpy classes become :class:`_ChumpyStub`, the globals in
    ``_ALLOWED_GLOBALS`` resolve, and any other global is a :class:`FormatError`."""

    def __init__(self, fh, path: Path) -> None:
        super().__init__(fh, encoding="latin1")
        self._path = path

    def find_class(self, module: str, name: str):
        if module == "chumpy" or module.startswith("chumpy."):
            return _ChumpyStub
        module = _PYTHON2_MODULES.get(module, module)
        if (module, name) not in _ALLOWED_GLOBALS:
            raise FormatError(
                f"{self._path}: refused to unpickle {module}.{name}: a model pickle holds only "
                "numpy arrays, scipy sparse matrices and chumpy objects"
            )
        if module.startswith("scipy.sparse"):  # the public namespace: scipy deprecates the paths
            return getattr(scipy.sparse, name)
        with warnings.catch_warnings():  # numpy 1's module paths, read under numpy 2
            warnings.simplefilter("ignore", DeprecationWarning)
            return super().find_class(module, name)


def _plain_array(value, key: str, path: Path):
    """Turn a chumpy stub or scipy sparse matrix into a dense numpy array."""
    if isinstance(value, _ChumpyStub):
        state = value.__dict__.get("_state")
        if isinstance(state, dict):
            for field in ("x", "a", "r"):
                if field in state and not isinstance(state[field], _ChumpyStub):
                    return np.asarray(state[field])
            arrays = [v for v in state.values() if isinstance(v, np.ndarray)]
            if len(arrays) == 1:
                return arrays[0]
        raise FormatError(f"{path}: cannot recover the array of chumpy object {key!r}")
    if hasattr(value, "toarray"):
        return np.asarray(value.toarray())
    return value


def read_pickle(path: Path) -> dict[str, np.ndarray]:
    """Read an official SMPL-family ``.pkl`` without importing chumpy or running its code.

    A global outside numpy, scipy sparse and chumpy is refused with a :class:`FormatError`
    naming the file and the global, before anything is imported or called.
    """
    try:
        with open(path, "rb") as fh:
            raw = _ModelUnpickler(fh, path).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as exc:
        raise FormatError(f"{path}: not a readable model pickle ({exc})") from exc
    if not isinstance(raw, dict):
        raise FormatError(f"{path}: expected a pickled dict of model arrays, got {type(raw)}")
    return {str(k): _plain_array(v, str(k), path) for k, v in raw.items()}


def read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise FormatError(f"{path}: not a readable .npz model file ({exc})") from exc


def read_model_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read and check the arrays of a model file (``.npz`` or ``.pkl``)."""
    path = Path(path)
    if not path.is_file():
        raise ModelError(f"{path}: no such model file")
    if path.suffix == ".pkl":
        arrays = read_pickle(path)
    elif path.suffix == ".npz":
        arrays = read_npz(path)
    else:
        raise FormatError(f"{path}: expected a .npz or .pkl SMPL-family model file")
    check_model_arrays(arrays, path)
    return arrays


def check_model_arrays(arrays: dict[str, np.ndarray], path: Path | str) -> str:
    """Check keys and shapes; return the model kind ('smpl', 'smplh'). Errors name the key."""
    missing = [k for k in MODEL_KEYS if k not in arrays]
    if missing:
        raise FormatError(f"{path}: missing model array(s) {', '.join(missing)}")
    for key in MODEL_KEYS:
        arrays[key] = np.asarray(arrays[key])
        if arrays[key].dtype == object:
            raise FormatError(f"{path}: array {key!r} holds Python objects, expected numbers")
    v = arrays["v_template"]
    if v.ndim != 2 or v.shape[1] != 3:
        raise FormatError(f"{path}: 'v_template' has shape {v.shape}, expected (V, 3)")
    nv = v.shape[0]
    kin = arrays["kintree_table"]
    if kin.ndim != 2 or kin.shape[0] != 2:
        raise FormatError(f"{path}: 'kintree_table' has shape {kin.shape}, expected (2, J)")
    nj = kin.shape[1]
    if nj not in KIND_BY_JOINTS:
        raise FormatError(f"{path}: 'kintree_table' has {nj} joints, expected 24, 52 or 55")
    expected = {
        "f": (None, 3),
        "weights": (nv, nj),
        "J_regressor": (nj, nv),
        "shapedirs": (nv, 3, None),
        "posedirs": (nv, 3, 9 * (nj - 1)),
    }
    for key, shape in expected.items():
        got = arrays[key].shape
        if len(got) != len(shape) or any(s is not None and s != g for s, g in zip(shape, got)):
            want = "(" + ", ".join("N" if s is None else str(s) for s in shape) + ")"
            raise FormatError(f"{path}: {key!r} has shape {got}, expected {want}")
    faces = arrays["f"]
    if faces.size and (faces.min() < 0 or faces.max() >= nv):
        raise FormatError(f"{path}: 'f' indexes vertices outside 0..{nv - 1}")
    kind = KIND_BY_JOINTS[nj]
    if kind == "smplx":
        raise ModelError(f"{path}: SMPL-X body models are not supported yet; use SMPL or SMPL-H")
    return kind


def candidate_files(folder: Path, gender: str, kind: str | None) -> list[Path]:
    """File names a model folder may use, in the order they are tried."""
    g, G = gender.lower(), gender.upper()
    short = {"neutral": "neutral", "male": "m", "female": "f"}[g]
    names: list[str] = []
    if kind in (None, "smpl"):
        names += [f"SMPL_{G}.npz", f"SMPL_{G}.pkl", f"smpl/SMPL_{G}.npz", f"smpl/SMPL_{G}.pkl"]
        names += [f"basicmodel_{short}_lbs_10_207_0_v1.1.0.pkl"]
        names += [f"basicModel_{short}_lbs_10_207_0_v1.0.0.pkl"]
        names += [f"basicmodel_{short}_lbs_10_207_0_v1.0.0.pkl"]
    if kind in (None, "smplh"):
        names += [f"SMPLH_{G}.npz", f"SMPLH_{G}.pkl", f"smplh/SMPLH_{G}.npz"]
        names += [f"smplh/SMPLH_{G}.pkl", f"smplh/{g}/model.npz", f"{g}/model.npz"]
    return [folder / n for n in names]


def locate_model_file(path: str | os.PathLike, gender: str = "neutral", kind: str | None = None):
    """Resolve a user path (a model file or a folder of models) to one model file."""
    if gender not in GENDERS:
        raise ModelError(f"unknown gender {gender!r}; expected one of {', '.join(GENDERS)}")
    path = Path(path).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        tried = candidate_files(path, gender, kind)
        for candidate in tried:
            if candidate.is_file():
                return candidate
        names = ", ".join(str(c.relative_to(path)) for c in tried)
        raise ModelError(f"no {gender} body model in {path}; looked for {names}")
    raise ModelError(f"{path}: no such body model file or folder")


def convert_model(src: str | os.PathLike, dst: str | os.PathLike) -> Path:
    """Convert a model file (typically a chumpy ``.pkl``) to a plain ``.npz``, atomically."""
    arrays = read_model_arrays(src)
    keep = {k: np.asarray(v) for k, v in arrays.items() if _storable(v)}
    return write_npz_atomic(dst, keep)


def _storable(value) -> bool:
    return isinstance(value, np.ndarray | np.generic | int | float | str) and (
        np.asarray(value).dtype != object
    )


def write_npz_atomic(dst: str | os.PathLike, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` to ``dst`` through a temporary file so a crash leaves no partial file."""
    dst = Path(dst)
    if dst.suffix != ".npz":
        raise FormatError(f"{dst}: output must end in .npz")
    dst.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    tmp.write_bytes(buffer.getvalue())
    os.replace(tmp, dst)
    return dst
