"""Server-sent events answers: one framing, keep-alive and cache policy for every stream.

`EventStream` is the ASGI response every stream answers with. A thread's streams may have
hundreds of subscribers that sit idle for hours, so each costs little: the request's own
task listens for the disconnect and sends the keep-alives, and one more task writes the
events. Either one ending (the client left, the events ended, the server is shutting down,
a write the client did not take in time) ends the other at once, and the event iterator is
closed, releasing its subscriptions.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol

from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from runyard.streaming.broker import StreamEvent
from runyard.streaming.closing import STREAMS_CLOSING, StreamsClosing
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
# How often a writer that outlived its cancellation is cancelled again. asyncio cancels
# once, and code that swallows it (`asyncio.wait_for` in Python 3.11 does when the wait
# completes at the same moment) would keep a stream following its run after its client left.
RECANCEL_SECONDS = 0.1


class Chunks(Protocol):
    """What a stream sends: SSE text, encoded, and a way to release what it holds."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None:
        """Release what the chunks hold (subscriptions); called once the stream ends."""


class EventStream(Response):
    """An SSE answer: the headers, then each chunk `chunks` yields, with keep-alive comments
    every `keepalive_seconds`, until the chunks end, the client leaves or stops reading
    (a write it has not taken in `send_timeout` seconds), or the server shuts down.

    Only the request's own task ends the body, and only once the writer has ended: no
    keep-alive and no chunk can follow the end, whatever order the event loop takes when
    the events end, a keep-alive comes due and the server shuts down at the same moment.
    """

    # None, as on Response: FastAPI reads it to describe the route (a plain-text body
    # schema otherwise); the header is set per answer.
    media_type = None

    def __init__(
        self,
        chunks: Chunks,
        *,
        keepalive_seconds: float,
        keepalive: bytes,
        headers: Mapping[str, str] | None = None,
        send_timeout: float | None = None,
        status_code: int = 200,
    ) -> None:
        self.status_code = status_code
        self.background = None
        self.chunks = chunks
        self.keepalive_seconds = keepalive_seconds
        self.keepalive = keepalive
        self.send_timeout = send_timeout
        fields = MutableHeaders(headers=dict(headers or {}))
        fields.setdefault("Cache-Control", "no-store")
        fields["Connection"] = "keep-alive"
        fields["X-Accel-Buffering"] = "no"
        fields["Content-Type"] = "text/event-stream; charset=utf-8"
        self.init_headers(fields)
        self._stopped = False
        # The client left or stopped reading: nothing more can be sent, not even the end.
        self._broken = False
        self._deadline: asyncio.Timeout | None = None
        self._send_lock = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream; a HEAD request gets the headers only (the stream never starts)."""
        start = {"type": "http.response.start", "status": self.status_code}
        if scope["method"] == "HEAD":
            await self.chunks.aclose()
            await send({**start, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        await send({**start, "headers": self.raw_headers})
        closing: StreamsClosing | None = scope.get("state", {}).get(STREAMS_CLOSING)
        writer = asyncio.create_task(self._write(send), name="sse-writer")
        writer.add_done_callback(self._writer_done)
        if closing is not None:
            closing.watch(self._stop)
            self._stopped = self._stopped or closing.closed
        try:
            await self._listen(receive, send)
        finally:
            if closing is not None:
                closing.forget(self._stop)
            try:
                await _cancelled(writer)
            finally:
                # Here, not in the writer: a writer cancelled before it ran never closes them.
                await self.chunks.aclose()
        if not self._broken:
            # The one end of the body, after the writer and the keep-alives: the client sees
            # the stream end (events over, or the server shutting down), not a cut connection.
            await self._send(send, b"", more=False)

    def _writer_done(self, _: asyncio.Task[None]) -> None:
        self._stop()

    def _stop(self) -> None:
        """Wake the listener so that it ends the stream."""
        self._stopped = True
        # A deadline already passed wakes the listener by itself (and cannot be moved).
        if self._deadline is not None and not self._deadline.expired():
            self._deadline.reschedule(asyncio.get_running_loop().time())

    async def _write(self, send: Send) -> None:
        async for chunk in self.chunks:
            if self._stopped or not await self._send(send, chunk, more=True):
                return

    async def _listen(self, receive: Receive, send: Send) -> None:
        """Wait for the client's disconnect, sending keep-alives meanwhile, until stopped."""
        loop = asyncio.get_running_loop()
        next_keepalive = loop.time() + self.keepalive_seconds
        while not self._stopped:
            try:
                async with asyncio.timeout_at(next_keepalive) as self._deadline:
                    message = await receive()
            except TimeoutError:
                message = None
            finally:
                self._deadline = None
            if message is not None and message["type"] == "http.disconnect":
                self._broken = True
                return
            if message is None and not self._stopped:
                next_keepalive = loop.time() + self.keepalive_seconds
                # A write under way keeps the connection alive as well as a comment would.
                if not self._send_lock.locked() and not await self._send(
                    send, self.keepalive, more=True
                ):
                    return

    async def _send(self, send: Send, body: bytes, *, more: bool) -> bool:
        """Send one body chunk; False when the client left or did not take it in time."""
        message: Message = {"type": "http.response.body", "body": body, "more_body": more}
        async with self._send_lock:
            try:
                async with asyncio.timeout(self.send_timeout):
                    await send(message)
            except TimeoutError:
                log.info("sse_client_disconnected reason=not_reading seconds=%s", self.send_timeout)
                self._broken = True
                return False
            except OSError:
                self._broken = True
                return False
        return True


async def _cancelled(writer: asyncio.Task[None]) -> None:
    """Cancel the writer until it ends; raise its error if it failed."""
    while not writer.done():
        writer.cancel()
        await asyncio.wait({writer}, timeout=RECANCEL_SECONDS)
    error = None if writer.cancelled() else writer.exception()
    if error is not None:
        raise error


def sse_response(
    keepalive_seconds: float,
    events: AsyncIterator[StreamEvent] | AsyncIterator[Sequence[StreamEvent]],
    headers: Mapping[str, str] | None = None,
) -> EventStream:
    """Stream `events` as SSE with their ids (for Last-Event-ID), heartbeats, and no caching.

    `events` may yield batches: a batch goes out in one write. A stream with many
    subscribers (a thread's) wakes each of them once per batch, and one write per
    subscriber costs far less than one per event (every write crosses the middleware).
    """

    return EventStream(
        _Frames(events),
        keepalive_seconds=keepalive_seconds * (1 - KEEPALIVE_SPREAD * random.random()),
        keepalive=b": heartbeat\r\n\r\n",
        headers={**(headers or {}), "Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        send_timeout=SLOW_CLIENT_SECONDS,
    )


class _Frames:
    """The SSE text of each event (or batch of events) `events` yields."""

    def __init__(
        self, events: AsyncIterator[StreamEvent] | AsyncIterator[Sequence[StreamEvent]]
    ) -> None:
        self._events: AsyncIterator[StreamEvent | Sequence[StreamEvent]] = events

    def __aiter__(self) -> _Frames:
        return self

    async def __anext__(self) -> bytes:
        item = await anext(self._events)
        if isinstance(item, StreamEvent):
            return sse_frame(item).encode()
        return "".join(map(sse_frame, item)).encode()

    async def aclose(self) -> None:
        """Close the events: a client that left releases its subscriptions at once, not
        when the garbage collector gets to them."""
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()
