"""The authenticated user as a run carries it: in `configurable`, as LangGraph passes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runyard.auth.handlers import AuthUser, Caller
from runyard.domain.configurable import AUTH_PERMISSIONS_KEY, AUTH_USER_ID_KEY, AUTH_USER_KEY


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
