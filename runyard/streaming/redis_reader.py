"""One reader per instance: a few connections carry every subscriber's live events.

A subscriber used to hold a pooled connection in its own XREAD BLOCK, so a few hundred of
them emptied the pool the worker needs to append events. Here `StreamReader` follows every
stream key its subscribers want with a fixed set of connections, and hands what it reads to
each subscriber's `Feed` in memory: a subscriber costs memory, never a connection.

How it learns what to read: every append also publishes its stream key on one channel
(`{prefix}events`), which the reader listens to on one pub/sub connection. A key that is
followed here is marked dirty, and `RUNYARD_REDIS_STREAM_READERS` fetch loops read the dirty
keys after their cursors, many per round trip (pipelined XRANGE). So the reader's work
follows the events, not the number of keys followed (one XREAD BLOCK over a thousand keys
costs tens of milliseconds to send and scan, on every wake). A notification can be missed
only while the pub/sub connection is down: every key is read again when it is back, and
every few seconds anyway.

A feed's buffer is bounded. A subscriber that falls behind (its client stops reading) is
detached instead of buffering without end; when it reads again it catches up from Redis by
id and rejoins, so nobody else waits for it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runyard.streaming.broker import StreamEvent
from runyard.streaming.feed import Feed, as_text, decode_entry, id_key
from runyard.streaming.followers import FollowerRegistry

log = logging.getLogger("runyard.broker")

# Entries one read takes per stream: a busy stream cannot starve the others.
READ_COUNT = 500
# Keys one fetch reads in a single round trip.
FETCH_BATCH = 200


@dataclass
class _Followed:
    cursor: str
    generation: int
    feeds: set[Feed] = field(default_factory=set)
    # When the key's registration was last sent (monotonic; 0: to be sent by its next read).
    registered_at: float = 0.0


class StreamReader:
    """The instance's stream reader: `follow` a key, read what its feed buffers."""

    def __init__(
        self,
        redis: Redis,
        channel: str,
        connections: int,
        sweep_seconds: float,
        instance: str | None = None,
    ) -> None:
        self._redis = redis
        self.channel = channel
        self.registry = FollowerRegistry(redis, instance or uuid.uuid4().hex)
        self._fetchers = max(connections, 1)
        self._sweep_seconds = sweep_seconds
        self._keys: dict[str, _Followed] = {}
        self._dirty: dict[str, None] = {}  # ordered: the longest waiting is read first
        self._has_dirty = asyncio.Event()
        self._withdraw_due = False
        self.connected = True

    def follow(self, key: str, cursor: str, *, replaying: bool = False) -> Feed:
        """A feed of `key`'s entries after `cursor`.

        With `replaying`, the caller reads what is stored after `cursor` itself once the
        feed is made: every append announced from now on is buffered meanwhile, so the
        first live event needs no read of its own. Otherwise entries the key's reader has
        passed already are left to the caller to replay (see Feed.replay_until), and a key
        followed anew is read once.
        """
        feed = Feed(key, cursor, None)
        self._join(feed, replaying)
        return feed

    def rejoin(self, feed: Feed) -> None:
        """Follow again after `feed.cursor` a feed that was detached, with an empty buffer."""
        self.leave(feed)
        feed.reset()
        self._join(feed, replaying=False)

    def _join(self, feed: Feed, replaying: bool) -> None:
        followed = self._keys.get(feed.key)
        if followed is None:
            generation = self.registry.generation(feed.key)
            followed = self._keys[feed.key] = _Followed(feed.cursor, generation)
            if replaying:
                feed.register = generation
                followed.registered_at = time.monotonic()
            else:
                # Registered and read by the fetch: whatever was appended before the
                # registration is in that read.
                self._mark(feed.key)
        elif not replaying and id_key(feed.cursor) < id_key(followed.cursor):
            feed.replay_until = followed.cursor
        followed.feeds.add(feed)

    def replayed(self, feed: Feed, last: str) -> None:
        """The feed's subscriber read the key itself up to `last`. When it is the key's
        only feed, the key's position moves there too, so the next append follows on from
        it rather than looking like a gap to be read. (With other feeds the position
        stays: they may still need what lies between.)"""
        followed = self._keys.get(feed.key)
        if followed is None or followed.feeds != {feed}:
            return
        if id_key(last) > id_key(followed.cursor):
            followed.cursor = last

    def leave(self, feed: Feed) -> None:
        """Stop feeding `feed`; the key is dropped with its last feed."""
        followed = self._keys.get(feed.key)
        if followed is None:
            return
        followed.feeds.discard(feed)
        if not followed.feeds:
            self._drop(feed.key)

    def reread(self, key: str) -> None:
        """Read `key` again soon, if it has feeds here."""
        if key in self._keys:
            self._mark(key)

    def follows(self, key: str) -> bool:
        """Whether `key` has feeds here."""
        return key in self._keys

    def followed(self) -> int:
        """How many stream keys are followed now."""
        return len(self._keys)

    def _mark(self, key: str) -> None:
        self._dirty[key] = None
        self._has_dirty.set()

    def _mark_all(self) -> None:
        for key in self._keys:
            self._dirty[key] = None
        if self._dirty:
            self._has_dirty.set()

    async def run_forever(self, stop: asyncio.Event) -> None:
        """Listen for appends and fetch what they added, until `stop`."""
        loops = [self._listen_forever(stop), self._sweep_forever(stop)]
        loops += [self._fetch_forever(stop) for _ in range(self._fetchers)]
        loops.append(self._wake_on(stop))
        await asyncio.gather(*loops)

    async def _listen_forever(self, stop: asyncio.Event) -> None:
        delay = 0.2
        while not stop.is_set():
            pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(self.channel)
                delay = 0.2
                self._set_connected(True)
                # Appends may have gone unannounced while this was away, and Redis may
                # have lost the registrations (a restart): register and read every key.
                for followed in self._keys.values():
                    followed.registered_at = 0.0
                self._mark_all()
                while not stop.is_set():
                    message = await pubsub.get_message(timeout=1.0)
                    if message is not None:
                        self._announced(as_text(message["data"]))
            except (RedisError, OSError) as exc:
                self._set_connected(False, exc)
                await _pause(stop, delay)
                delay = min(delay * 2, 2.0)
            finally:
                try:
                    await pubsub.aclose()
                except (RedisError, OSError):
                    pass

    def _announced(self, message: str) -> None:
        """An append: delivered at once when it follows what the key's feeds have, else
        the key is read (the JSON is parsed only for keys followed here)."""

        key, _, rest = message.partition("\n")
        followed = self._keys.get(key)
        if followed is None:
            return
        previous, _, body = rest.partition("\n")
        if body:
            try:
                entries = [StreamEvent(str(i), str(e), str(d)) for i, e, d in json.loads(body)]
            except (ValueError, TypeError):
                entries = []
            if entries and self._hand_out(key, followed, previous or "0-0", entries):
                return
        self._mark(key)

    def deliver(self, key: str, previous: str, entries: list[StreamEvent]) -> bool:
        """Entries appended by this instance right after `previous`, handed to the key's
        feeds at once (the announcement that follows finds them delivered). True if the key
        has feeds here; a gap is left to a read, as for an announcement."""
        followed = self._keys.get(key)
        if followed is None:
            return False
        if not self._hand_out(key, followed, previous, entries):
            self._mark(key)
        return True

    async def _wake_on(self, stop: asyncio.Event) -> None:
        """Wake the fetch loops once `stop` is set (they wait for work alone)."""
        await stop.wait()
        self._has_dirty.set()

    async def _sweep_forever(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await _pause(stop, self._sweep_seconds)
            self.sweep()

    def sweep(self) -> None:
        """Read every key (an announcement may have been lost), refreshing registrations
        about to expire with the read, and withdraw those of keys no longer followed
        (seconds late, in batches: by then their runs have usually ended)."""
        self._mark_all()
        if self.registry.withdrawing():
            self._withdraw_due = True
            self._has_dirty.set()

    async def _fetch_forever(self, stop: asyncio.Event) -> None:
        delay = 0.2
        while not stop.is_set():
            if self._withdraw_due and self.registry.withdrawing():
                try:
                    await self.registry.send_withdrawals(self._redis)
                except (RedisError, OSError) as exc:
                    self._set_connected(False, exc)
                    await _pause(stop, delay)
                    delay = min(delay * 2, 2.0)
                continue
            self._withdraw_due = False
            if not self._dirty:
                self._has_dirty.clear()
                await self._has_dirty.wait()
                continue
            batch = list(self._dirty)[:FETCH_BATCH]
            for key in batch:
                del self._dirty[key]
            try:
                await self._fetch(batch)
                delay = 0.2
            except (RedisError, OSError) as exc:
                for key in batch:
                    if key in self._keys:
                        self._dirty[key] = None
                self._set_connected(False, exc)
                await _pause(stop, delay)
                delay = min(delay * 2, 2.0)

    async def _fetch(self, batch: list[str]) -> None:
        cursors = {key: self._keys[key].cursor for key in batch if key in self._keys}
        if not cursors:
            return
        pipe = self._redis.pipeline(transaction=False)
        registering = {
            key: self._keys[key].generation
            for key in cursors
            if self.registry.due(self._keys[key].registered_at)
        }
        for key, cursor in cursors.items():
            if key in registering:
                self.registry.register(pipe, key, registering[key])
            pipe.xrange(key, min=f"({cursor}", count=READ_COUNT)
        answers: list[Any] = await pipe.execute()
        self._set_connected(True)
        self._registered(registering)
        reads = [answer for answer in answers if isinstance(answer, list)]
        for (key, cursor), entries in zip(cursors.items(), reads, strict=True):
            followed = self._keys.get(key)
            if followed is None:
                continue
            if len(entries) >= READ_COUNT:
                self._mark(key)
            if entries:
                events = [decode_entry(i, f) for i, f in entries]
                if not self._hand_out(key, followed, cursor, events):
                    self._mark(key)

    def _hand_out(
        self, key: str, followed: _Followed, since: str, entries: list[StreamEvent]
    ) -> bool:
        """Give the feeds `entries`, which are everything after `since`; False when there
        is a gap between the key's cursor and `since` (the key was followed anew meanwhile
        from an older id): such entries are left to a read from the key's own cursor."""
        if id_key(since) > id_key(followed.cursor):
            return False
        # Reads and announcements of one key overlap: keep only what is past its cursor.
        after = id_key(followed.cursor)
        events = [event for event in entries if id_key(event.id) > after]
        if not events:
            return True
        followed.cursor = events[-1].id
        for feed in list(followed.feeds):
            if not feed.offer(events):
                followed.feeds.discard(feed)
        if not followed.feeds:
            self._drop(key)
        return True

    def _registered(self, generations: dict[str, int]) -> None:
        now = time.monotonic()
        for key, generation in generations.items():
            followed = self._keys.get(key)
            if followed is not None and followed.generation == generation:
                followed.registered_at = now

    def _drop(self, key: str) -> None:
        """The key's last feed left: stop reading it, withdraw its registration."""
        followed = self._keys.pop(key)
        self._dirty.pop(key, None)
        self.registry.withdraw(key, followed.generation)

    def add_registration(self, pipe: Any, key: str, generation: int) -> None:
        """Register this instance as a follower of `key`, in `pipe` before its read."""
        self.registry.register(pipe, key, generation)

    def _set_connected(self, connected: bool, exc: BaseException | None = None) -> None:
        if connected == self.connected:
            return
        self.connected = connected
        if connected:
            log.info("stream_reader_reconnected keys=%s", len(self._keys))
        else:
            log.warning("stream_reader_disconnected keys=%s error=%s", len(self._keys), exc)
        for followed in self._keys.values():
            for feed in followed.feeds:
                feed.poke()


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        pass
