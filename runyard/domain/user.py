"""The authenticated user: shaped like LangGraph's BaseUser for handlers and nodes to read,
and as a run carries it in `configurable`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runyard.domain.configurable import AUTH_USER_KEY


@dataclass(frozen=True)
class AuthUser:
    """The authenticated user, shaped like LangGraph's BaseUser for handlers to read."""

    identity: str
    display_name: str
    permissions: Sequence[str] = ()
    is_authenticated: bool = True
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.as_dict()

    def as_dict(self) -> dict[str, Any]:
        """The user as the dict a handler returned (plus the normalised fields)."""
        return {
            **self.extra,
            "identity": self.identity,
            "display_name": self.display_name,
            "permissions": list(self.permissions),
            "is_authenticated": self.is_authenticated,
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
