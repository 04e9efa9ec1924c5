"""Request bodies are JSON whatever Content-Type the client declares, as LangGraph reads them,
and within the JSON bound before any route reads them."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse, Response
from starlette.requests import Request

from runyard.domain.json_bounds import JsonBoundError, check_json_text

JSON_TYPE = b"application/json"
JSON_RPC_INVALID_PARAMS = -32602
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def as_json_request(request: Request) -> Request:
    """The request, its body declared JSON if it was declared anything else (or nothing).

    Every route of the Agent Protocol takes JSON, and LangGraph's server parses the body
    whatever its declared type. Clients rely on that: `fetch` with a string body sends
    `text/plain;charset=UTF-8` (the Next.js passthrough of Agent Chat UI does), `curl -d`
    sends a form type. FastAPI reads such a body as bytes and refuses it as "not a dict".
    A body that is not JSON still fails to parse and gets the 422 every malformed body gets.
    Only Runyard's own routes are treated so: a custom `http.app` reads forms as forms.
    """
    if request.method not in BODY_METHODS:
        return request
    headers = list(request.scope.get("headers", ()))
    declared = [value for name, value in headers if name == b"content-type"]
    if declared and all(_is_json(value) for value in declared):
        return request
    scope = dict(request.scope)
    scope["headers"] = [
        *(item for item in headers if item[0] != b"content-type"),
        (b"content-type", JSON_TYPE),
    ]
    return Request(scope, request.receive)


def _is_json(content_type: bytes) -> bool:
    media_type = content_type.split(b";", 1)[0].strip().lower()
    return media_type == JSON_TYPE or media_type.endswith(b"+json")


async def refuse_unbounded_body(request: Request, json_rpc_status: int | None) -> Response | None:
    """The refusal of a body outside the JSON bound (see `runyard.domain.json_bounds`), before
    any route reads it; None if it is in bound or not JSON (the route refuses that itself).

    Every route that stores what it is sent is behind this one check. On a JSON-RPC route the
    refusal is a JSON-RPC error (answered with `json_rpc_status`), elsewhere a 422 naming the
    field (raised, for the error handlers to shape)."""
    if request.method not in BODY_METHODS:
        return None
    body = await request.body()
    if not body:
        return None
    try:
        check_json_text(body)
    except ValueError:
        return None
    except JsonBoundError as exc:
        if json_rpc_status is None:
            raise
        answer = json_rpc_invalid_params(request_id_of(body), exc.message)
        return JSONResponse(answer, status_code=json_rpc_status)
    return None


def json_rpc_invalid_params(request_id: Any, message: str) -> dict[str, Any]:
    """The JSON-RPC error (-32602) that refuses a request's params, `message` naming the field."""
    error = {"code": JSON_RPC_INVALID_PARAMS, "message": message}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def request_id_of(body: bytes) -> Any:
    """The id of a JSON-RPC request, if it can be read (a text too deep for a parser has none)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, str | int) else None
