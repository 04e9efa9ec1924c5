"""What a run created by a caller carries of its user in `configurable`, as LangGraph passes
it (read back by `runyard.domain.user.user_from_config`)."""

from __future__ import annotations

from typing import Any

from runyard.auth.handlers import Caller
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
