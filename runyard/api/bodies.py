"""Request bodies are JSON whatever Content-Type the client declares, as LangGraph reads them."""

from __future__ import annotations

from starlette.requests import Request

JSON_TYPE = b"application/json"
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
