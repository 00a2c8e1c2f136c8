"""Build a sequence network by name, as configuration refers to it.

The networks' hyper-parameters have no defaults in code: the reference values are written once,
in the packaged ``rbmcap/conf/model/<name>.yaml`` files.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import partial
from typing import Any

from rbmcap.errors import ConfigError
from rbmcap.model.networks.base import SequenceNetwork
from rbmcap.model.networks.gru import BiGRU, CausalGRU
from rbmcap.model.networks.mlp import ResidualMLP
from rbmcap.model.networks.transformer import RelPosTransformer

NETWORKS: dict[str, Callable[..., SequenceNetwork]] = {
    "mlp": ResidualMLP,
    "bigru": BiGRU,
    "transformer": partial(RelPosTransformer, causal=False),
    "causal_transformer": partial(RelPosTransformer, causal=True),
    "causal_gru": CausalGRU,
}


def _hyper_parameters(factory: Callable[..., SequenceNetwork]) -> list[str]:
    cls = factory.func if isinstance(factory, partial) else factory
    fixed = factory.keywords if isinstance(factory, partial) else {}
    return [
        p.name
        for p in inspect.signature(cls).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in fixed
    ]


def build_network(name: str, in_dim: int, out_dim: int, **kwargs: Any) -> SequenceNetwork:
    """Instantiate the network called ``name`` with its hyper-parameters.

    Names: ``mlp`` (:class:`ResidualMLP`), ``bigru`` (:class:`BiGRU`), ``transformer`` and
    ``causal_transformer`` (:class:`RelPosTransformer` without / with the causal mask),
    ``causal_gru`` (:class:`CausalGRU`).

    Args:
        name: registry name.
        in_dim: features per frame.
        out_dim: outputs per frame.
        **kwargs: every one of the network's keyword hyper-parameters (the packaged
            ``rbmcap/conf/model/<name>.yaml`` holds the reference values).

    Returns:
        A network mapping (B, T, in_dim) to (B, T, out_dim); ``is_causal`` tells whether it can run
        on a live stream.

    Raises:
        ConfigError: unknown name, unknown or missing hyper-parameter, or an invalid value.
    """
    try:
        factory = NETWORKS[name]
    except KeyError:
        raise ConfigError(f"unknown network {name!r}; known: {', '.join(NETWORKS)}") from None
    accepted = _hyper_parameters(factory)
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ConfigError(
            f"network {name!r} has no hyper-parameter {', '.join(unknown)}; "
            f"it accepts: {', '.join(accepted)}"
        )
    missing = [p for p in accepted if p not in kwargs]
    if missing:
        raise ConfigError(f"network {name!r} needs hyper-parameter {', '.join(missing)}")
    return factory(in_dim, out_dim, **kwargs)
