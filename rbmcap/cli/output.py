"""How sub-commands print a mapping of facts: one JSON object, or one ``key: value`` line each."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def print_mapping(info: Mapping[str, Any], as_json: bool) -> None:
    """Print ``info`` as one JSON object (``as_json``) or as one ``key: value`` line per key."""
    if as_json:
        print(json.dumps(info))
        return
    for key, value in info.items():
        print(f"{key}: {value}")
