"""Giving back the memory a crowd of event streams leaves behind when it goes.

Hundreds of streams that end together free their larger buffers (a socket's pending
writes, tables past 512 bytes) in the middle of the C heap, and glibc gives back only the
top of its heap on free: the pages stay resident, free, for as long as the process lives.
One `malloc_trim` a moment after the crowd has left returns them (1-5 MiB of the 14-19 a
crowd of 300 idle clients adds to a server; bench/README.md). It costs a
few milliseconds once per departure, and fewer than `CROWD_STREAMS` open streams never
trigger it, so ordinary traffic never pays for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger("runyard.streams")

# Streams open at once that make a crowd worth trimming after.
CROWD_STREAMS = 100
# The crowd has left once at most this share of its peak is still open...
LEFT_SHARE = 0.5
# ...and no stream has ended for this long (the last ones leave after the first).
SETTLE_SECONDS = 2.0


def trim_heap() -> bool:
    """Return the C heap's free pages to the system; False where the C library has no
    `malloc_trim` (it is glibc's)."""
    import ctypes

    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return False
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim(0)
    return True


class CrowdDepartures:
    """Watches how many streams are open; once a crowd of them has left, compacts what grew
    with it (`compact`) and trims the heap, once per departure."""

    def __init__(
        self,
        compact: Callable[[], None] | None = None,
        *,
        crowd: int = CROWD_STREAMS,
        settle_seconds: float = SETTLE_SECONDS,
        trim: Callable[[], bool] = trim_heap,
    ) -> None:
        # What grew with the crowd and keeps its size (a registry's table), rebuilt first.
        self.compact = compact
        self._crowd = crowd
        self._settle_seconds = settle_seconds
        self._trim = trim
        self._peak = 0
        self._open = 0
        self._pending: asyncio.TimerHandle | None = None

    def opened(self, count: int) -> None:
        """A stream opened; `count` are open now."""
        self._open = count
        self._peak = max(self._peak, count)

    def closed(self, count: int) -> None:
        """A stream ended; `count` are open now. Past a crowd's departure, (re)arms the
        trim: it runs once no stream has ended for `settle_seconds`."""
        self._open = count
        if self._peak < self._crowd or count > self._peak * LEFT_SHARE:
            return
        if self._pending is not None:
            self._pending.cancel()
        loop = asyncio.get_running_loop()
        self._pending = loop.call_later(self._settle_seconds, self._departed)

    def _departed(self) -> None:
        self._pending = None
        peak, self._peak = self._peak, self._open
        if self.compact is not None:
            self.compact()
        trimmed = self._trim()
        log.info("stream_crowd_left peak=%s open=%s heap_trimmed=%s", peak, self._open, trimmed)

    def cancel(self) -> None:
        """Drop a trim not yet run (the server is stopping)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
