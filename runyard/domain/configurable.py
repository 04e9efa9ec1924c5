"""The keys of a run's `configurable` that only the server sets: who the run acts for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

AUTH_USER_KEY = "langgraph_auth_user"
AUTH_USER_ID_KEY = "langgraph_auth_user_id"
AUTH_PERMISSIONS_KEY = "langgraph_auth_permissions"
# A client sending these in `configurable` would impersonate a user: they are dropped.
RESERVED_CONFIGURABLE_KEYS = frozenset({AUTH_USER_KEY, AUTH_USER_ID_KEY, AUTH_PERMISSIONS_KEY})


def without_reserved(configurable: Mapping[str, Any]) -> dict[str, Any]:
    """`configurable` without the keys only the server may set."""
    return {k: v for k, v in configurable.items() if k not in RESERVED_CONFIGURABLE_KEYS}


def reserved_only(configurable: Mapping[str, Any]) -> dict[str, Any]:
    """The server-set user keys of a stored `configurable`."""
    return {k: v for k, v in configurable.items() if k in RESERVED_CONFIGURABLE_KEYS}
