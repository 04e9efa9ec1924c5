"""Loads the project's `Auth` object and calls its authenticate and authorization handlers."""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph_sdk import Auth
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from runyard.domain.auth_filters import AuthFilterError, check_filter
from runyard.domain.errors import ConfigError, ForbiddenError, RunyardError, UnauthorizedError
from runyard.domain.user import AuthUser
from runyard.project.config import ProjectConfig
from runyard.project.path_objects import load_path_object
from runyard.sdk_handlers import AuthHandlers, auth_handlers

log = logging.getLogger("runyard.auth")

Filter = dict[str, Any]
BodyT = TypeVar("BodyT", bound=BaseModel)


class AuthError(RunyardError):
    """An error raised by a handler through `Auth.exceptions.HTTPException`."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True)
class Caller:
    """Who sends a request and the handlers that decide what they may do."""

    user: AuthUser | None
    auth: AuthHandlers | None

    async def authorize(self, resource: str, action: str, value: dict[str, Any]) -> Filter | None:
        """Run the most specific handler: None allows, a dict filters, False → ForbiddenError.

        Handlers may mutate `value` (stamp metadata, rewrite a store namespace).
        """
        if self.auth is None or self.user is None:
            return None
        handler = _handler_for(self.auth, resource, action)
        if handler is None:
            return None
        ctx = Auth.types.AuthContext(
            resource=resource,  # type: ignore[arg-type]
            action=action,  # type: ignore[arg-type]
            user=self.user,  # type: ignore[arg-type]
            permissions=list(self.user.permissions),
        )
        try:
            result = await handler(ctx=ctx, value=value)
        except Auth.exceptions.HTTPException as exc:
            raise AuthError(str(exc.detail), exc.status_code) from None
        except AssertionError as exc:
            raise ForbiddenError(str(exc) or "forbidden") from None
        if result is None or result is True:
            return None
        if result is False:
            raise ForbiddenError(f"{action} on {resource} is not allowed for this user")
        if not isinstance(result, dict):
            raise ConfigError(
                f"the auth handler for {resource}.{action} returned a {type(result).__name__}; "
                "expected None, True, False or a filter dict"
            )
        if result:
            _check_returned_filter(handler, resource, action, result)
        return result or None


def sent_copy(value: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a value before the handlers see it, to tell what they changed."""
    return copy.deepcopy(dict(value))


def rewritten(
    body: BodyT, sent: Mapping[str, Any], value: Mapping[str, Any], fields: Sequence[str]
) -> BodyT:
    """The body with the `fields` the handlers changed in `value` (`sent`: before them).

    LangGraph stores an object as its create and update handlers leave the value (an owner
    stamped in the metadata, say), so Runyard does too.
    """
    changes = {name: value[name] for name in fields if value.get(name) != sent.get(name)}
    if not changes:
        return body
    try:
        return type(body).model_validate({**body.model_dump(exclude_unset=True), **changes})
    except ValidationError as exc:
        raise ConfigError(
            f"an auth handler changed {', '.join(sorted(changes))} into something this request "
            f"cannot carry: {exc.errors()[0]['msg']}"
        ) from None


def _check_returned_filter(handler: Any, resource: str, action: str, result: Filter) -> None:
    """Refuse a filter Runyard cannot apply, naming the handler: never match nothing or all."""
    try:
        check_filter(result)
    except AuthFilterError as exc:
        name = getattr(handler, "__qualname__", repr(handler))
        log.error(
            "auth_filter_invalid handler=%s resource=%s action=%s operator=%s error=%s",
            name,
            resource,
            action,
            exc.operator,
            exc.message,
        )
        raise AuthFilterError(
            f"the auth handler {name} ({resource}.{action}) returned a filter Runyard cannot "
            f"apply: {exc.message}",
            exc.operator,
        ) from None


def load_auth(project: ProjectConfig) -> AuthHandlers | None:
    """The handlers of the `Auth` object `auth.path` names in the config, or None (the server
    open to anyone)."""
    handlers = declared_handlers(project)
    path = (project.auth or {}).get("path")
    if handlers is None:
        log.warning("auth_disabled reason=no_auth_path the server answers anyone who can reach it")
    elif handlers.authenticate is None:
        log.warning(
            "auth_without_authenticate path=%s every request is anonymous: "
            "register an @auth.authenticate handler to tell callers apart",
            path,
        )
    else:
        log.info("auth_enabled path=%s", path)
    return handlers


def declared_handlers(project: ProjectConfig) -> AuthHandlers | None:
    """The handlers of the `Auth` object `auth.path` names (imported), None without one."""
    loaded = load_path_object(project, "auth", Auth)
    return auth_handlers(loaded[0]) if loaded is not None else None


async def authenticate(auth: AuthHandlers | None, request: Request) -> Caller:
    """Run the authenticate handler with the arguments it declares; UnauthorizedError if refused."""
    require_one_authorization(request)
    handler = auth.authenticate if auth is not None else None
    if handler is None:
        return Caller(None, auth)
    wanted = inspect.signature(handler).parameters
    offered = _request_arguments(request)
    try:
        result = await handler(**{name: offered[name] for name in wanted if name in offered})
    except Auth.exceptions.HTTPException as exc:
        raise AuthError(str(exc.detail), exc.status_code) from None
    user = _normalise_user(result)
    if user is None:
        raise UnauthorizedError("authentication failed: send valid credentials")
    return Caller(user, auth)


def require_one_authorization(request: Request) -> None:
    """Refuse a request with more than one Authorization header: a proxy that reads the first
    and a handler that reads the last would each check different credentials."""
    headers = request.scope.get("headers", ())
    if sum(1 for name, _ in headers if name == b"authorization") > 1:
        raise RunyardError("the request has more than one Authorization header; send exactly one")


def _request_arguments(request: Request) -> dict[str, Any]:
    authorization = request.headers.get("authorization")
    return {
        "request": request,
        "path": request.url.path,
        "method": request.method,
        "path_params": dict(request.path_params),
        "query_params": request.query_params,
        "headers": dict(request.scope.get("headers", [])),
        "authorization": authorization,
        "scope": request.scope,
    }


def _normalise_user(result: Any) -> AuthUser | None:
    if result is None:
        return None
    if isinstance(result, str):
        return AuthUser(identity=result, display_name=result)
    if isinstance(result, Mapping):
        identity = result.get("identity")
        extra = {k: v for k, v in result.items() if k != "identity"}
    else:
        identity = getattr(result, "identity", None)
        extra = {}
    if not identity:
        return None
    get = result.get if isinstance(result, Mapping) else lambda k, d: getattr(result, k, d)
    return AuthUser(
        identity=str(identity),
        display_name=str(get("display_name", identity)),
        permissions=tuple(get("permissions", ()) or ()),
        is_authenticated=bool(get("is_authenticated", True)),
        extra=extra,
    )


def _handler_for(auth: AuthHandlers, resource: str, action: str) -> Any:
    """The most specific handler, as LangGraph picks it: the resource and action, the
    resource, the action, then `@auth.on`."""
    for key in ((resource, action), (resource, "*"), ("*", action)):
        if key in auth.by_action:
            return auth.by_action[key]
    return auth.fallback
