"""Marker sets: which virtual markers exist, where they sit on the body, and their parent tree.

A marker set is data (``conf/markers/<name>.yaml`` or any YAML path); see
``conf/markers/rbm14.yaml`` for the field reference. Two kinds: ``rbm`` (6-DoF plates) and
``point`` (positions only, e.g. MoSh++'s 53-marker layout). Each marker has an SMPL vertex id,
used on meshes with SMPL topology, and a topology-free :class:`~rbmcap.markers.anchors.Anchor`
that finds the vertex on any other mesh.

A set file is read through :func:`rbmcap.config.compose.load_config` with :class:`MarkerSetFile` as
its schema. A reduced set composes a full one (``defaults: [rbm14, _self_]``) and lists the
markers it keeps under ``select``; a selected marker whose parent is not selected hangs from the
full set's root (the chest, for the reference reduced sets).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rbmcap.config.compose import build_config, load_config
from rbmcap.config.packaged import conf_names, named_yaml
from rbmcap.config.values import short_repr
from rbmcap.errors import ConfigError, ModelError
from rbmcap.markers.anchors import Anchor, resolve_anchors

DEFAULT_MARKERS = "rbm14"
"""The marker set used where none is named: the 14-plate reference set
(``conf/markers/rbm14.yaml``). The Hydra training tree names the same default in its defaults list
(``conf/train.yaml``)."""
KINDS = ("rbm", "point")
SMPL_NUM_VERTICES = 6890
MAX_VERTICES = 2**31 - 1
"""Largest ``vertex_topology`` (vertex ids are int64 arrays; no mesh comes near)."""


@dataclass(frozen=True)
class MarkerSet:
    """An ordered set of virtual markers.

    Attributes:
        name: the set's name (``rbm14``, ``moshpp53``, a user name).
        kind: ``'rbm'`` (6-DoF plates) or ``'point'`` (positions only).
        names: marker names, in output order.
        vertex_ids: vertex id of each marker on a mesh with ``vertex_topology`` vertices, or
            ``None`` where the set gives only an anchor.
        parents: index of each marker's parent, -1 for the root (all -1 for point sets).
        anchors: topology-free placement of each marker, or ``None``.
        vertex_topology: vertex count of the mesh the ids refer to (6890: SMPL / SMPL-H).
        source: the YAML file the set came from.
    """

    name: str
    kind: str
    names: tuple[str, ...]
    vertex_ids: tuple[int | None, ...]
    parents: tuple[int, ...]
    anchors: tuple[Anchor | None, ...]
    vertex_topology: int = SMPL_NUM_VERTICES
    source: str = ""

    def __len__(self) -> int:
        return len(self.names)

    @property
    def is_rbm(self) -> bool:
        return self.kind == "rbm"

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise ConfigError(f"marker set {self.name!r} has no marker {name!r}") from None

    def subset(self, names: list[str] | tuple[str, ...], name: str | None = None) -> MarkerSet:
        """The markers ``names`` (in that order).

        A marker whose parent is not kept hangs from this set's root (the chest for rbm14), as
        the reduced sets require; if the root is not kept either, from the first marker left
        without a parent.
        """
        idx = [self.index(n) for n in names]
        if len(set(idx)) != len(idx):
            raise ConfigError(f"subset of {self.name!r} names a marker twice: {list(names)}")
        pos = {old: new for new, old in enumerate(idx)}
        parents = []
        root = self.parents.index(-1) if -1 in self.parents else -1
        for old in idx:
            p = self.parents[old]
            if p >= 0 and p not in pos:
                p = root if root in pos and root != old else -1
            parents.append(pos[p] if p >= 0 else -1)
        if self.kind == "rbm":
            parents = _single_root(parents)
        return MarkerSet(
            name=name or f"{self.name}[{','.join(names)}]",
            kind=self.kind,
            names=tuple(self.names[i] for i in idx),
            vertex_ids=tuple(self.vertex_ids[i] for i in idx),
            parents=tuple(parents),
            anchors=tuple(self.anchors[i] for i in idx),
            vertex_topology=self.vertex_topology,
            source=self.source,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain description (for manifests and config hashes); round-trips through YAML/JSON."""
        markers = []
        for i, n in enumerate(self.names):
            entry: dict[str, Any] = {"name": n}
            if self.vertex_ids[i] is not None:
                entry["vertex"] = self.vertex_ids[i]
            if self.parents[i] >= 0:
                entry["parent"] = self.names[self.parents[i]]
            if self.anchors[i] is not None:
                entry["anchor"] = self.anchors[i].to_dict()
            markers.append(entry)
        return {
            "name": self.name,
            "kind": self.kind,
            "vertex_topology": self.vertex_topology,
            "markers": markers,
        }

    @property
    def fingerprint(self) -> str:
        """Short hash of the definition (not of the name or file it came from)."""
        d = self.to_dict()
        d.pop("name")
        blob = json.dumps(d, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def uses_vertex_ids(self, body) -> bool:
        """Whether ``body`` has the topology the vertex ids refer to."""
        return int(body.num_vertices) == self.vertex_topology

    def resolve(self, body, method: str = "auto") -> np.ndarray:
        """Vertex ids (N,) of the markers on ``body``.

        Args:
            body: a body model (``num_vertices``; for anchors also ``v_template``, ``faces``,
                ``lbs_weights``, ``rest_joints()``).
            method: ``'auto'`` (listed ids on a mesh of ``vertex_topology`` vertices, anchors
                elsewhere), ``'vertex'`` or ``'anchor'``.
        """
        if method not in ("auto", "vertex", "anchor"):
            raise ConfigError(f"resolve method {method!r}: expected auto, vertex or anchor")
        nv = int(body.num_vertices)
        use_ids = method == "vertex" or (method == "auto" and self.uses_vertex_ids(body))
        if use_ids:
            missing = [n for n, v in zip(self.names, self.vertex_ids, strict=True) if v is None]
            if missing:
                raise ConfigError(f"{self._where}: markers without a vertex id: {missing}")
            ids = np.asarray(self.vertex_ids, dtype=np.int64)
            bad = np.flatnonzero(ids >= nv)
            if bad.size:
                i = int(bad[0])
                raise ModelError(
                    f"{self._where}: marker {self.names[i]!r} vertex {int(ids[i])} is out of "
                    f"range for a body with {nv} vertices"
                )
            return ids
        missing = [n for n, a in zip(self.names, self.anchors, strict=True) if a is None]
        if missing:
            raise ModelError(
                f"{self._where}: the body has {nv} vertices, not the {self.vertex_topology} the "
                f"vertex ids refer to, and markers {missing} have no anchor to place them"
            )
        return resolve_anchors(body, self.anchors)  # type: ignore[arg-type]

    @property
    def _where(self) -> str:
        return f"marker set {self.name!r} ({self.source})" if self.source else repr(self.name)


def available_marker_sets() -> list[str]:
    """Names of the marker sets shipped under ``conf/markers/``."""
    return conf_names("markers")


@dataclass
class MarkerSetFile:
    """A marker-set YAML as written (see ``conf/markers/rbm14.yaml``).

    Attributes:
        name: the set's name (a file's stem where it sets none).
        kind: ``'rbm'`` or ``'point'``.
        vertex_topology: vertex count of the mesh the ids refer to.
        markers: one mapping per marker: ``name``, ``vertex`` and/or ``anchor``, ``parent``
            (checked marker by marker when the set is built, each error naming the marker).
        select: the markers to keep, in order (a reduced set), or None for all.
    """

    name: str = "markers"
    kind: str = "rbm"
    vertex_topology: int = SMPL_NUM_VERTICES
    markers: list[Any] = field(default_factory=list)
    select: list[str] | None = None


def load_marker_set(spec: str | Path | Mapping[str, Any] | MarkerSet) -> MarkerSet:
    """Load a marker set by name (``rbm14``, ``rbm_a`` … ``rbm_f``, ``moshpp53``, ``vr3``), YAML
    path, or an already composed mapping (e.g. the Hydra config group holding one of those
    files).

    Raises:
        ConfigError: unknown name, missing file, or an invalid definition (the message names
            the file and the marker).
        FormatError: the file is not UTF-8, not YAML (``file:line:column``) or not a mapping.
    """
    if isinstance(spec, MarkerSet):
        return spec
    if isinstance(spec, Mapping):
        return build_marker_set(build_config(MarkerSetFile, [(spec, "marker set")]))
    path = named_yaml(spec, "markers", "marker set")
    return build_marker_set(load_config(path, "markers", MarkerSetFile, "marker set"), str(path))


def build_marker_set(config: MarkerSetFile, source: str = "") -> MarkerSet:
    """The :class:`MarkerSet` a marker-set file describes (``source``: the file, for messages)."""
    where = source or "marker set"
    kind, topology = config.kind, config.vertex_topology
    if kind not in KINDS:
        raise ConfigError(f"{where}: kind {short_repr(kind)}, expected one of {KINDS}")
    if not 0 < topology <= MAX_VERTICES:
        raise ConfigError(
            f"{where}: vertex_topology must be an integer in 1..{MAX_VERTICES}, "
            f"got {short_repr(topology)}"
        )
    if not config.markers:
        raise ConfigError(f"{where}: expected a non-empty 'markers' list")
    names: list[str] = []
    vertices: list[int | None] = []
    parent_names: list[str | None] = []
    anchors: list[Anchor | None] = []
    for i, entry in enumerate(config.markers):
        mname, vertex, anchor, pname = _parse_marker(i, entry, names, topology, where)
        names.append(mname)
        vertices.append(vertex)
        anchors.append(anchor)
        parent_names.append(pname)
    parents = _parent_indices(names, parent_names, kind, where)
    full = MarkerSet(
        name=config.name,
        kind=kind,
        names=tuple(names),
        vertex_ids=tuple(vertices),
        parents=tuple(parents),
        anchors=tuple(anchors),
        vertex_topology=topology,
        source=source,
    )
    if config.select is None:
        return full
    if not config.select:
        raise ConfigError(f"{where}: select: expected a non-empty list of marker names")
    try:
        return full.subset(config.select, name=config.name)
    except ConfigError as exc:
        raise ConfigError(f"{where}: select: {exc}") from None


def _parse_marker(
    i: int, entry: Any, earlier: list[str], topology: int, where: str
) -> tuple[str, int | None, Anchor | None, str | None]:
    """Marker #i's name, vertex id, anchor and parent name (``earlier``: the names before it)."""
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise ConfigError(f"{where}: markers[{i}] must be a mapping with a 'name'")
    entry = dict(entry)
    mname = entry["name"]
    if isinstance(mname, bool) or not isinstance(mname, (str, int)) or str(mname) == "":
        raise ConfigError(f"{where}: markers[{i}].name: expected a name, got {short_repr(mname)}")
    mname = str(mname)
    if mname in earlier:
        raise ConfigError(f"{where}: marker {mname!r} is listed twice")
    vertex = entry.get("vertex")
    if vertex is not None:
        if isinstance(vertex, bool) or not isinstance(vertex, int) or vertex < 0:
            raise ConfigError(f"{where}: marker {mname!r} vertex must be an integer ≥ 0")
        if vertex >= topology:
            raise ConfigError(
                f"{where}: marker {mname!r} vertex {vertex} is out of range for a "
                f"{topology}-vertex mesh (vertex_topology)"
            )
    anchor = None
    if entry.get("anchor") is not None:
        try:
            anchor = Anchor.from_dict(entry["anchor"])
        except (ConfigError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: marker {mname!r} anchor: {exc}") from None
    if vertex is None and anchor is None:
        raise ConfigError(f"{where}: marker {mname!r} needs a 'vertex' or an 'anchor'")
    return mname, vertex, anchor, None if entry.get("parent") is None else str(entry["parent"])


def _parent_indices(
    names: list[str], parent_names: list[str | None], kind: str, where: str
) -> list[int]:
    """Each marker's parent index (-1: a root), checked: known, acyclic, one root for rbm."""
    parents = []
    for mname, pname in zip(names, parent_names, strict=True):
        if pname is None:
            parents.append(-1)
        elif pname not in names:
            raise ConfigError(f"{where}: marker {mname!r} has unknown parent {short_repr(pname)}")
        else:
            parents.append(names.index(pname))
    _check_acyclic(parents, names, where)
    if kind == "rbm" and sum(p < 0 for p in parents) != 1:
        roots = [n for n, p in zip(names, parents, strict=True) if p < 0]
        raise ConfigError(f"{where}: an rbm set needs exactly one root marker, found {roots}")
    return parents


def _check_acyclic(parents: list[int], names: list[str], where: str) -> None:
    for start in range(len(parents)):
        seen, p = set(), start
        while p >= 0:
            if p in seen:
                raise ConfigError(f"{where}: the parent chain of {names[start]!r} has a cycle")
            seen.add(p)
            p = parents[p]


def _single_root(parents: list[int]) -> list[int]:
    """Extra roots (their chain left the subset entirely) hang from the first root."""
    roots = [i for i, p in enumerate(parents) if p < 0]
    return [roots[0] if (p < 0 and i != roots[0]) else p for i, p in enumerate(parents)]


__all__ = [
    "KINDS",
    "Anchor",
    "MarkerSet",
    "MarkerSetFile",
    "available_marker_sets",
    "build_marker_set",
    "load_marker_set",
]
