"""Virtual markers: marker sets, anchors, plate frames, realism and synthesis."""

from rbmcap.markers.anchors import Anchor, resolve_anchors
from rbmcap.markers.markerset import MarkerSet, available_marker_sets, load_marker_set
from rbmcap.markers.plates import PLATE_STANDOFF, PlateTopology, plate_frames, plate_topology
from rbmcap.markers.synth import Observations, Synthesizer, synthesize

__all__ = [
    "PLATE_STANDOFF",
    "Anchor",
    "MarkerSet",
    "Observations",
    "PlateTopology",
    "Synthesizer",
    "available_marker_sets",
    "load_marker_set",
    "plate_frames",
    "plate_topology",
    "resolve_anchors",
    "synthesize",
]
