"""`http` in langgraph.json: a project's own Starlette/FastAPI app served beside the API,
its middleware order, authentication of its routes, and the mount prefix."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi import exception_handlers as fastapi_handlers
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.routing import BaseRoute, Mount
from starlette.types import ASGIApp, Receive, Scope, Send

from runyard.auth.handlers import authenticate
from runyard.domain.errors import ConfigError
from runyard.project.config import ProjectConfig, is_module_path
from runyard.project.http_config import HttpConfig
from runyard.project.modules import import_attribute, import_module_attribute
from runyard.project.path_objects import project_file

# Where the route-level authentication leaves the caller for the API's dependency to reuse.
CALLER_SCOPE_KEY = "runyard.caller"
_FASTAPI_DEFAULT_HANDLERS = {
    fastapi_handlers.http_exception_handler,
    fastapi_handlers.request_validation_exception_handler,
    fastapi_handlers.websocket_request_validation_exception_handler,
}
Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]


def load_custom_app(project: ProjectConfig, http: HttpConfig) -> Starlette | None:
    """The app named by `http.app` (`path/to/file.py:app` or `my.module:app`), or None."""
    if http.app is None:
        return None
    target, attribute = http.app.rsplit(":", 1)
    if is_module_path(target):
        app = import_module_attribute(target, attribute, "http.app")
    else:
        file = project_file(project, target)
        app = import_attribute(file, attribute, "runyard_http", "http.app")
    if not isinstance(app, Starlette):
        raise ConfigError(
            f"http.app: {http.app} is a {type(app).__name__}; it must be a Starlette or "
            "FastAPI application (app = FastAPI() or app = Starlette(routes=[...]))"
        )
    return app


class RouteAuthentication:
    """Runs the project's authenticate handler before a route, as LangGraph's auth middleware.

    The user lands where Starlette puts it (`request.user`, `request.auth`); a refusal is
    the same 401/403 the API answers.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or CALLER_SCOPE_KEY in scope:
            await self.app(scope, receive, send)
            return
        access = scope["app"].state.access
        caller = await authenticate(access.auth, Request(scope, receive))
        scope[CALLER_SCOPE_KEY] = caller
        if caller.user is not None:
            scope["user"] = caller.user
            scope["auth"] = AuthCredentials(list(caller.user.permissions))
        await self.app(scope, receive, send)


def wrap_routes(routes: list[BaseRoute], middleware: list[Middleware]) -> None:
    """Put `middleware` (first = outermost) around each route's own app, in place."""
    for route in routes:
        app = getattr(route, "app", None)
        if app is None:
            raise ConfigError(f"http.app: route {route!r} has no app to put middleware around")
        for cls, args, kwargs in reversed(middleware):
            app = cls(app, *args, **kwargs)
        route.app = app  # type: ignore[attr-defined]


def merge_custom_app(
    app: FastAPI,
    custom: Starlette,
    http: HttpConfig,
    meta_first: list[BaseRoute],
    meta_after: list[BaseRoute],
    protected: list[BaseRoute],
) -> None:
    """Serve the custom app's routes beside the API, in LangGraph's order.

    Runyard's probes, /metrics and docs first (a custom route cannot hide them), then the
    custom routes, then /info (which a custom route may replace), then the API.
    """
    user_routes = list(custom.router.routes)
    user_middleware = list(custom.user_middleware)
    auth = [Middleware(RouteAuthentication)] if http.enable_custom_route_auth else []
    if http.middleware_order == "auth_first":
        # The project's middleware moves from the app to each route, inside authentication.
        wrap_routes(user_routes, [*auth, *user_middleware])
        wrap_routes(protected, [Middleware(RouteAuthentication), *user_middleware])
        wrap_routes([*meta_first, *meta_after], user_middleware)
    else:
        wrap_routes(user_routes, auth)
        # Innermost of the app's middleware: before authentication, which runs in the route.
        app.user_middleware.extend(user_middleware)
    app.router.routes[:] = [*meta_first, *user_routes, *meta_after, *protected]
    for key, handler in custom.exception_handlers.items():
        if handler not in _FASTAPI_DEFAULT_HANDLERS:
            app.exception_handlers[key] = handler
    # The custom routes read `request.app.state` as their own app's (Runyard's own parts go
    # on it when the instance starts).
    app.state = custom.state


def custom_lifespan(custom: Starlette | None) -> Lifespan | None:
    """The custom app's lifespan, entered after Runyard's parts have started."""
    if custom is None:
        return None

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[Any]:
        async with custom.router.lifespan_context(custom) as state:
            yield state

    return lifespan


def mount_under_prefix(app: FastAPI, prefix: str, root_routes: list[BaseRoute]) -> FastAPI:
    """An app serving `app` under `prefix`, with the health probes still at the root."""
    outer = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    outer.router.lifespan_context = app.router.lifespan_context
    outer.state = app.state
    outer.router.routes[:] = [*root_routes, Mount(prefix, app=app)]
    return outer
