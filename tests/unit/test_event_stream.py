"""The SSE response in-process, over plain ASGI callables: what it sends, and that every
way a stream ends (the client leaves, the events end, the server shuts down, the client
stops reading) leaves no task behind and closes the events (releasing subscriptions)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runyard.api.sse import EventStream
from runyard.streaming.closing import STREAMS_CLOSING, StreamsClosing

pytestmark = pytest.mark.timeout(10)
HEARTBEAT = b": heartbeat\r\n\r\n"
FRAME = b"id: 1\r\nevent: values\r\ndata: {}\r\n\r\n"
# Enough turns of the event loop for a stream to act on a signal (each step is one turn).
LOOP_TURNS = 10
END = {"type": "http.response.body", "body": b"", "more_body": False}


class Events:
    """Chunks to stream: `FRAME` once, then, unless `finite`, nothing until closed."""

    def __init__(self, *, finite: bool = False) -> None:
        self.finite = finite
        self.closed = False
        self._sent = False

    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> bytes:
        if not self._sent:
            self._sent = True
            return FRAME
        if not self.finite:
            await asyncio.Event().wait()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Release (what a subscription would)."""
        self.closed = True


class Client:
    """The ASGI side: receives what the response sends, disconnects when told."""

    def __init__(self, *, method: str = "GET", state: dict[str, Any] | None = None) -> None:
        self.scope: dict[str, Any] = {"type": "http", "method": method, "state": state or {}}
        self.sent: list[dict[str, Any]] = []
        self.sent_more = asyncio.Event()
        self._incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._incoming.put_nowait({"type": "http.request", "body": b"", "more_body": False})

    async def receive(self) -> dict[str, Any]:
        """The request, then what `disconnect` puts."""
        return await self._incoming.get()

    async def send(self, message: dict[str, Any]) -> None:
        """Keep what the response sends; refuse anything after the end, as uvicorn does."""
        if END in self.sent:
            raise RuntimeError(
                f"Unexpected ASGI message {message['type']!r} sent, after response already "
                "completed."
            )
        self.sent.append(message)
        self.sent_more.set()

    def disconnect(self) -> None:
        """The client goes away."""
        self._incoming.put_nowait({"type": "http.disconnect"})

    def bodies(self) -> list[bytes]:
        """The body chunks sent so far."""
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]


def stream(events: Events, keepalive_seconds: float = 60.0, **kwargs: Any) -> EventStream:
    """An event stream of `events`."""
    return EventStream(events, keepalive_seconds=keepalive_seconds, keepalive=HEARTBEAT, **kwargs)


async def until(client: Client, condition: Callable[[], bool]) -> None:
    """Wait until `condition` holds of what the client got (the test's timeout bounds it)."""
    while not condition():
        client.sent_more.clear()
        await client.sent_more.wait()


def start(response: EventStream, client: Client) -> asyncio.Task[None]:
    """Serve the response to the client, as the server's request task would."""
    serve: Awaitable[None] = response(client.scope, client.receive, client.send)  # type: ignore[arg-type]
    return asyncio.create_task(serve)  # type: ignore[arg-type]


async def test_headers_are_the_sse_ones_with_the_callers_first() -> None:
    response = stream(Events(), headers={"Location": "/r/stream", "Content-Location": "/r"})
    assert response.raw_headers == [
        (b"location", b"/r/stream"),
        (b"content-location", b"/r"),
        (b"cache-control", b"no-store"),
        (b"connection", b"keep-alive"),
        (b"x-accel-buffering", b"no"),
        (b"content-type", b"text/event-stream; charset=utf-8"),
    ]


async def test_a_client_that_leaves_ends_the_stream_and_its_tasks() -> None:
    events, client = Events(), Client()
    before = len(asyncio.all_tasks())
    serving = start(stream(events), client)
    await until(client, lambda: FRAME in client.bodies())
    # The request's own task and one writer, nothing else.
    assert len(asyncio.all_tasks()) == before + 2
    client.disconnect()
    await serving
    assert events.closed
    assert len(asyncio.all_tasks()) == before
    assert END not in client.sent  # nobody is there to read the end of the body


class Stubborn(Events):
    """Events whose wait swallows the first cancellation, as `asyncio.wait_for` in Python
    3.11 does when the wait completes at the same moment."""

    async def __anext__(self) -> bytes:
        if not self._sent:
            self._sent = True
            return FRAME
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.Event().wait()
        raise StopAsyncIteration


