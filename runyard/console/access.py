"""Who may open the console: under `runyard dev`, requests from this machine; otherwise an
operator credential, `Authorization: Bearer <RUNYARD_CONSOLE_TOKEN>` or (with
RUNYARD_CONSOLE_OPERATORS=true) a user the project's authenticate handler accepts with the
permission `runyard:operator`. An ordinary user of the API is never an operator: the console
shows every tenant's runs."""

from __future__ import annotations

import hmac
import ipaddress
import logging
from typing import Annotated

from fastapi import Depends, Request

from runyard.auth.handlers import authenticate, require_one_authorization
from runyard.domain.console_settings import OPERATOR_PERMISSION, ConsoleSettings
from runyard.domain.errors import ForbiddenError, UnauthorizedError

log = logging.getLogger("runyard.console")

REFUSED = (
    "the console needs an operator credential: 'Authorization: Bearer <RUNYARD_CONSOLE_TOKEN>'"
)
NOT_OPERATOR = (
    f"this user is not an operator: the authenticate handler must give them the permission "
    f"'{OPERATOR_PERMISSION}' to open the console"
)
TURN_ON = (
    "set RUNYARD_CONSOLE_TOKEN (16+ characters) to open it with that bearer token, or "
    f"RUNYARD_CONSOLE_OPERATORS=true for users your auth handler gives '{OPERATOR_PERMISSION}'"
)


def console_enabled(settings: ConsoleSettings, dev_mode: bool) -> bool:
    """Whether this instance serves the console at all: always under `runyard dev`,
    otherwise only with an operator credential configured."""
    return dev_mode or settings.console_configured


def is_loopback_peer(request: Request) -> bool:
    """True when the request comes from this machine (the TCP peer, not a header)."""
    host = request.client.host if request.client is not None else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def require_operator(request: Request) -> str:
    """The operator making this request, as logged with their actions: `dev@<peer>`,
    `console-token` or `user:<identity>`; 401 without a credential, 403 for a user who is
    no operator."""
    settings = request.app.state.settings
    require_one_authorization(request)
    if settings.dev_mode and is_loopback_peer(request):
        return "dev@loopback"
    scheme, _, given = (request.headers.get("authorization") or "").partition(" ")
    bearer = scheme.lower() == "bearer"
    token = settings.console_token
    if bearer and token is not None and hmac.compare_digest(given.encode(), token.encode()):
        return "console-token"
    if settings.console_operators:
        caller = await authenticate(request.app.state.access.auth, request)
        if caller.user is None:
            raise UnauthorizedError(REFUSED)
        if OPERATOR_PERMISSION not in caller.user.permissions:
            log.warning("console_refused user=%s reason=not_operator", caller.user.identity)
            raise ForbiddenError(NOT_OPERATOR)
        return f"user:{caller.user.identity}"
    raise UnauthorizedError(REFUSED)


Operator = Annotated[str, Depends(require_operator)]
