"""The authenticated user as a run carries it: in `configurable`, as LangGraph passes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runyard.auth.handlers import AuthUser, Caller

AUTH_USER_KEY = "langgraph_auth_user"
AUTH_USER_ID_KEY = "langgraph_auth_user_id"
AUTH_PERMISSIONS_KEY = "langgraph_auth_permissions"
# Set by the server only: a client sending them in `configurable` would impersonate a user.
RESERVED_CONFIGURABLE_KEYS = frozenset({AUTH_USER_KEY, AUTH_USER_ID_KEY, AUTH_PERMISSIONS_KEY})


def caller_configurable(caller: Caller) -> dict[str, Any]:
    """What a run created by this caller carries in `configurable` (nothing without auth)."""
    if caller.auth is None or caller.user is None:
        return {}
    user = caller.user
    return {
        AUTH_USER_KEY: user.as_dict(),
        AUTH_USER_ID_KEY: user.identity,
        AUTH_PERMISSIONS_KEY: list(user.permissions),
    }


def without_reserved(configurable: Mapping[str, Any]) -> dict[str, Any]:
    """`configurable` without the keys only the server may set."""
    return {k: v for k, v in configurable.items() if k not in RESERVED_CONFIGURABLE_KEYS}


def reserved_only(configurable: Mapping[str, Any]) -> dict[str, Any]:
    """The server-set user keys of a stored `configurable`."""
    return {k: v for k, v in configurable.items() if k in RESERVED_CONFIGURABLE_KEYS}


def user_from_config(configurable: Mapping[str, Any]) -> AuthUser | None:
    """The user a stored run carries, as an object nodes read like LangGraph's BaseUser
    (`user.identity`, `user["identity"]`, `user.permissions`)."""
    stored = configurable.get(AUTH_USER_KEY)
    if isinstance(stored, AuthUser):
        return stored
    if not isinstance(stored, Mapping) or not stored.get("identity"):
        return None
    extra = {
        k: v
        for k, v in stored.items()
        if k not in ("identity", "display_name", "permissions", "is_authenticated")
    }
    return AuthUser(
        identity=str(stored["identity"]),
        display_name=str(stored.get("display_name") or stored["identity"]),
        permissions=tuple(stored.get("permissions") or ()),
        is_authenticated=bool(stored.get("is_authenticated", True)),
        extra=extra,
    )
