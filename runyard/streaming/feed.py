"""A subscriber's feed of a followed stream, and the stream ids and entries it holds.

`StreamReader` (redis_reader.py) reads each followed key once for all of an instance's
subscribers and offers what it read to every feed of the key. A feed's buffer is bounded:
one that would overflow is detached, and its subscriber catches up from Redis by id.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.exceptions import RedisError

from runyard.streaming.broker import Ended, EventsUnavailableError, StreamEvent

# Bytes of event data one subscriber may have waiting before it is detached.
FEED_BUFFER_BYTES = 4 * 1024 * 1024


def id_key(entry_id: str) -> tuple[int, int]:
    """A stream id as a sortable pair ("0-0" for anything malformed)."""
    head, _, tail = entry_id.partition("-")
    try:
        return int(head), int(tail or 0)
    except ValueError:
        return 0, 0


def decode_entry(entry_id: Any, fields: Any) -> StreamEvent:
    """One XREAD/XRANGE entry as a StreamEvent."""
    return StreamEvent(
        as_text(entry_id),
        as_text(fields.get(b"event", fields.get("event", b""))),
        as_text(fields.get(b"data", fields.get("data", b""))),
    )


def as_text(value: Any) -> str:
    """A Redis reply part (bytes or not) as text."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Feed:
    """One subscriber's share of a followed stream: a bounded buffer of live events."""

    def __init__(self, key: str, cursor: str, replay_until: str | None) -> None:
        self.key = key
        self.cursor = cursor
        # Entries up to this id were read before the feed joined: replay them from Redis.
        self.replay_until = replay_until
        self.detached = False
        # A key followed anew by a replaying caller: the generation it registers with its
        # first read (see FollowerRegistry).
        self.register: int | None = None
        self._events: list[StreamEvent] = []
        self._bytes = 0
        self._ready = asyncio.Event()

    def offer(self, events: Sequence[StreamEvent]) -> bool:
        """Buffer live events; False (and nothing kept) once the buffer would overflow."""
        size = sum(len(e.data) for e in events)
        if self._events and self._bytes + size > FEED_BUFFER_BYTES:
            self.detached = True
            self._ready.set()
            return False
        self._events.extend(events)
        self._bytes += size
        self._ready.set()
        return True

    def take(self) -> list[StreamEvent]:
        """Every buffered event after the cursor (the buffer empties)."""
        events, self._events, self._bytes = self._events, [], 0
        self._ready.clear()
        after = id_key(self.cursor)
        return [e for e in events if id_key(e.id) > after]

    async def wait(self, timeout: float) -> bool:
        """True once something was buffered (or the feed detached), False on timeout."""
        if self._ready.is_set():
            return True
        try:
            # Not wait_for: it would run the wait as a task of its own, one more hop
            # between the append's announcement and the subscriber.
            async with asyncio.timeout(timeout):
                await self._ready.wait()
        except TimeoutError:
            return False
        return True

    def reset(self) -> None:
        """Empty the buffer and attach again (see StreamReader.rejoin)."""
        self._events, self._bytes, self.detached, self.replay_until = [], 0, False, None
        self._ready.clear()

    def poke(self) -> None:
        """Wake the subscriber (the reader lost or regained Redis)."""
        self._ready.set()


# While Redis cannot be reached, a replay is retried this often.
RETRY_DELAY_SECONDS = 0.5
# A read of an ended run's events that fails this many times more gives up on Redis.
FAILURES_BEFORE_UNAVAILABLE = 2


async def read_retrying(
    read: Callable[[], Awaitable[Any]],
    ended: Ended | None,
    idle_check: float,
    known_ended: bool = False,
) -> Any:
    """A read of stored events, retried while Redis is away and the run goes on.

    Once the run has ended (or is known to have), a read that fails again raises
    EventsUnavailableError: its final state is in the database. (Once is not enough:
    after a Redis restart, each pooled connection fails its first command.)
    """
    asked = time.monotonic()
    failures = 0
    while True:
        try:
            return await read()
        except (RedisError, OSError) as exc:
            failures += 1
            if known_ended and failures > FAILURES_BEFORE_UNAVAILABLE:
                raise EventsUnavailableError(f"run events unreadable: {exc}") from exc
            if known_ended:
                continue
            if ended is not None and time.monotonic() - asked >= idle_check:
                asked = time.monotonic()
                known_ended = await ended()
                continue
            await asyncio.sleep(RETRY_DELAY_SECONDS)


def flat_pairs(events: Sequence[tuple[str, str]]) -> list[str]:
    """(event, data) pairs as one list of stream entry fields."""
    return [part for event in events for part in event]


def looks_like_id(value: str) -> bool:
    """Whether `value` has the shape of a Redis stream entry id."""
    head, _, tail = value.partition("-")
    return head.isdigit() and (tail == "" or tail.isdigit())
