"""Checkpoints: reading one (validated), loading its model or its weights, and packing it.

A checkpoint is a Lightning checkpoint file holding plain data and tensors only, read with
``torch.load(weights_only=True)`` (no pickled object is ever executed). What rbmcap reads of it:

- ``hyper_parameters["model"]``: the :class:`~rbmcap.model.regressor.RegressorConfig` of the
  model, everything inference needs: the marker set (``markers``: name, plate ``names``,
  ``parents``, ``joints``), the body (``body_id``, joint template and shape directions,
  ``num_betas``), the plates' rest frames, the features, the network, the ``plate_fit`` settings
  and ``fps``, the frame rate of the training data (Hz), the rate inference resamples a capture
  to. The other hyper-parameters (loss, optimiser, augmentation, seed) are the training's;
- ``state_dict``: the weights, named tensors; the model's are those under :data:`MODEL_PREFIX`;
- :data:`RUN_KEY`: the command that trained it and its data recipe (written by every training
  run, read when packing);
- ``epoch``, ``global_step`` and Lightning's own keys.

:func:`read_checkpoint` checks all of that before anything is built from it; every failure is
one :class:`~rbmcap.errors.FormatError`, :class:`~rbmcap.errors.ModelError` or
:class:`~rbmcap.errors.DataError` line naming the file. The model is built from
:mod:`rbmcap.model` alone.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rbmcap.atomic import atomic_path
from rbmcap.errors import (
    ConfigError,
    DataError,
    FormatError,
    ModelError,
    RBMCapError,
    first_line,
)
from rbmcap.model.networks.registry import build_network
from rbmcap.model.regressor import PoseRegressor, RegressorConfig
from rbmcap.paths import resolve_checkpoint

log = logging.getLogger("rbmcap.checkpoint")

MAX_BETAS = 300
"""The most shape coefficients a checkpoint may predict (SMPL-X has 300)."""

MODEL_KEY = "model"
"""The hyper-parameter holding the model's configuration."""

MODEL_PREFIX = "model."
"""The prefix of the model's weights in a checkpoint's ``state_dict`` (the training module holds
the model as ``model``)."""

RUN_KEY = "rbmcap_run"
"""The checkpoint key holding the run's record: ``command`` and ``data`` (the recipe)."""

PACKED_KEYS = (
    "state_dict",
    "hyper_parameters",
    "hparams_name",
    "pytorch-lightning_version",
    RUN_KEY,
    "epoch",
    "global_step",
)
"""What a packed (shipped) checkpoint keeps: no optimiser, scheduler or loop state."""


# ------------------------------------------------------------------------------------ reading
def read_checkpoint(spec: str | Path) -> dict[str, Any]:
    """The checkpoint ``spec`` names (a path or a shipped model's name), checked: its structure,
    finite weights and hyper-parameters, and hyper-parameters the current model takes.

    Returns:
        the whole checkpoint (a dict: ``state_dict``, ``hyper_parameters``, ...).

    Raises:
        ModelError: no such file or shipped model, or hyper-parameters missing, unknown or of an
            unusable kind.
        FormatError: not a checkpoint (unreadable, truncated, corrupt, or missing its weights or
            hyper-parameters).
        DataError: a weight or hyper-parameter is NaN or infinite.
    """
    path = resolve_checkpoint(spec)
    ckpt = _load(path)
    hp, state = _checkpoint_parts(ckpt, path)
    _check_finite(hp, state, path)
    _check_hyper_parameters(hp, path)
    return ckpt


def _load(path: Path) -> object:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    # torch.load meets arbitrary bytes here: whatever its unpickler or zip reader raises on a
    # corrupt, truncated or foreign file means the same thing.
    except Exception as exc:
        raise FormatError(f"{path}: not an rbmcap checkpoint ({first_line(exc)})") from exc


def _checkpoint_parts(ckpt: object, path: Path) -> tuple[dict, dict]:
    """(hyper_parameters, state_dict) of a loaded checkpoint, after checking their types."""
    if not isinstance(ckpt, dict):
        raise FormatError(f"{path}: not an rbmcap checkpoint (a {type(ckpt).__name__}, not a dict)")
    for key in ("state_dict", "hyper_parameters"):
        if not isinstance(ckpt.get(key), dict):
            raise FormatError(f"{path}: not an rbmcap checkpoint (no {key!r} mapping)")
    state = ckpt["state_dict"]
    bad = [k for k, v in state.items() if not (isinstance(k, str) and torch.is_tensor(v))]
    if bad:
        raise FormatError(
            f"{path}: not an rbmcap checkpoint (state_dict entry {bad[0]!r} is not a named tensor)"
        )
    return ckpt["hyper_parameters"], state


