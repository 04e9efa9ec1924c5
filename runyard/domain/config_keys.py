"""One check for every object of langgraph.json whose keys Runyard reads: a key it would not
read stops start-up, named with the keys it does read (a typo must not be silently dropped)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from runyard.domain.errors import ConfigError


def refuse_unknown_keys(
    source: object, where: str, value: Mapping[str, Any], known: Iterable[str]
) -> None:
    """ConfigError naming the first key of the object `where` (in `source`, the config file,
    when known) that is not in `known`."""
    supported = sorted(known)
    unknown = sorted(set(value) - set(supported))
    if unknown:
        prefix = f"{source}: " if source else ""
        raise ConfigError(
            f"{prefix}{where}.{unknown[0]} is not supported by Runyard; supported keys of "
            f"'{where}': " + ", ".join(supported)
        )
