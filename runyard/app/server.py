"""The uvicorn server the `runyard` command runs, and the HTTP protocol it speaks."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from runyard.app.connection_bound import ConnectionBound
from runyard.streaming.closing import STREAMS_CLOSING, StreamsClosing
from runyard.streaming.departures import CrowdDepartures

logger = logging.getLogger(__name__)

# What a client gets to send its request head (request line and headers) in, and how large
# the head may be; the settings RUNYARD_HEAD_TIMEOUT_SECONDS and RUNYARD_MAX_HEAD_BYTES.
DEFAULT_HEAD_TIMEOUT_SECONDS = 10.0
DEFAULT_MAX_HEAD_BYTES = 64 * 1024
# What it gets to send the request body in, from the head's end (RUNYARD_BODY_TIMEOUT_SECONDS):
# the largest body (RUNYARD_MAX_BODY_BYTES, 10 MiB) at about 175 KB/s.
DEFAULT_BODY_TIMEOUT_SECONDS = 60.0
# Connections one server holds at once (RUNYARD_MAX_CONNECTIONS): room for ten thousand mostly
# idle stream clients and the ordinary traffic beside them.
DEFAULT_MAX_CONNECTIONS = 25_000
# Past the bound: how long a connection has to say what it asks (a probe says it at once).
OVER_BOUND_GRACE = 1.0
# Served past the bound: the liveness probes, so that a full server is not restarted.
# After a refusal the server stops sending but reads (and drops) what still comes for this long
# before it closes: closing on input it has not read would make the kernel reset the connection
# and throw the answer away before the client reads it.
LINGER_SECONDS = 2.0
PROBE_PATHS = frozenset({b"/ok", b"/livez"})
REASONS = {
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


class AnnouncingServer(uvicorn.Server):
    """A uvicorn server that prints `runyard: serving on URL` once the app has started and
    its socket listens, never before a start-up that then fails.

    A module-level class: with `--reload`, uvicorn pickles the server into its worker process.
    """

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start as uvicorn does, then say where."""
        # Every request's scope["state"] is a copy of the lifespan's: its streams find this.
        self.streams_closing = StreamsClosing(CrowdDepartures())
        self.lifespan.state[STREAMS_CLOSING] = self.streams_closing
        bound: ConnectionBound | None = getattr(self.config, "connection_bound", None)
        if bound is not None:
            bound.fit_open_files()
        await super().startup(sockets=sockets)
        if self.started:
            host = self.config.host
            url = f"http://{f'[{host}]' if ':' in host else host}:{self.config.port}"
            print(f"runyard: serving on {url}", flush=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End the open event streams, then shut down as uvicorn does (which waits for
        every request in flight, and a stream has no end of its own)."""
        self.streams_closing.close()
        await super().shutdown(sockets=sockets)


class DrainingServer(AnnouncingServer):
    """The production server: the first exit signal (SIGTERM, SIGINT) also begins the
    instance's handover at once (stop claiming, drain, hand back: runyard/wiring/shutdown.py),
    beside uvicorn's HTTP shutdown, instead of after it."""

    def __init__(self, config: uvicorn.Config, begin_drain: Callable[[], None]) -> None:
        super().__init__(config)
        self._begin_drain = begin_drain

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Begin the handover (idempotent), then shut HTTP down as uvicorn does."""
        self._begin_drain()
        super().handle_exit(sig, frame)


class ServerConfig(uvicorn.Config):
    """uvicorn's configuration plus the bounds `HeadBoundedProtocol` applies: the request
    head's time and size, the request body's time, and the connections held at once."""

    def __init__(
        self,
        app: Any,
        *,
        head_timeout_seconds: float = DEFAULT_HEAD_TIMEOUT_SECONDS,
        max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES,
        body_timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, http=HeadBoundedProtocol, **kwargs)
        self.head_timeout_seconds = head_timeout_seconds
        self.max_head_bytes = max_head_bytes
        self.body_timeout_seconds = body_timeout_seconds
        self.connection_bound = ConnectionBound(max_connections)


class HeadBoundedProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol with deadlines on each request's head and body, a size
    bound on its head, and a bound on the connections the server holds.

    uvicorn closes an idle keep-alive connection, but a client that opens a connection and
    sends nothing, or trickles one header line (or one body byte) at a time, holds it
    forever, and httptools accepts a head of any size. Here a head must be complete within
    the timeout of its first byte (of the connection, for the first request), and its body
    within the body timeout of the head's end, or the connection gets 408 (just closed, if
    the request was answered already) and is closed; a head larger than the bound gets 431
    and never reaches the app. Past the connection bound, a new connection is answered 503
    with Retry-After as soon as its request line says what it asks, unless it asks for /ok
    or /livez (served as ever), and within a second if it says nothing. Body sizes are the
    app's business (RUNYARD_MAX_BODY_BYTES); idle time between requests is uvicorn's
    keep-alive timeout.
    """

    # In slots, not the instance dict: uvicorn's protocol sets as many attributes as an
    # instance dict shares keys for, and seven more made each connection's dict a dict of its
    # own, 1.3 KiB more per connection (idle stream clients hold theirs for hours).
    __slots__ = (
        "_body_deadline",
        "_head_deadline",
        "_head_parsed",
        "_head_received",
        "_head_timeout",
        "_in_head",
        "_linger",
        "_max_head_bytes",
        "_over_bound",
        "_refused",
    )

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self._head_timeout = float(
            getattr(config, "head_timeout_seconds", DEFAULT_HEAD_TIMEOUT_SECONDS)
        )
        self._max_head_bytes = int(getattr(config, "max_head_bytes", DEFAULT_MAX_HEAD_BYTES))
        self._head_deadline: asyncio.TimerHandle | None = None
        self._body_deadline: asyncio.TimerHandle | None = None
        self._in_head = False
        # Bytes received while the head is incomplete (what httptools holds for an unfinished
        # header), and the size of what it has parsed of the head so far.
        self._head_received = 0
        self._head_parsed = 0
        self._refused = False
        self._linger: asyncio.TimerHandle | None = None
        # Opened past the connection bound: only a probe is served on it.
        self._over_bound = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the first head's clock when the connection opens; tell whether the
        connection is one past the bound."""
        super().connection_made(transport)
        bound: ConnectionBound | None = getattr(self.config, "connection_bound", None)
        self._over_bound = bound is not None and len(self.connections) > bound.limit
        self._begin_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the clocks with the connection."""
        self._end_head()
        self._end_body()
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse as uvicorn does, then refuse a head that has outgrown the bound."""
        if self._refused:
            return
        counted = self._in_head
        super().data_received(data)
        if counted and self._in_head and not self._refused:
            self._head_received += len(data)
            self._check_head_size(self._head_received)

    def on_message_begin(self) -> None:
        """A pipelined or keep-alive request starts its own clock at its first byte."""
        if self._refused:
            return
        super().on_message_begin()
        self._head_parsed = 0
        if not self._in_head:
            self._begin_head()

    def on_url(self, url: bytes) -> None:
        """Count the request target toward the head's size."""
        if self._refused:
            return
        super().on_url(url)
        self._head_parsed += len(url)
        self._check_head_size(self._head_parsed)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count each header line toward the head's size."""
        if self._refused:
            return
        super().on_header(name, value)
        self._head_parsed += len(name) + len(value) + 4
        self._check_head_size(self._head_parsed)

    def on_headers_complete(self) -> None:
        """The head is in: stop its clock, refuse what a connection past the bound asks
        (but a probe), and start the body's clock before the app runs."""
        self._end_head()
        if self._refused:
            return
        if self._over_bound and self.url.split(b"?", 1)[0] not in PROBE_PATHS:
            self._refuse_over_bound()
            return
        super().on_headers_complete()
        if not (self.parser.should_upgrade() and self._should_upgrade()):
            self._body_deadline = self.loop.call_later(
                float(getattr(self.config, "body_timeout_seconds", DEFAULT_BODY_TIMEOUT_SECONDS)),
                self._body_timed_out,
            )

    def on_body(self, body: bytes) -> None:
        """Nothing of a refused request reaches the app."""
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        """The body is in: stop its clock. Nothing of a refused request reaches the app."""
        self._end_body()
        if not self._refused:
            super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        """A refused request is not upgraded either."""
        if not self._refused:
            super().handle_websocket_upgrade()

    def _check_head_size(self, size: int) -> None:
        if size > self._max_head_bytes:
            logger.warning("request_head_too_large bytes=%d", size)
            self._refuse(
                431,
                f"the request head (request line and headers) is larger than "
                f"{self._max_head_bytes} bytes (RUNYARD_MAX_HEAD_BYTES); send fewer or "
                "smaller headers",
            )

    def _begin_head(self) -> None:
        self._in_head = True
        self._head_received = 0
        # Past the bound, a connection says at once what it asks (a probe does) or goes.
        timeout = min(self._head_timeout, OVER_BOUND_GRACE) if self._over_bound else None
        self._head_deadline = self.loop.call_later(
            timeout or self._head_timeout, self._head_timed_out
        )

    def _end_head(self) -> None:
        self._in_head = False
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _end_body(self) -> None:
        if self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None

    def _head_timed_out(self) -> None:
        self._head_deadline = None
        if self._refused or self.transport.is_closing():
            return
        if self._responding():
            # A pipelined head waits while uvicorn, answering the request before it, does not
            # read: not the client's delay.
            self._head_deadline = self.loop.call_later(self._head_timeout, self._head_timed_out)
            return
        if self._over_bound:
            self._refuse_over_bound()
            return
        logger.info("request_head_timed_out received_bytes=%d", self._head_received)
        self._refuse(
            408,
            f"the request head (request line and headers) was not complete within "
            f"{self._head_timeout:g} s (RUNYARD_HEAD_TIMEOUT_SECONDS)",
        )

    def _body_timed_out(self) -> None:
        self._body_deadline = None
        if self._refused or self.transport.is_closing():
            return
        timeout = float(getattr(self.config, "body_timeout_seconds", DEFAULT_BODY_TIMEOUT_SECONDS))
        if self.flow.read_paused:
            # uvicorn stopped reading: the app has not taken what was sent (or answers the
            # request before it). Not the client's delay.
            self._body_deadline = self.loop.call_later(timeout, self._body_timed_out)
            return
        started = self.cycle is not None and self.cycle.response_started
        logger.info("request_body_timed_out answered=%s", "yes" if started else "no")
        if started:
            # An answer is on its way (or sent): no second one, only the connection ends.
            self._refused = True
            self.transport.close()
            return
        self._refuse(
            408,
            f"the request body was not complete within {timeout:g} s of its head "
            "(RUNYARD_BODY_TIMEOUT_SECONDS); send it at once",
            pending=False,
        )

    def _refuse_over_bound(self) -> None:
        bound: ConnectionBound = self.config.connection_bound  # type: ignore[attr-defined]
        bound.note_refusal(len(self.connections))
        self._refuse(
            503,
            f"the server holds its most connections at once ({bound.limit}, "
            "RUNYARD_MAX_CONNECTIONS); retry shortly",
            headers=((b"retry-after", b"1"),),
        )

    def _responding(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _refuse(
        self,
        status: int,
        detail: str,
        headers: tuple[tuple[bytes, bytes], ...] = (),
        pending: bool | None = None,
    ) -> None:
        """Answer `status` with a JSON `detail` and close; the rest of the input is dropped.

        `pending`: whether another answer is due first on this connection (by default, when a
        request before this one is still being answered)."""
        self._refused = True
        self._end_head()
        self._end_body()
        if self._responding() if pending is None else pending:
            self.transport.close()  # an answer is being written: no second one inside it
            return
        body = json.dumps({"detail": detail}).encode()
        head = [b"HTTP/1.1 %d %s\r\n" % (status, REASONS[status])]
        for name, value in (*self.server_state.default_headers, *headers):
            head.append(b"%s: %s\r\n" % (name, value))
        head.append(b"content-type: application/json\r\n")
        head.append(b"content-length: %d\r\nconnection: close\r\n\r\n" % len(body))
        self.transport.write(b"".join(head) + body)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        # The answer, then the end of what this side sends; what the client still sends is
        # read and dropped (data_received) until it closes or LINGER_SECONDS pass.
        self.transport.write_eof()
        self._linger = self.loop.call_later(LINGER_SECONDS, self.transport.close)
