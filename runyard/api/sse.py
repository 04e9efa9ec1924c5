"""Server-sent events answers: one framing, keep-alive and cache policy for every stream."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping

from sse_starlette import EventSourceResponse, ServerSentEvent

from runyard.runtime import Runtime
from runyard.streaming.broker import StreamEvent


def sse_response(
    runtime: Runtime, events: AsyncIterator[StreamEvent], headers: Mapping[str, str] | None = None
) -> EventSourceResponse:
    """Stream `events` as SSE with their ids (for Last-Event-ID), heartbeats, and no caching."""

    async def frames() -> AsyncIterator[ServerSentEvent]:
        async for item in events:
            yield ServerSentEvent(data=item.data, event=item.event, id=item.id)

    return EventSourceResponse(
        frames(),
        ping=runtime.settings.stream_keepalive_seconds,
        ping_message_factory=lambda: ServerSentEvent(comment="heartbeat"),
        headers={**(headers or {}), "Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
