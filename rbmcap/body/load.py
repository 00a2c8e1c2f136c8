"""``load_body_model``: the one way to get a body, from 'standin' or a user path."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from rbmcap.body.files import GENDERS, locate_model_file, read_model_arrays
from rbmcap.body.model import BodyModel
from rbmcap.body.standin.build import STANDIN_VERSION, write_standin
from rbmcap.errors import ModelError
from rbmcap.paths import cache_dir

STANDIN = "standin"


def standin_path(gender: str = "neutral") -> Path:
    """Path of the cached stand-in model file for ``gender``, building it if missing."""
    if gender not in GENDERS:
        raise ModelError(f"unknown gender {gender!r}; expected one of {', '.join(GENDERS)}")
    folder = cache_dir() / f"standin-v{STANDIN_VERSION}"
    path = folder / f"SMPL_{gender.upper()}.npz"
    if not path.is_file():
        write_standin(folder, genders=(gender,))
    return path


def load_body_model(
    spec: str | os.PathLike = STANDIN,
    gender: str = "neutral",
    num_betas: int | None = None,
    kind: str | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> BodyModel:
    """Load a body model.

    Args:
        spec: 'standin' (rbmcap's open body, built and cached on first use) or a path to a
            model file (``.npz``/``.pkl``) or to a folder holding SMPL/SMPL-H files.
        gender: 'neutral', 'male' or 'female'.
        num_betas: shape coefficients to use (default: all the file has).
        kind: 'smpl' or 'smplh' to restrict the folder search.
        device, dtype: where and in which precision the model's buffers live.
    """
    if str(spec) == STANDIN:
        path = standin_path(gender)
        source, identity = STANDIN, f"standin-v{STANDIN_VERSION}/{gender}"
    else:
        path = locate_model_file(spec, gender, kind)
        source, identity = str(path), None
    arrays = read_model_arrays(path)
    model = BodyModel(
        arrays, gender=gender, source=source, num_betas=num_betas, identity=identity, dtype=dtype
    )
    return model.to(device)