def _check_finite(hp: dict, state: dict, path: Path) -> None:
    """DataError naming the first weight or hyper-parameter holding NaN or infinity."""
    for key, value in state.items():
        if (value.is_floating_point() or value.is_complex()) and not torch.isfinite(value).all():
            raise DataError(
                f"{path}: weight {key!r} has NaN or infinite values; the checkpoint "
                "is unusable (did its training run diverge?)"
            )
    for key, value in hp.items():
        if not _finite_numbers(value):
            raise DataError(f"{path}: hyper-parameter {key!r} has NaN or infinite values")


def _finite_numbers(value, depth: int = 0) -> bool:
    """Whether every float in nested lists / dicts ``value`` is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)) and depth < 8:
        if value and all(isinstance(v, (int, float)) for v in value):
            return bool(np.isfinite(np.asarray(value, dtype=np.float64)).all())
        return all(_finite_numbers(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 8:
        return all(_finite_numbers(v, depth + 1) for v in value.values())
    return True


def _check_hyper_parameters(hp: dict, path: Path) -> None:
    """ModelError for a model configuration the model or the predictor cannot take: missing or
    unknown keys, and the wrong kind of value where the predictor reads them."""
    config = hp.get(MODEL_KEY)
    if not isinstance(config, dict):
        raise ModelError(f"{path}: the checkpoint's hyper-parameters lack {MODEL_KEY}")
    names = set(RegressorConfig.field_names())
    missing, unknown = sorted(names - set(config)), sorted(set(config) - names)
    if missing or unknown:
        keys = ", ".join(f"{MODEL_KEY}.{k}" for k in missing or unknown)
        what = f"lack {keys}" if missing else f"include unknown {keys}"
        raise ModelError(f"{path}: the checkpoint's hyper-parameters {what}")
    bad = [key for wrong, key in _unusable(config) if wrong]
    if bad:
        raise ModelError(
            f"{path}: hyper-parameter '{MODEL_KEY}.{bad[0]}' has an unusable value "
            f"({_short(config[bad[0]])})"
        )


def _unusable(hp: dict) -> list[tuple[bool, str]]:
    """(wrong, key) for each model hyper-parameter the predictor reads directly."""
    markers, betas, fps = hp["markers"], hp["num_betas"], hp["fps"]
    return [
        (
            not isinstance(markers, dict)
            or not isinstance(markers.get("name"), str)
            or not isinstance(markers.get("parents"), list)
            or not isinstance(names := markers.get("names"), list)
            or not all(isinstance(n, str) for n in names)
            or len(names) != len(markers["parents"]),
            "markers",
        ),
        (not isinstance(hp["body_id"], str), "body_id"),
        (
            isinstance(betas, bool) or not isinstance(betas, int) or not 1 <= betas <= MAX_BETAS,
            "num_betas",
        ),
        (
            not isinstance(hp["network"], dict) or not isinstance(hp["network"].get("name"), str),
            "network",
        ),
        (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0, "fps"),
        (not isinstance(hp["plate_fit"], dict) or "enabled" not in hp["plate_fit"], "plate_fit"),
    ]


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# ------------------------------------------------------------------------------------ loading
def load_model(spec: str | Path, device: str = "cpu") -> PoseRegressor:
    """The :class:`~rbmcap.model.regressor.PoseRegressor` the checkpoint ``spec`` (a path or a
    shipped model's name) holds, in eval mode on ``device``.

    Besides :func:`read_checkpoint`'s checks: the network the hyper-parameters describe (built
    first on the meta device, allocating nothing) is no bigger than the weights it carries, the
    weights fit it exactly, and the model answers two frames with finite numbers.

    Raises:
        FormatError, DataError: as :func:`read_checkpoint`.
        ModelError: as :func:`read_checkpoint`, or the hyper-parameters cannot build the
            network, or its weights do not fit it.
    """
    path = resolve_checkpoint(spec)
    hp, state = _checkpoint_parts(read_checkpoint(path), path)
    weights = model_weights(state)
    _check_network_size(hp[MODEL_KEY]["network"], weights, path)
    model = _build_model(hp[MODEL_KEY], path)
    expected = model.state_dict()
    for name, value in state.items():  # named as in the file
        key = name.removeprefix(MODEL_PREFIX)
        if key in expected and value.is_floating_point() != expected[key].is_floating_point():
            raise ModelError(
                f"{path}: weight {name!r} is {str(value.dtype)[6:]}, the network "
                f"holds {str(expected[key].dtype)[6:]}"
            )
    try:
        model.load_state_dict(weights, strict=True)
    except RuntimeError as exc:
        raise ModelError(
            f"{path}: its weights do not fit the network its hyper-parameters describe "
            f"({first_line(exc)})"
        ) from exc
    model.eval()
    _check_runs(model, path)
    return model.to(device)


def model_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The model's weights among a checkpoint's ``state_dict`` (those under
    :data:`MODEL_PREFIX`, named as :class:`~rbmcap.model.regressor.PoseRegressor` names them);
    any other entry is kept under its own name, so that loading it strictly refuses it."""
    return {k.removeprefix(MODEL_PREFIX): v for k, v in state.items()}


