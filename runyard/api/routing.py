"""Routes as the OpenAPI document describes them: JSON bodies, literal paths first, honest 405s."""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runyard.api.bodies import as_json_request, refuse_unbounded_body

# The routes that speak JSON-RPC, and the HTTP status their transport answers a refused
# request with (MCP's streamable HTTP a 400, A2A's JSON-RPC binding a 200).
JSON_RPC_ROUTES = {"/mcp": 400, "/a2a/{assistant_id}": 200}


class ProtocolRoute(APIRoute):
    """A route of the Agent Protocol: bodies read as JSON whatever their declared type, and
    path parameters that never capture a literal segment of another route.

    `PATCH /threads/search` must answer 405 (the path takes only POST), not be read as
    `PATCH /threads/{thread_id}` with the id "search" and answered 422; likewise
    `/threads/{id}/runs/crons` is never the run "crons".
    """

    shadowing: tuple[re.Pattern[str], ...] = ()

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, given the request with its body declared JSON."""
        handler = super().get_route_handler()
        json_rpc_status = JSON_RPC_ROUTES.get(self.path)

        async def json_bodied(request: Request) -> Response:
            request = as_json_request(request)
            refusal = await refuse_unbounded_body(request, json_rpc_status)
            return refusal if refusal is not None else await handler(request)

        return json_bodied

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        """Starlette's match, refused when a more literal route of the app takes the path;
        `HEAD` matches wherever `GET` does."""
        match, child = super().matches(scope)
        if match is not Match.NONE and self.shadowing:
            concrete = self.path_format.format(**child.get("path_params", {}))
            if any(pattern.match(concrete) for pattern in self.shadowing):
                return Match.NONE, {}
        if match is Match.PARTIAL and self._head_of_get(scope):
            return Match.FULL, child
        return match, child

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The route's answer; to `HEAD`, the `GET`'s status and headers without a body."""
        if self._head_of_get(scope):
            await answer_head(self.app, scope, receive, send)
        else:
            await super().handle(scope, receive, send)

    def _head_of_get(self, scope: Scope) -> bool:
        return scope.get("method") == "HEAD" and "GET" in (self.methods or ())


async def answer_head(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer `HEAD` as LangGraph's server does: what `GET` answers, status and headers (its
    content-length too), with no body. The `GET` is stopped once its headers are out, as if
    the client had left: a stream is not followed to its end."""
    async with anyio.create_task_group() as group:

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.start":
                await send(message)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                group.cancel_scope.cancel()

        await app(scope, receive, headers_only)


def reserve_literal_paths(app: FastAPI) -> None:
    """Give every parameterised route the patterns of the routes more literal than it."""
    routes = [route for route in app.router.routes if isinstance(route, ProtocolRoute)]
    for route in routes:
        if route.param_convertors:
            route.shadowing = tuple(
                other.path_regex for other in routes if _more_literal(other.path, route.path)
            )


def _more_literal(path: str, than: str) -> bool:
    """Whether `path` has a literal segment wherever it differs from `than`'s parameters."""
    mine, theirs = path.split("/"), than.split("/")
    if len(mine) != len(theirs) or mine == theirs:
        return False
    narrower = False
    for segment, other in zip(mine, theirs, strict=True):
        if other.startswith("{"):
            narrower |= not segment.startswith("{")
        elif segment != other:
            return False
    return narrower


def install_method_not_allowed(app: FastAPI) -> None:
    """405 answers list in `Allow` every method of every route on the path, not only one's;
    a body that is not UTF-8 is a 422 like every other body that is not JSON."""

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        headers = dict(exc.headers or {})
        detail: Any = exc.detail
        if exc.status_code == 400 and isinstance(exc.__cause__, UnicodeDecodeError):
            # FastAPI's answer to a body that is not UTF-8 text; like any non-JSON body, 422.
            reason = exc.__cause__.reason
            return JSONResponse(
                {"detail": f"the request body is not valid JSON: not UTF-8 text ({reason})"},
                status_code=422,
            )
        if exc.status_code == 405:
            methods = _methods_on_path(app, request.scope)
            allowed = sorted(methods | ({"HEAD"} if "GET" in methods else set()))
            headers["Allow"] = ", ".join(allowed)
            detail = (
                f"{request.method} is not allowed on {request.url.path}; use {' or '.join(allowed)}"
            )
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=headers)


def _methods_on_path(app: FastAPI, scope: Scope) -> set[str]:
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return methods
