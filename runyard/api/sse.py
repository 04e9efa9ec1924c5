"""Server-sent events answers: one framing, keep-alive and cache policy for every stream."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

from runyard.runtime import Runtime
from runyard.streaming.broker import StreamEvent

log = logging.getLogger("runyard.api")

# A client that takes none of its stream for this long is disconnected: what waits for it
# is bounded (the subscription's buffer, then the socket's), and it resumes with
# Last-Event-ID, on any instance, whenever it reads again.
SLOW_CLIENT_SECONDS = 60.0


class _EventStream(EventSourceResponse):
    """An SSE response that hangs up on a client that stopped reading, quietly."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            log.info("sse_client_disconnected reason=not_reading seconds=%s", self.send_timeout)


def sse_response(
    runtime: Runtime, events: AsyncIterator[StreamEvent], headers: Mapping[str, str] | None = None
) -> EventSourceResponse:
    """Stream `events` as SSE with their ids (for Last-Event-ID), heartbeats, and no caching."""

    async def frames() -> AsyncIterator[ServerSentEvent]:
        # Closed with the response, not left to the garbage collector: a client that left
        # releases its subscriptions at once.
        try:
            async for item in events:
                yield ServerSentEvent(data=item.data, event=item.event, id=item.id or None)
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    return _EventStream(
        frames(),
        send_timeout=SLOW_CLIENT_SECONDS,
        ping=runtime.settings.stream_keepalive_seconds,
        ping_message_factory=lambda: ServerSentEvent(comment="heartbeat"),
        headers={**(headers or {}), "Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