def _check_network_size(network: dict, state: dict, path: Path) -> None:
    """ModelError unless the network the hyper-parameters describe (built on the meta device,
    with one input and one output) has no more parameters than the model's ``net.`` weights
    (``state``, named as the model names them): a garbage width or depth is refused before it
    allocates anything."""
    kwargs = {k: v for k, v in network.items() if k != "name"}
    weights = [v for k, v in state.items() if k.startswith("net.")]
    limit = max([1024, *(max(v.shape, default=0) for v in weights)])
    for key, value in kwargs.items():
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= limit:
            raise ModelError(
                f"{path}: network hyper-parameter {key}={value} is out of range "
                f"(0 to {limit} for these weights)"
            )
    try:
        with torch.device("meta"):
            net = build_network(network["name"], 1, 1, **kwargs)
    except (RBMCapError, TypeError, ValueError, AssertionError, RuntimeError) as exc:
        raise ModelError(
            f"{path}: its network hyper-parameters {_short(network)} cannot "
            f"build a network ({first_line(exc)})"
        ) from exc
    needed = sum(p.numel() for p in net.parameters())
    if needed > sum(v.numel() for v in weights):
        raise ModelError(
            f"{path}: its network hyper-parameters {_short(network)} describe a "
            f"bigger network than its weights"
        )


def _build_model(config: dict, path: Path) -> PoseRegressor:
    """The model its configuration describes (weights not yet loaded)."""
    try:
        return PoseRegressor(RegressorConfig.from_dict(config))
    # The values come from the file: any of these means they cannot make the model.
    except (
        RBMCapError,
        TypeError,
        ValueError,
        KeyError,
        IndexError,
        AttributeError,
        RuntimeError,
        OverflowError,
        ZeroDivisionError,
    ) as exc:
        raise ModelError(
            f"{path}: its hyper-parameters cannot build the model ({first_line(exc)})"
        ) from exc


def _check_runs(model, path: Path) -> None:
    """ModelError unless the model answers two frames of plates (seeded random positions, no
    rotation) with finite numbers: hyper-parameters that build a network but not one that
    runs, or weights that overflow, are refused here rather than at the first prediction."""
    n = len(model.config.markers["parents"])
    gen = torch.Generator().manual_seed(0)
    pos = 0.3 * torch.randn(1, 2, n, 3, generator=gen)
    rot = torch.eye(3).expand(1, 2, n, 3, 3)
    try:
        with torch.no_grad():
            out = model(pos, rot, torch.ones(1, 2, n, dtype=torch.bool))
    except (IndexError, RuntimeError, ValueError, TypeError, KeyError) as exc:
        raise ModelError(f"{path}: the model it holds cannot run ({first_line(exc)})") from exc
    bad = [k for k in ("rotmats", "betas", "trans") if not torch.isfinite(out[k]).all()]
    if bad:
        raise DataError(f"{path}: the model it holds answers NaN or infinite {bad[0]}")


def load_weights(model: PoseRegressor, spec: str | Path) -> Path:
    """Start ``model`` from the weights of the checkpoint ``spec`` (a path or a shipped model's
    name) to fine-tune it.

    Returns:
        the checkpoint's path.

    Raises:
        ConfigError: the checkpoint's weights do not fit ``model`` (another architecture).
        FormatError, ModelError, DataError: as :func:`read_checkpoint`.
    """
    path = resolve_checkpoint(spec)
    ckpt = read_checkpoint(path)
    was, now = ckpt["hyper_parameters"][MODEL_KEY]["features"], model.config.features
    if was != now:
        log.warning(
            "init_from=%s was trained on %s features; this run uses %s (the network "
            "relearns what differs)",
            spec,
            was,
            now,
        )
    try:
        missing, unexpected = model.load_state_dict(model_weights(ckpt["state_dict"]), strict=False)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[-1].strip()
        raise ConfigError(f"init_from={spec}: another architecture ({first})") from exc
    if missing or unexpected:
        names = ", ".join([*missing, *unexpected][:4])
        raise ConfigError(
            f"init_from={spec}: another architecture ({len(missing)} weights "
            f"missing, {len(unexpected)} unexpected: {names}, ...)"
        )
    return path


# ------------------------------------------------------------------------------------ packing
def pack(ckpt: dict[str, Any], dst: str | Path) -> Path:
    """Write ``ckpt`` (as :func:`read_checkpoint` returns it) to ``dst`` as a shipped checkpoint:
    the :data:`PACKED_KEYS` only (no optimiser, scheduler or loop state), atomically."""
    slim = {k: ckpt[k] for k in PACKED_KEYS if k in ckpt}
    slim["epoch"], slim["global_step"] = ckpt.get("epoch", 0), ckpt.get("global_step", 0)
    dst = Path(dst)
    with atomic_path(dst) as tmp:
        torch.save(slim, tmp)
    return dst
