"""What a session folder holds and what to run on it: ``session.yaml`` when there is one, the
defaults otherwise.

A session is a folder of trials (C3D, Vicon or OptiTrack CSV exports, or rbmcap capture files)::

    markers: rbm14               # the marker set the plates are mapped into (default rbm14)
    plates: plug-in-gait         # plate definitions to read plates from points (optional)
    model: standin-rbm14         # the network (default)
    method: refine               # rbmcap infer's method (default refine)
    exports: [bvh]               # besides the motion .npz: bvh, glb, fbx (needs Blender)
    opensim: {model: gait2392.osim, mass: 72.0}   # optional: the model scaled to each subject's
                                 # static (mass kg optional; map: the OpenSim marker map), IK
    cluster: {kind: slurm, jobs: 8, queue: short, memory: 8GB}   # optional: dask-jobqueue
    subjects:                    # optional: who is in which trial
      A:
        static: PiG_Calibration-FlatFoot-One.c3d
        trials: [PiG_Motion-FlatFoot-One.c3d, walk2.c3d]
        calibrate: [PiG_Motion-FlatFoot-One.c3d]   # dynamic trials calibrated with the static

Without ``subjects`` every trial file of the folder belongs to one subject, ``subject``; a file
whose name holds ``static`` or ``cal`` (any case) is its static, and every other trial is
calibrated with it. A subject without a static is a failure of that subject's trials (the others
go on).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from rbmcap.config.safe_yaml import read_yaml, type_name
from rbmcap.errors import ConfigError
from rbmcap.markers.markerset import DEFAULT_MARKERS

SESSION_FILE = "session.yaml"
TRIAL_SUFFIXES = (".c3d", ".csv", ".npz")
STATIC_NAME = re.compile(r"static|cal", re.IGNORECASE)
EXPORTS = ("bvh", "glb", "fbx")
KEYS = ("markers", "plates", "model", "method", "exports", "opensim", "cluster", "subjects")
OPENSIM_KEYS = ("model", "mass", "map")
SUBJECT_KEYS = ("static", "trials", "calibrate")


@dataclass(frozen=True)
class SubjectSpec:
    """One subject: its static (a file name, or None when it has none), its dynamic trials and
    the trials calibrated with the static."""

    name: str
    static: str | None
    trials: tuple[str, ...]
    calibrate: tuple[str, ...]


@dataclass(frozen=True)
class SessionSpec:
    """A session folder and what to run on it (module docstring)."""

    folder: Path
    subjects: tuple[SubjectSpec, ...]
    markers: str = DEFAULT_MARKERS
    plates: str | None = None
    model: str = "standin-rbm14"
    method: str = "refine"
    exports: tuple[str, ...] = ()
    opensim: dict | None = None
    cluster: dict | None = None
    settings: dict = field(default_factory=dict)

    def trial_names(self) -> list[str]:
        """Every trial file named by a subject (statics first), once."""
        names: list[str] = []
        for s in self.subjects:
            for n in ([s.static] if s.static else []) + list(s.trials):
                if n not in names:
                    names.append(n)
        return names


def load_session(folder: str | Path, **overrides) -> SessionSpec:
    """The session in ``folder``: its ``session.yaml`` (if any) and the trial files there;
    ``overrides`` (markers, plates, model, method, exports) win over the file.

    Raises:
        ConfigError: no such folder, no trial file in it, a bad ``session.yaml`` (the message
            names the file and the key), a subject naming a file the folder lacks.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder (a session is a folder of trials)")
    files = sorted(
        p.name for p in folder.iterdir() if p.is_file() and p.suffix.lower() in TRIAL_SUFFIXES
    )
    path = folder / SESSION_FILE
    data = read_yaml(path) if path.is_file() else {}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping with keys {', '.join(KEYS)}, got {type_name(data)}"
        )
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise ConfigError(f"{path}: unknown key {unknown[0]!r}; expected {', '.join(KEYS)}")
    values = {k: data[k] for k in ("markers", "plates", "model", "method") if k in data}
    values |= {k: v for k, v in overrides.items() if v is not None and k != "exports"}
    for key, value in values.items():
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{path}: {key}: expected a name, got {value!r}")
    exports = overrides.get("exports") or data.get("exports") or []
    if not isinstance(exports, list) or any(e not in EXPORTS for e in exports):
        raise ConfigError(
            f"{path}: exports: expected a list of {', '.join(EXPORTS)}, got {exports!r}"
        )
    opensim = _opensim(data.get("opensim"), folder, path)
    cluster = data.get("cluster")
    if cluster is not None and not isinstance(cluster, dict):
        raise ConfigError(f"{path}: cluster: expected a mapping (kind: slurm, jobs: 8, ...)")
    if "subjects" in data:
        subjects = _subjects(data["subjects"], files, path)
    else:
        subjects = (_default_subject(files),)
    if not any(s.trials or s.static for s in subjects):
        raise ConfigError(f"{folder}: no trial ({', '.join(TRIAL_SUFFIXES)} files) in the folder")
    return SessionSpec(
        folder=folder,
        subjects=subjects,
        exports=tuple(exports),
        opensim=opensim,
        cluster=cluster,
        settings={"session_file": str(path) if path.is_file() else None},
        **values,
    )


def _opensim(value, folder: Path, path: Path) -> dict | None:
    """The ``opensim`` entry: the model (a path, from the session folder), the mass and map."""
    if value is None:
        return None
    expected = "a mapping with model (an .osim), optional mass (kg) and map"
    if not isinstance(value, dict) or "model" not in value:
        raise ConfigError(f"{path}: opensim: expected {expected}")
    unknown = [k for k in value if k not in OPENSIM_KEYS]
    if unknown:
        raise ConfigError(f"{path}: opensim: unknown key {unknown[0]!r}; expected {expected}")
    model = folder / str(value["model"])
    if not model.is_file():
        raise ConfigError(f"{path}: opensim.model: no such file {model}")
    mass = value.get("mass")
    if mass is not None and (isinstance(mass, bool) or not isinstance(mass, (int, float))):
        raise ConfigError(f"{path}: opensim.mass: expected kilograms, got {mass!r}")
    return {"model": str(model.resolve()), "mass": mass, "map": str(value.get("map", "gait2392"))}


def _default_subject(files: list[str]) -> SubjectSpec:
    statics = [f for f in files if STATIC_NAME.search(Path(f).stem)]
    static = statics[0] if statics else None
    trials = tuple(f for f in files if f != static)
    return SubjectSpec("subject", static, trials, trials)


def _subjects(value, files: list[str], path: Path) -> tuple[SubjectSpec, ...]:
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"{path}: subjects: expected a mapping of subject name to its trials")
    out = []
    for name, entry in value.items():
        key = f"subjects.{name}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: {key}: expected a mapping with {', '.join(SUBJECT_KEYS)}")
        unknown = [k for k in entry if k not in SUBJECT_KEYS]
        if unknown:
            raise ConfigError(f"{path}: {key}: unknown key {unknown[0]!r}")
        static = entry.get("static")
        trials = _names(entry.get("trials", []), files, path, f"{key}.trials")
        if static is not None:
            _names([static], files, path, f"{key}.static")
        calibrate = _names(entry.get("calibrate", list(trials)), files, path, f"{key}.calibrate")
        out.append(SubjectSpec(str(name), static, trials, calibrate))
    return tuple(out)


def _names(value, files: list[str], path: Path, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {key}: expected a list of file names, got {value!r}")
    missing = [v for v in value if v not in files]
    if missing:
        raise ConfigError(f"{path}: {key}: no trial file {missing[0]!r} in the folder")
    return tuple(value)
