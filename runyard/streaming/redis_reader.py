"""One multiplexing reader per instance: a few connections follow every subscribed stream.

A subscriber used to hold a pooled connection in its own XREAD BLOCK, so a few hundred of
them emptied the pool the worker needs to append events. Here `StreamReader` keeps a small,
fixed set of connections (`RUNYARD_REDIS_STREAM_READERS`), each blocked in one XREAD over
every stream key of its share, and hands what it reads to each subscriber's `Feed` in
memory: a subscriber costs memory, never a connection.

A key that starts being followed while its reader is blocked is added at once by waking
the reader: an XADD to the reader's own wake stream, which it always reads too.

A feed's buffer is bounded. A subscriber that falls behind (its client stops reading) is
detached instead of buffering without end; when it reads again it catches up from Redis
by id and rejoins, so nobody else waits for it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runyard.streaming.broker import StreamEvent

log = logging.getLogger("runyard.broker")

# Bytes of event data one subscriber may have waiting before it is detached.
FEED_BUFFER_BYTES = 4 * 1024 * 1024
# Entries one XREAD takes per stream: a busy stream cannot starve the others.
READ_COUNT = 500
# The wake stream is tiny: only its newest entries matter.
WAKE_MAXLEN = 16
WAKE_TTL_SECONDS = 3600


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
        _text(entry_id),
        _text(fields.get(b"event", fields.get("event", b""))),
        _text(fields.get(b"data", fields.get("data", b""))),
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Feed:
    """One subscriber's share of a followed stream: a bounded buffer of live events."""

    def __init__(self, key: str, cursor: str, replay_until: str | None) -> None:
        self.key = key
        self.cursor = cursor
        # Entries up to this id were read before the feed joined: replay them from Redis.
        self.replay_until = replay_until
        self.detached = False
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
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def poke(self) -> None:
        """Wake the subscriber (the reader lost or regained Redis)."""
        self._ready.set()


@dataclass
class _Followed:
    cursor: str
    feeds: set[Feed] = field(default_factory=set)


class _Shard:
    """One connection's share of the followed keys, and the loop that reads them."""

    def __init__(self, redis: Redis, waker: Redis, wake_key: str, block_ms: int) -> None:
        self._redis = redis
        self._waker = waker
        self._wake_key = wake_key
        self._block_ms = block_ms
        self.keys: dict[str, _Followed] = {}
        self._reading: set[str] = set()
        self._woken = False
        self._changed = asyncio.Event()
        self.connected = True

    def join(self, key: str, cursor: str) -> Feed:
        """Follow `key` for a new feed whose last seen id is `cursor`."""
        followed = self.keys.get(key)
        if followed is None:
            followed = self.keys[key] = _Followed(cursor)
            feed = Feed(key, cursor, None)
            self._changed.set()
            if key not in self._reading:
                self._wake()
        elif id_key(cursor) < id_key(followed.cursor):
            feed = Feed(key, cursor, followed.cursor)
        else:
            feed = Feed(key, cursor, None)
        followed.feeds.add(feed)
        return feed

    def leave(self, feed: Feed) -> None:
        """Stop feeding `feed`; the key is dropped with its last feed."""
        followed = self.keys.get(feed.key)
        if followed is None:
            return
        followed.feeds.discard(feed)
        if not followed.feeds:
            del self.keys[feed.key]

    def _wake(self) -> None:
        # Only a reader blocked on an older set of keys needs waking, and once is enough.
        if self._reading and not self._woken:
            self._woken = True
            asyncio.get_running_loop().create_task(self._send_wake(), name="stream-reader-wake")

    async def _send_wake(self) -> None:
        pipe = self._waker.pipeline(transaction=False)
        pipe.xadd(self._wake_key, {"w": "1"}, maxlen=WAKE_MAXLEN)
        pipe.expire(self._wake_key, WAKE_TTL_SECONDS)
        try:
            await pipe.execute()
        except (RedisError, OSError):
            pass  # the blocked read returns by its own timeout anyway

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Read every followed key until `stop`; reconnect with backoff after an error."""
        delay = 0.2
        while not stop.is_set():
            if not self.keys:
                self._changed.clear()
                waiter = asyncio.ensure_future(self._changed.wait())
                stopper = asyncio.ensure_future(stop.wait())
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                stopper.cancel()
                continue
            try:
                await self._read_once()
                delay = 0.2
            except (RedisError, OSError) as exc:
                self._set_connected(False, exc)
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except TimeoutError:
                    pass
                delay = min(delay * 2, 2.0)

    async def _read_once(self) -> None:
        streams: dict[Any, Any] = {self._wake_key: "$"}
        streams.update((key, followed.cursor) for key, followed in self.keys.items())
        self._reading = set(streams)
        self._woken = False
        try:
            answer: Any = await self._redis.xread(streams, count=READ_COUNT, block=self._block_ms)
        finally:
            self._reading = set()
        self._set_connected(True)
        for raw_key, entries in answer or []:
            key = _text(raw_key)
            followed = self.keys.get(key)
            if followed is None or not entries:
                continue
            events = [decode_entry(entry_id, fields) for entry_id, fields in entries]
            followed.cursor = events[-1].id
            for feed in list(followed.feeds):
                if not feed.offer(events):
                    followed.feeds.discard(feed)
            if not followed.feeds:
                del self.keys[key]

    def _set_connected(self, connected: bool, exc: BaseException | None = None) -> None:
        if connected == self.connected:
            return
        self.connected = connected
        if connected:
            log.info("stream_reader_reconnected keys=%s", len(self.keys))
        else:
            log.warning("stream_reader_disconnected keys=%s error=%s", len(self.keys), exc)
        for followed in self.keys.values():
            for feed in followed.feeds:
                feed.poke()


class StreamReader:
    """The instance's stream readers: `follow` a key, read what its feed buffers."""

    def __init__(
        self,
        redis: Redis,
        waker: Redis,
        prefix: str,
        connections: int,
        block_seconds: float,
    ) -> None:
        token = uuid.uuid4().hex[:12]
        block_ms = max(1, int(block_seconds * 1000))
        self._shards = [
            _Shard(redis, waker, f"{prefix}reader:{token}:{index}", block_ms)
            for index in range(max(connections, 1))
        ]

    def _shard(self, key: str) -> _Shard:
        return self._shards[hash(key) % len(self._shards)]

    def follow(self, key: str, cursor: str) -> Feed:
        """A feed of `key`'s entries after `cursor` (see Feed.replay_until)."""
        return self._shard(key).join(key, cursor)

    def leave(self, feed: Feed) -> None:
        """Stop feeding `feed`."""
        self._shard(feed.key).leave(feed)

    def connected(self, key: str) -> bool:
        """Whether the reader of `key` last reached Redis."""
        return self._shard(key).connected

    def followed(self) -> int:
        """How many stream keys are followed now (for metrics and tests)."""
        return sum(len(shard.keys) for shard in self._shards)

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Run every shard's loop until `stop`."""
        await asyncio.gather(*(shard.run_forever(stop) for shard in self._shards))
