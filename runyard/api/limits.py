"""Request body size limit: a clear 413 before an oversized body is read into memory."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# How much of an oversized body is read (and dropped) so the client sees the 413.
DRAIN_FACTOR = 2


class BodyTooLarge(HTTPException):
    """The request body exceeds RUNYARD_MAX_BODY_BYTES (rendered as 413 {"detail": ...})."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, body_limit_message(limit))


def body_limit_message(limit: int) -> str:
    """What a client reads when its body is too large."""
    return (
        f"request body is larger than the limit of {limit} bytes "
        "(RUNYARD_MAX_BODY_BYTES); send less data, e.g. smaller inputs or metadata"
    )


class BodySizeLimitMiddleware:
    """Refuses bodies over `limit` bytes: at once from Content-Length, else while reading.

    Before answering, the rest of the body is read and dropped (up to DRAIN_FACTOR times
    the limit): a server that closes on unread data resets the connection, and most
    clients then report a connection error instead of the 413.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length, then count what is actually received."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _drain(receive, self.limit * DRAIN_FACTOR)
            await _reject(send, self.limit)
            return
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    if message.get("more_body", False):
                        await _drain(receive, self.limit * DRAIN_FACTOR)
                    # FastAPI re-raises HTTPException from body parsing, so this becomes
                    # the 413 response rather than a generic 400.
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, counting_receive, send)


async def _drain(receive: Receive, budget: int) -> None:
    """Read and drop the rest of the body, giving up after `budget` bytes."""
    while budget > 0:
        message = await receive()
        if message["type"] != "http.request":
            return
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _reject(send: Send, limit: int) -> None:
    body = json.dumps({"detail": body_limit_message(limit)}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
