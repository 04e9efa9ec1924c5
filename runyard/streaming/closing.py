"""The signal that ends every open event stream when the server shuts down."""

from __future__ import annotations

from collections.abc import Callable

# Where the server puts its `StreamsClosing` in the ASGI lifespan state (every request's
# scope["state"] is a copy of it, so every request finds the same one).
STREAMS_CLOSING = "runyard.streams_closing"


class StreamsClosing:
    """Ends every open event stream when the server shuts down.

    The server waits for in-flight requests before it stops, and an event stream (a
    thread's, say) has no end of its own: each open stream registers a callback here, and
    the server calls them all as it shuts down. Clients resume with Last-Event-ID, on this
    instance's successor or another.
    """

    def __init__(self) -> None:
        self.closed = False
        self._callbacks: set[Callable[[], None]] = set()

    def close(self) -> None:
        """End every open stream, and any opened from now on; idempotent."""
        self.closed = True
        for callback in list(self._callbacks):
            callback()

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` when the server shuts down."""
        self._callbacks.add(callback)

    def forget(self, callback: Callable[[], None]) -> None:
        """Stop watching (the stream ended first)."""
        self._callbacks.discard(callback)