async def test_a_swallowed_cancellation_does_not_keep_the_stream() -> None:
    events, client = Stubborn(), Client()
    before = len(asyncio.all_tasks())
    serving = start(stream(events), client)
    await until(client, lambda: FRAME in client.bodies())
    client.disconnect()
    await serving
    assert events.closed
    assert len(asyncio.all_tasks()) == before


async def test_keepalive_comments_come_while_no_event_does() -> None:
    events, client = Events(), Client()
    serving = start(stream(events, keepalive_seconds=0.05), client)
    await until(client, lambda: client.bodies().count(HEARTBEAT) >= 2)
    client.disconnect()
    await serving
    assert client.sent[0]["type"] == "http.response.start"
    assert client.bodies()[0] == FRAME
    assert events.closed


async def test_events_that_end_end_the_body_and_the_stream() -> None:
    events, client = Events(finite=True), Client()
    before = len(asyncio.all_tasks())
    await start(stream(events), client)
    assert client.bodies() == [FRAME, b""]
    assert client.sent[-1] == END
    assert events.closed
    assert len(asyncio.all_tasks()) == before


async def test_server_shutdown_ends_open_streams_with_a_clean_end() -> None:
    closing = StreamsClosing()
    events, client = Events(), Client(state={STREAMS_CLOSING: closing})
    serving = start(stream(events), client)
    await until(client, lambda: FRAME in client.bodies())
    closing.close()
    await serving
    assert client.sent[-1] == END
    assert events.closed
    # A stream opened once the shutdown began ends at once.
    later_events, later = Events(), Client(state={STREAMS_CLOSING: closing})
    await start(stream(later_events), later)
    assert later.sent[-1] == END
    assert later_events.closed


async def test_a_client_that_stops_reading_is_hung_up_on() -> None:
    events, client = Events(), Client()
    stuck = asyncio.Event()

    async def full_socket(message: dict[str, Any]) -> None:
        client.sent.append(message)
        if message["type"] == "http.response.body":
            await stuck.wait()

    client.send = full_socket  # type: ignore[method-assign]
    before = len(asyncio.all_tasks())
    await start(stream(events, send_timeout=0.05), client)
    assert events.closed
    assert len(asyncio.all_tasks()) == before


async def test_head_gets_the_headers_and_no_stream() -> None:
    events, client = Events(), Client(method="HEAD")
    await start(stream(events), client)
    assert [m["type"] for m in client.sent] == ["http.response.start", "http.response.body"]
    assert client.sent[-1] == END
    assert events.closed


class LateEvents(Events):
    """`FRAME`, then the end, once `keepalive_due` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.keepalive_due = asyncio.Event()
        self.ended = asyncio.Event()

    async def __anext__(self) -> bytes:
        if not self._sent:
            self._sent = True
            return FRAME
        await self.keepalive_due.wait()
        self.ended.set()
        raise StopAsyncIteration


class LateWaking(Client):
    """A client whose receive, cut short by the keep-alive deadline, lets the request task
    resume only after the events have ended: the order the event loop takes when the
    deadline and the last event (a socket read) come due in the same turn."""

    def __init__(self, events: LateEvents) -> None:
        super().__init__()
        self.events = events

    async def receive(self) -> dict[str, Any]:
        """The request; then, when the deadline cancels the wait, hold until the end."""
        try:
            return await super().receive()
        except asyncio.CancelledError:
            self.events.keepalive_due.set()
            await self.events.ended.wait()
            raise


async def test_a_keepalive_due_as_the_events_end_comes_before_the_end() -> None:
    events = LateEvents()
    client = LateWaking(events)
    await start(stream(events, keepalive_seconds=0.01), client)
    assert client.bodies()[0] == FRAME
    assert client.sent[-1] == END
    assert client.sent.count(END) == 1
    assert events.closed


async def test_shutdown_while_the_end_is_on_its_way_sends_one_end() -> None:
    closing = StreamsClosing()
    events, client = Events(finite=True), Client(state={STREAMS_CLOSING: closing})
    holding, closed = asyncio.Event(), asyncio.Event()
    deliver = client.send

    async def slow_end(message: dict[str, Any]) -> None:
        # A layer that passes the end on, then awaits something of its own (a log, a
        # flush) while the server's shutdown begins: a few turns of the loop, long enough
        # for the shutdown to end the stream, had the end not been sent.
        await deliver(message)
        if message == END:
            holding.set()
            await closed.wait()
            for _ in range(LOOP_TURNS):
                await asyncio.sleep(0)

    client.send = slow_end  # type: ignore[method-assign]
    serving = start(stream(events), client)
    await holding.wait()
    closing.close()
    closed.set()
    await serving
    assert client.bodies() == [FRAME, b""]
    assert events.closed
