"""The signal that ends every open event stream when the server shuts down."""

from __future__ import annotations

from collections.abc import Callable

from runyard.streaming.departures import CrowdDepartures

# Where the server puts its `StreamsClosing` in the ASGI lifespan state (every request's
# scope["state"] is a copy of it, so every request finds the same one).
STREAMS_CLOSING = "runyard.streams_closing"


class StreamsClosing:
    """Ends every open event stream when the server shuts down.

    The server waits for in-flight requests before it stops, and an event stream (a
    thread's, say) has no end of its own: each open stream registers a callback here, and
    the server calls them all as it shuts down. Clients resume with Last-Event-ID, on this
    instance's successor or another. With `departures`, it is told how many streams are
    open, and gives back what a crowd of them leaves behind.
    """

    def __init__(self, departures: CrowdDepartures | None = None) -> None:
        self.closed = False
        self._callbacks: set[Callable[[], None]] = set()
        self._departures = departures
        if departures is not None and departures.compact is None:
            departures.compact = self.compact

    def close(self) -> None:
        """End every open stream, and any opened from now on; idempotent."""
        self.closed = True
        if self._departures is not None:
            self._departures.cancel()
        for callback in list(self._callbacks):
            callback()

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the server shuts down."""
        self._callbacks.add(callback)
        if self._departures is not None:
            self._departures.opened(len(self._callbacks))

    def forget(self, callback: Callable[[], None]) -> None:
        """Stop watching (the stream ended first)."""
        self._callbacks.discard(callback)
        if self._departures is not None and not self.closed:
            self._departures.closed(len(self._callbacks))

    def compact(self) -> None:
        """Rebuild the registry for the streams open now: a set keeps the table it grew to
        for a crowd (16 KiB for 300 streams) after they have gone."""
        self._callbacks = set(self._callbacks)
