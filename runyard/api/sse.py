"""Server-sent events answers: one framing, keep-alive and cache policy for every stream."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Mapping, Sequence

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

from runyard.runtime import Runtime
from runyard.streaming.broker import StreamEvent
from runyard.streaming.sse_frames import sse_frame

log = logging.getLogger("runyard.api")

# A client that takes none of its stream for this long is disconnected: what waits for it
# is bounded (the subscription's buffer, then the socket's), and it resumes with
# Last-Event-ID, on any instance, whenever it reads again.
SLOW_CLIENT_SECONDS = 60.0
# Each stream's keep-alive period is the setting less up to this share of it, drawn at random:
# streams opened together (hundreds of clients joining one thread) would otherwise send their
# heartbeats at the same moments, a burst every period that delays everything else.
KEEPALIVE_SPREAD = 0.2


class _EventStream(EventSourceResponse):
    """An SSE response that hangs up on a client that stopped reading, quietly."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            log.info("sse_client_disconnected reason=not_reading seconds=%s", self.send_timeout)


def sse_response(
    runtime: Runtime,
    events: AsyncIterator[StreamEvent] | AsyncIterator[Sequence[StreamEvent]],
    headers: Mapping[str, str] | None = None,
) -> EventSourceResponse:
    """Stream `events` as SSE with their ids (for Last-Event-ID), heartbeats, and no caching.

    `events` may yield batches: a batch goes out in one write. A stream with many
    subscribers (a thread's) wakes each of them once per batch, and one write per
    subscriber costs far less than one per event (every write crosses the middleware).
    """

    async def frames() -> AsyncIterator[ServerSentEvent | bytes]:
        # Closed with the response, not left to the garbage collector: a client that left
        # releases its subscriptions at once.
        try:
            async for item in events:
                if isinstance(item, StreamEvent):
                    yield _frame(item)
                else:
                    yield "".join(map(sse_frame, item)).encode()
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

    return _EventStream(
        frames(),
        send_timeout=SLOW_CLIENT_SECONDS,
        ping=runtime.settings.stream_keepalive_seconds * (1 - KEEPALIVE_SPREAD * random.random()),
        ping_message_factory=lambda: ServerSentEvent(comment="heartbeat"),
        headers={**(headers or {}), "Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _frame(event: StreamEvent) -> ServerSentEvent:
    return ServerSentEvent(data=event.data, event=event.event, id=event.id or None)
