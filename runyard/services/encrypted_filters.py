"""Searches and filters cannot look into encrypted JSON keys: they are refused, not empty."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runyard.domain.errors import InvalidInputError

if TYPE_CHECKING:
    from runyard.encryption.at_rest import AtRest


def refuse_encrypted_keys(at_rest: AtRest | None, **filters: Any) -> None:
    """A 422 naming the filter and key when a filter names a key LANGGRAPH_AES_JSON_KEYS
    encrypts (its stored value is ciphertext, so it could never match)."""
    if at_rest is None:
        return
    for field, spec in filters.items():
        named = at_rest.json.encrypted_keys_in(spec) if spec else []
        if named:
            keys = ", ".join(repr(key) for key in named)
            raise InvalidInputError(
                f"{field} filter on {keys}: encrypted at rest (LANGGRAPH_AES_JSON_KEYS), "
                "so it cannot be searched or filtered on; filter on another key"
            )
