"""Synthesised datasets: manifest + memory-mapped arrays, per split.

The folder's layout: docs/formats.md#dataset-folder.

Write with :func:`synthesize_dataset` (``rbmcap synth``), merge shards with
:func:`merge_datasets`, read with :class:`RBMDataset`. The recipe that makes a training dataset
from procedural and real motion (the Hydra ``data.generate`` node) is
:mod:`rbmcap.dataset.recipe`.
"""

from rbmcap.dataset.build import SynthReport, synthesize_dataset
from rbmcap.dataset.manifest import ARRAY_DTYPES, FORMAT_VERSION, Manifest, SequenceEntry
from rbmcap.dataset.merge import merge_datasets
from rbmcap.dataset.reader import RBMDataset, Windows, dataset_info
from rbmcap.dataset.synth_options import SynthOptions, parse_shard

__all__ = [
    "ARRAY_DTYPES",
    "FORMAT_VERSION",
    "Manifest",
    "RBMDataset",
    "SequenceEntry",
    "SynthOptions",
    "SynthReport",
    "Windows",
    "dataset_info",
    "merge_datasets",
    "parse_shard",
    "synthesize_dataset",
]
