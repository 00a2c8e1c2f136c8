"""``Predictor``: a trained checkpoint as a plain function from RBM observations to SMPL.

Whole sequences run in overlapping chunks (each frame's answer comes from the chunk where it is
furthest from an edge), then are smoothed over time (:mod:`rbmcap.inference.smoothing`);
streams keep the last ``context`` frames and answer for the newest one, or use a causal GRU's
recurrent state. Missing plates are masked through ``valid``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import torch

from rbmcap.body.params import SMPLParams
from rbmcap.errors import DataError, FormatError, ModelError, RBMCapError
from rbmcap.inference.smoothing import DEFAULT_SIGMA_FRAMES, smooth_answer


class Predictor:
    """Inference wrapper around an :class:`rbmcap.training.module.RBMRegressor`.

    Args:
        model: the trained module; chunk: frames per chunk; overlap: frames shared by chunks.
        smoothing: σ (frames) of the zero-phase Gaussian over a whole sequence's answer
            (:func:`rbmcap.inference.smoothing.smooth_answer`; 0: the network's raw answer).
    """

    def __init__(
        self, model, chunk: int = 240, overlap: int = 60, device: str = "cpu",
        smoothing: float = DEFAULT_SIGMA_FRAMES,
    ) -> None:  # fmt: skip
        if not 0 <= 2 * overlap < chunk:
            raise ModelError(f"chunk={chunk}, overlap={overlap}: need 0 <= 2*overlap < chunk")
        if not (math.isfinite(smoothing) and smoothing >= 0):
            raise ModelError(f"smoothing={smoothing}: expected a number of frames >= 0")
        self.smoothing = float(smoothing)
        self.model = model.to(device).eval()
        self.device = torch.device(device)
        self.chunk, self.overlap = int(chunk), int(overlap)
        hp = model.hparams
        self.marker_set: str = hp["markers"]["name"]
        self.marker_names: list[str] = list(hp["markers"].get("names", []))
        self.num_markers = len(hp["markers"]["parents"])
        self.body_id: str = hp["body_id"]

    @classmethod
    def from_checkpoint(cls, path: str | Path, device: str = "cpu", **kwargs) -> Predictor:
        """Load a checkpoint written by ``train.py`` (safe loading: plain data only, see
        :func:`load_checkpoint_model`), or a pretrained model shipped with rbmcap by its name
        (e.g. ``"standin-rbm14"``; see :mod:`rbmcap.inference.pretrained`)."""
        from rbmcap.inference.pretrained import resolve_checkpoint

        path = resolve_checkpoint(path)
        return cls(load_checkpoint_model(path, device), device=device, **kwargs)

    def _check(self, pos, rot, valid):
        # copies: inputs are often read-only memory maps
        pos = torch.from_numpy(np.array(pos, dtype=np.float32))
        rot = torch.from_numpy(np.array(rot, dtype=np.float32))
        valid = torch.from_numpy(np.array(valid, dtype=bool))
        t, n = pos.shape[:2]
        if (
            pos.shape != (t, self.num_markers, 3)
            or rot.shape != (t, n, 3, 3)
            or valid.shape != (t, n)
        ):
            raise DataError(
                f"observations pos {tuple(pos.shape)}, rot {tuple(rot.shape)}, valid "
                f"{tuple(valid.shape)}: expected (T, {self.num_markers}, 3), (T, N, 3, 3), (T, N) "
                f"for marker set {self.marker_set!r}"
            )
        if t == 0:
            raise DataError("observations have no frames")
        return pos, rot, valid

    @torch.no_grad()
    def predict(
        self, pos, rot, valid, *, progress: bool = False, smoothing: float | None = None
    ) -> SMPLParams:
        """Predict a whole sequence: pos (T, N, 3) m, rot (T, N, 3, 3), valid (T, N) bool;
        ``progress`` shows a bar over the chunks on stderr; ``smoothing`` overrides the
        predictor's σ (frames) for this call.

        Returns:
            :class:`SMPLParams` (CPU float32): ``poses`` (T, 24, 3), ``betas`` (B,) averaged over
            the frames, ``trans`` (T, 3) m.
        """
        pos, rot, valid = self._check(pos, rot, valid)
        t = pos.shape[0]
        step = self.chunk - 2 * self.overlap
        starts = list(range(0, max(t - self.chunk, 0) + 1, step))
        if starts[-1] + self.chunk < t:
            starts.append(t - self.chunk)
        rotmats = torch.empty(t, 24, 3, 3)
        trans = torch.empty(t, 3)
        betas_sum, betas_n = torch.zeros(self.model.num_betas), 0
        from tqdm import tqdm

        bar = tqdm(starts, disable=not progress, unit="chunk", desc="infer", file=sys.stderr)
        for k, s in enumerate(bar):
            e = min(s + self.chunk, t)
            out = self.model(*(x[s:e][None].to(self.device) for x in (pos, rot, valid)))
            lo = s if k == 0 else max(s + self.overlap, 0)
            hi = e if k == len(starts) - 1 else e - self.overlap
            if k + 1 < len(starts):
                hi = min(hi, starts[k + 1] + self.overlap)
            rotmats[lo:hi] = out["rotmats"][0, lo - s : hi - s].cpu()
            trans[lo:hi] = out["trans"][0, lo - s : hi - s].cpu()
            betas_sum += out["betas"][0, lo - s : hi - s].sum(0).cpu()
            betas_n += hi - lo
        sigma = self.smoothing if smoothing is None else float(smoothing)
        rotmats, trans = smooth_answer(rotmats, trans, sigma)
        return SMPLParams.from_rotmats(rotmats, betas_sum / max(betas_n, 1), trans)

    def predict_capture(
        self, capture, calibration=None, *, vertices: bool = False, body=None, progress=False
    ):
        """SMPL motion of a :class:`~rbmcap.io.capture.Capture` (plates matched by name,
        optional calibration, resampled to the training rate and back; see
        :mod:`rbmcap.inference.capture`).

        Returns:
            :class:`~rbmcap.motion.smpl_motion.SMPLMotion` at the capture's fps; with
            ``vertices=True`` the pair (motion, vertices (T, V, 3) float32 metres, world Z up),
            skinned in chunks by ``body`` (default: the checkpoint's body model).
        """
        from rbmcap.inference.capture import checkpoint_body, predict_capture

        motion = predict_capture(self, capture, calibration, progress=progress)
        if not vertices:
            return motion
        from rbmcap.io.meshes import motion_vertices

        body = body if body is not None else checkpoint_body(self.body_id)
        return motion, motion_vertices(motion, body)

    def stream(self, context: int = 60, backend: str = "trace"):
        """A frame-by-frame session answering for the newest frame (bounded latency); see
        :class:`rbmcap.inference.stream.StreamSession`. ``backend`` runs a recurrent model's
        frame: ``"trace"`` (TorchScript, recorded on the first frame), ``"compiled"`` (compiled
        ahead of time into native code, the fastest: about a minute once per model, then cached;
        needs a C++ compiler) or ``"eager"``; all three answer the same to 1e-5."""
        from rbmcap.inference.stream import StreamSession

        return StreamSession(self, context, backend=backend)


# ------------------------------------------------------------------------- checkpoint loading
MAX_BETAS = 300
"""The most shape coefficients a checkpoint may predict (SMPL-X has 300)."""


def load_checkpoint_model(path: str | Path, device: str = "cpu"):
    """The :class:`~rbmcap.training.module.RBMRegressor` a checkpoint file holds, in eval mode.

    The file is read with ``torch.load(weights_only=True)`` (tensors and plain data only: no
    pickled object is ever executed), then checked before anything is built from it: its
    structure, finite weights and hyper-parameters, and (on the meta device, allocating
    nothing) a network no bigger than the weights it carries.

    Raises:
        FormatError: not a checkpoint (unreadable, corrupt, or missing its weights or
            hyper-parameters).
        ModelError: its hyper-parameters cannot build the network, or its weights do not fit it.
        DataError: a weight or hyper-parameter is NaN or infinite.
    """
    ckpt = _read_checkpoint(path)
    hp, state = _checkpoint_parts(ckpt, path)
    _check_finite(hp, state, path)
    _check_hyper_parameters(hp, path)
    _check_network_size(hp["network"], state, path)
    model = _build_model(hp, path)
    expected = model.state_dict()
    for key, value in state.items():
        if key in expected and value.is_floating_point() != expected[key].is_floating_point():
            raise ModelError(f"{path}: weight {key!r} is {str(value.dtype)[6:]}, the network "
                             f"holds {str(expected[key].dtype)[6:]}")  # fmt: skip
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ModelError(
            f"{path}: its weights do not fit the network its hyper-parameters describe "
            f"({_first_line(exc)})"
        ) from exc
    model.eval()
    _check_runs(model, path)
    return model.to(device)


def _check_runs(model, path: Path) -> None:
    """ModelError unless the model answers two frames of plates (seeded random positions, no
    rotation) with finite numbers: hyper-parameters that build a network but not one that
    runs, or weights that overflow, are refused here rather than at the first prediction."""
    n = len(model.hparams["markers"]["parents"])
    gen = torch.Generator().manual_seed(0)
    pos = 0.3 * torch.randn(1, 2, n, 3, generator=gen)
    rot = torch.eye(3).expand(1, 2, n, 3, 3)
    try:
        with torch.no_grad():
            out = model(pos, rot, torch.ones(1, 2, n, dtype=torch.bool))
    except (IndexError, RuntimeError, ValueError, TypeError, KeyError) as exc:
        raise ModelError(f"{path}: the model it holds cannot run ({_first_line(exc)})") from exc
    bad = [k for k in ("rotmats", "betas", "trans") if not torch.isfinite(out[k]).all()]
    if bad:
        raise DataError(f"{path}: the model it holds answers NaN or infinite {bad[0]}")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _read_checkpoint(path: Path) -> object:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except OSError as exc:
        raise FormatError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    # torch.load meets arbitrary bytes here: whatever its unpickler or zip reader raises on a
    # corrupt or foreign file means the same thing.
    except Exception as exc:
        raise FormatError(f"{path}: not an rbmcap checkpoint ({_first_line(exc)})") from exc


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
        raise FormatError(f"{path}: not an rbmcap checkpoint (state_dict entry {bad[0]!r} is "
                          "not a named tensor)")  # fmt: skip
    return ckpt["hyper_parameters"], state


def _check_finite(hp: dict, state: dict, path: Path) -> None:
    """DataError naming the first weight or hyper-parameter holding NaN or infinity."""
    for key, value in state.items():
        if (value.is_floating_point() or value.is_complex()) and not torch.isfinite(value).all():
            raise DataError(f"{path}: weight {key!r} has NaN or infinite values; the checkpoint "
                            "is unusable (did its training run diverge?)")  # fmt: skip
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
    """ModelError for hyper-parameters the model or the predictor cannot take: missing or
    unknown keys, and the wrong kind of value where the predictor reads them."""
    import inspect

    from rbmcap.training.module import RBMRegressor

    params = inspect.signature(RBMRegressor.__init__).parameters.values()
    names = {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
    required = {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY
                and p.default is inspect.Parameter.empty}  # fmt: skip
    missing, unknown = sorted(required - set(hp)), sorted(set(hp) - names)
    if missing or unknown:
        what = f"lacks {', '.join(missing)}" if missing else f"has unknown {', '.join(unknown)}"
        raise ModelError(f"{path}: the checkpoint's hyper-parameters {what}")
    markers, betas = hp["markers"], hp["num_betas"]
    problems = [
        (not isinstance(markers, dict) or not isinstance(markers.get("name"), str)
         or not isinstance(markers.get("parents"), list)
         or not isinstance(names := markers.get("names", []), list)
         or not all(isinstance(n, str) for n in names), "markers"),
        (not isinstance(hp["body_id"], str), "body_id"),
        (isinstance(betas, bool) or not isinstance(betas, int)
         or not 1 <= betas <= MAX_BETAS, "num_betas"),
        (not isinstance(hp["network"], dict) or not isinstance(hp["network"].get("name"), str),
         "network"),
    ]  # fmt: skip
    bad = [key for wrong, key in problems if wrong]
    if bad:
        raise ModelError(f"{path}: hyper-parameter {bad[0]!r} has an unusable value "
                         f"({_short(hp[bad[0]])})")  # fmt: skip


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_network_size(network: dict, state: dict, path: Path) -> None:
    """ModelError unless the network the hyper-parameters describe (built on the meta device,
    with one input and one output) has no more parameters than the checkpoint's ``net.``
    weights: a garbage width or depth is refused before it allocates anything."""
    from rbmcap.model.networks.registry import build_network

    kwargs = {k: v for k, v in network.items() if k != "name"}
    weights = [v for k, v in state.items() if k.startswith("net.")]
    limit = max([1024, *(max(v.shape, default=0) for v in weights)])
    for key, value in kwargs.items():
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= limit:
            raise ModelError(f"{path}: network hyper-parameter {key}={value} is out of range "
                             f"(0 to {limit} for these weights)")  # fmt: skip
    try:
        with torch.device("meta"):
            net = build_network(network["name"], 1, 1, **kwargs)
    except (RBMCapError, TypeError, ValueError, AssertionError, RuntimeError) as exc:
        raise ModelError(f"{path}: its network hyper-parameters {_short(network)} cannot "
                         f"build a network ({_first_line(exc)})") from exc  # fmt: skip
    needed = sum(p.numel() for p in net.parameters())
    if needed > sum(v.numel() for v in weights):
        raise ModelError(f"{path}: its network hyper-parameters {_short(network)} describe a "
                         f"bigger network than its weights")  # fmt: skip


def _build_model(hp: dict, path: Path):
    """The module its hyper-parameters describe (weights not yet loaded)."""
    from rbmcap.training.module import RBMRegressor

    try:
        return RBMRegressor(**hp)
    # The values come from the file: any of these means they cannot make the model.
    except (RBMCapError, TypeError, ValueError, KeyError, IndexError, AttributeError,
            RuntimeError, OverflowError, ZeroDivisionError) as exc:  # fmt: skip
        raise ModelError(f"{path}: its hyper-parameters cannot build the model "
                         f"({_first_line(exc)})") from exc  # fmt: skip
