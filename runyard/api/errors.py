"""Turns domain errors and validation failures into clear JSON 4xx responses."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runyard.db.faults import store_unavailable
from runyard.domain.errors import UNSTORABLE_TEXT_MESSAGE, UNSTORABLE_TEXT_SQLSTATES, RunyardError
from runyard.domain.outages import is_outage_error

log = logging.getLogger("runyard.api")

SERVER_ERROR_MESSAGE = "internal server error; the server log has the details"
BIG_INTEGER_MESSAGE = (
    "the request holds an integer outside the 64-bit range; send such numbers as strings"
)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that shape every error body as {"detail": ...}."""
    app.exception_handler(RunyardError)(_runyard_error)
    app.exception_handler(RequestValidationError)(_validation_error)
    app.exception_handler(DBAPIError)(_database_error)
    # The last resort for an error JsonServerErrors cannot catch (one in a middleware outside
    # it). Starlette calls this last and re-raises afterwards, so the traceback is logged.
    app.exception_handler(Exception)(_server_error)
    # orjson and msgpack (events, checkpoints, store values) stop at 64-bit integers.
    app.exception_handler(TypeError)(_type_error)


async def _runyard_error(_request: Request, exc: RunyardError) -> JSONResponse:
    return JSONResponse(exc.body(), status_code=exc.status_code)


async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = []
    for error in exc.errors():
        if error.get("type") == "json_invalid":
            problems.append(_json_problem(error))
            continue
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body")
        problems.append(f"{where or 'body'}: {error.get('msg')}")
    return JSONResponse(
        {"detail": "; ".join(problems), "errors": _jsonable(exc.errors())},
        status_code=422,
    )


async def _database_error(request: Request, exc: DBAPIError) -> JSONResponse:
    if _is_unstorable_text(exc):
        return JSONResponse({"detail": UNSTORABLE_TEXT_MESSAGE}, status_code=422)
    if exc.connection_invalidated or isinstance(exc, OperationalError | InterfaceError):
        return _outage(request.method, request.url.path, exc)
    raise exc  # a real server fault: the default 500, with its traceback logged


DATABASE_OUTAGE_MESSAGE = "the database is unavailable or busy; retry shortly"


def _outage(method: str, path: str, exc: BaseException) -> JSONResponse:
    """503 for a request that needed the database while it was out of reach or busy."""
    cause = getattr(exc, "orig", None) or exc
    log.warning(
        "database_unavailable method=%s path=%s error=%s", method, path, type(cause).__name__
    )
    return JSONResponse(
        {"detail": DATABASE_OUTAGE_MESSAGE}, status_code=503, headers={"Retry-After": "1"}
    )


async def _server_error(request: Request, exc: Exception) -> JSONResponse:
    if store_unavailable(exc):
        return _outage(request.method, request.url.path, exc)
    log.error(
        "request_failed method=%s path=%s error=%s",
        request.method,
        request.url.path,
        type(exc).__name__,
    )
    # The server closes the connection after an unhandled error: say so, so that a
    # client does not send its next request down it.
    return JSONResponse(
        {"detail": SERVER_ERROR_MESSAGE}, status_code=500, headers={"Connection": "close"}
    )


async def _type_error(_request: Request, exc: TypeError) -> JSONResponse:
    if str(exc) == "Integer exceeds 64-bit range":
        return JSONResponse({"detail": BIG_INTEGER_MESSAGE}, status_code=422)
    raise exc


STORE_OUTAGE_MESSAGE = "the database or Redis is unavailable or busy; retry shortly"


def is_store_outage(exc: BaseException) -> bool:
    """Whether the error is the database or Redis out of reach (retry later), not a bug."""
    if isinstance(exc, DBAPIError):
        return bool(exc.connection_invalidated) or isinstance(
            exc, OperationalError | InterfaceError
        )
    # The transport's own (Redis's connection and timeout errors), as it declared them.
    return is_outage_error(exc) or store_unavailable(exc)


def _json_problem(error: Any) -> str:
    position = error.get("loc", ("body", 0))[-1]
    reason = (error.get("ctx") or {}).get("error", "malformed")
    return f"the request body is not valid JSON: {reason} at character {position}"


def _is_unstorable_text(exc: DBAPIError) -> bool:
    if getattr(exc.orig, "sqlstate", None) in UNSTORABLE_TEXT_SQLSTATES:
        return True
    # SQLite cannot build a JSON path from a key holding NUL (metadata filters).
    return "JSON path error" in str(exc.orig)


def _jsonable(errors: object) -> object:
    import json

    return json.loads(json.dumps(errors, default=str))


class JsonServerErrors:
    """Answers an error no handler took (a bug, a failing embedder) with a JSON 500.

    Added inside the CORS middleware, so that a browser can read the answer too (Starlette's
    own last resort sits outside every middleware and answers plain text). The traceback
    goes to the log; an error once the response has begun (a stream) is left to the server.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; answer a JSON 500 if it fails before the response starts."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except ClientDisconnect:
            # The client went, or its body was late and the server closed the connection
            # (RUNYARD_BODY_TIMEOUT_SECONDS): nobody to answer, and nothing went wrong here.
            log.info("request_abandoned method=%s path=%s", scope["method"], scope["path"])
        except Exception as exc:
            if started:
                raise
            if store_unavailable(exc):
                # No connection to be had (the database refusing them, or none free in
                # time): the request may be sent again, as for a broken one (above).
                await _outage(scope["method"], scope["path"], exc)(scope, receive, send)
                return
            log.exception("request_failed method=%s path=%s", scope["method"], scope["path"])
            await JSONResponse({"detail": SERVER_ERROR_MESSAGE}, status_code=500)(
                scope, receive, send
            )
