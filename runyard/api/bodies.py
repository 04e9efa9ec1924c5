"""Request bodies are JSON whatever Content-Type the client declares, as LangGraph reads them."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

JSON_TYPE = b"application/json"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class JsonBodyMiddleware:
    """Declares every request body JSON before the routes parse it.

    Every Runyard route that takes a body takes JSON, and LangGraph's server parses the body
    whatever its declared type. Clients rely on that: `fetch` with a string body sends
    `text/plain;charset=UTF-8` (the Next.js passthrough of Agent Chat UI does), `curl -d`
    sends a form type. FastAPI reads such a body as bytes and refuses it as "not a dict";
    declaring it JSON here makes one place decide, for every route. A body that is not JSON
    still fails to parse and gets the 422 every malformed body gets.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Declare the body of a POST/PUT/PATCH/DELETE request JSON, then pass it on."""
        if scope["type"] == "http" and scope["method"] in BODY_METHODS:
            headers = list(scope.get("headers", ()))
            declared = [value for name, value in headers if name == b"content-type"]
            if not declared or not all(_is_json(value) for value in declared):
                scope = dict(scope)
                scope["headers"] = [
                    *(item for item in headers if item[0] != b"content-type"),
                    (b"content-type", JSON_TYPE),
                ]
        await self.app(scope, receive, send)


def _is_json(content_type: bytes) -> bool:
    media_type = content_type.split(b";", 1)[0].strip().lower()
    return media_type == JSON_TYPE or media_type.endswith(b"+json")
