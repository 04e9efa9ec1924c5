"""Run events in Redis Streams: ordered ids, replay and blocking reads in one primitive.

Why Streams rather than pub/sub plus a list: XADD assigns a unique, ordered id to every
event, XRANGE replays from any id, and XREAD BLOCK follows live events, so resuming with
Last-Event-ID on any instance is exact without a second bookkeeping structure. Each run's
stream is capped (MAXLEN ~) and expires after the retention period.

Every append goes through one script (fenced_append.py); live events reach subscribers
through the instance's shared reader (redis_reader.py), and a run's end wakes its waiters
through completion signals (completion_signals.py).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runyard.domain.errors import StaleAttemptError
from runyard.streaming.broker import (
    FINAL_EVENTS_GRACE_SECONDS,
    IDLE_CHECK_SECONDS,
    CompletionWaiter,
    Ended,
    StreamEvent,
)
from runyard.streaming.completion_signals import CompletionSignals
from runyard.streaming.feed import (
    Feed,
    as_text,
    decode_entry,
    flat_pairs,
    looks_like_id,
    read_retrying,
)
from runyard.streaming.fenced_append import FENCED_XADD
from runyard.streaming.followers import followers_key
from runyard.streaming.redis_reader import StreamReader

log = logging.getLogger("runyard.broker")

_CONTROL_DONE = "__done__"
# Replays read this many entries per round trip.
RANGE_COUNT = 500


class RedisEventBroker:
    """Per-run Redis streams, fenced by attempt, with completion signals over pub/sub.

    Three clients, three connection budgets: `redis` appends (the worker's writes),
    `reads` replays stored events (the request path), and `reader` follows live events
    for every subscriber over a few connections of its own, told of each append by the
    script that makes it. A busy pool makes a caller
    wait for a connection; it never counts as Redis being away.
    """

    def __init__(
        self,
        redis: Redis,
        prefix: str,
        signals: CompletionSignals,
        retention_seconds: float,
        max_events: int = 10_000,
        idle_check_seconds: float = IDLE_CHECK_SECONDS,
        *,
        reader: StreamReader,
        reads: Redis | None = None,
        append_retry_seconds: float = 0.0,
        final_events_grace_seconds: float = FINAL_EVENTS_GRACE_SECONDS,
    ) -> None:
        self._idle_check = idle_check_seconds
        self._final_grace = final_events_grace_seconds
        self._redis = redis
        self._reads = reads if reads is not None else redis
        self._reader = reader
        self._prefix = prefix
        self._signals = signals
        self._retention = int(retention_seconds)
        self._max_events = max_events
        self._xadd: Any = redis.register_script(FENCED_XADD)
        self._retry_seconds = append_retry_seconds
        self._down_since: float | None = None
        self._dropping = False
        # Batch names, unique across instances and restarts (one uuid per broker, not per
        # append: a uuid4 is a system call).
        self._batch_names = f"{uuid.uuid4().hex}:"
        self._batch_count = itertools.count()

    def _stream(self, run_id: str) -> str:
        return f"{self._prefix}run:{run_id}:events"

    def _attempt_key(self, run_id: str) -> str:
        return f"{self._prefix}run:{run_id}:attempt"

    def _batch_key(self, run_id: str) -> str:
        return f"{self._prefix}run:{run_id}:batch"

    async def begin_attempt(
        self, run_id: str, attempt: int, events: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Fence out every older attempt's publishing, then publish `events` as this
        attempt, in one round trip."""
        await self._append(run_id, flat_pairs(events), attempt, begin=True)

    async def publish(self, run_id: str, event: str, data: str, attempt: int | None = None) -> str:
        """Append an event; a stale attempt's event is refused.

        An append Redis does not answer is retried for `append_retry_seconds` (the lease:
        as long as the attempt can hold the run). Past that Redis is away: the event is
        dropped (and "" returned), as are later ones after a single try each until Redis
        answers again; the run goes on and its outcome is recorded in the database, which
        every view falls back to.
        """
        return await self._append(run_id, [event, data], attempt)

    async def publish_batch(
        self, run_id: str, events: Sequence[tuple[str, str]], attempt: int | None = None
    ) -> str:
        """Append several events in order in one script call (fenced like `publish`)."""
        if not events:
            return ""
        return await self._append(run_id, flat_pairs(events), attempt)

    async def _append(
        self,
        run_id: str,
        pairs: list[str],
        attempt: int | None,
        begin: bool = False,
        signal: bool = False,
    ) -> str:
        args = [
            -1 if attempt is None else attempt,
            self._max_events,
            self._retention,
            "1" if begin else "0",
            self._signals.channel if signal else "",
            run_id,
            f"{self._batch_names}{next(self._batch_count)}",
            self._reader.channel,
            self._reader.registry.instance,
            *pairs,
        ]
        stream = self._stream(run_id)
        keys = [stream, self._attempt_key(run_id), self._batch_key(run_id), followers_key(stream)]
        delay = 0.05
        while True:
            try:
                result = await self._xadd(keys=keys, args=args)
                break
            except (RedisError, OSError) as exc:
                if not self._keep_trying(run_id, exc):
                    return ""
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        if self._down_since is not None:
            self._down_since, self._dropping = None, False
            log.info("events_published_again run_id=%s", run_id)
        if result is None:
            raise StaleAttemptError(f"attempt {attempt} of run {run_id} is no longer current")
        previous, *ids = (as_text(part) for part in result)
        if previous == "-":
            # A retry of a batch that was applied: its entries are not known here, so this
            # instance's subscribers (never announced to) read them.
            self._reader.reread(keys[0])
        elif ids and self._deliver_here(keys[0], previous, ids, pairs):
            # Let the subscribers take it before this task goes on with the run.
            await asyncio.sleep(0)
        return ids[-1] if ids else ""

    def _deliver_here(self, key: str, previous: str, ids: list[str], pairs: list[str]) -> bool:
        """Hand this instance's subscribers of `key` what was just appended, without waiting
        for the announcement to come back from Redis; True if any subscriber took it."""
        if not self._reader.follows(key):
            return False
        events = [
            StreamEvent(entry_id, pairs[2 * index], pairs[2 * index + 1])
            for index, entry_id in enumerate(ids)
        ]
        return self._reader.deliver(key, previous, events)

    def _keep_trying(self, run_id: str, exc: BaseException) -> bool:
        """Whether a failed append is tried again: until Redis was away past the retry span."""
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            log.warning("events_append_retrying run_id=%s error=%s", run_id, exc)
        if now - self._down_since < self._retry_seconds:
            return True
        if not self._dropping:
            self._dropping = True
            log.warning(
                "events_dropped_redis_unreachable run_id=%s down_for=%.1fs error=%s",
                run_id,
                now - self._down_since,
                exc,
            )
        return False

    async def finish(
        self,
        run_id: str,
        attempt: int | None = None,
        last_events: Sequence[tuple[str, str]] = (),
        signal_done: bool = False,
    ) -> None:
        """Append the last events and the control entry that ends every subscription,
        and with `signal_done` announce the run's completion, in one round trip.

        Local waiters are woken once the append is done (or refused), so one that then
        reads the stream finds it complete.
        """
        pairs = [*flat_pairs(last_events), _CONTROL_DONE, ""]
        try:
            await self._append(run_id, pairs, attempt, signal=signal_done)
        finally:
            if signal_done:
                self._signals.resolve(run_id)

    async def subscribe(
        self,
        run_id: str,
        after: str | None = None,
        follow: bool = True,
        ended: Ended | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Replay after `after`, then follow live events (through the shared reader) until
        the done entry.

        A subscription that hears nothing for a while asks `ended`: a run that ended
        without its done entry (Redis lost its last events) still ends the subscription.
        """
        key = self._stream(run_id)
        cursor = await self._start(key, after, ended)
        if cursor is None:
            return  # live only, and the stream has finished: nothing more will come
        if not follow:
            async for event in self._replay(key, cursor, ended, known_ended=True):
                if event.event == _CONTROL_DONE:
                    return
                yield event
            return
        # The feed is made before the replay, so an append announced while the replay is
        # on its way is buffered, not missed: the first live event needs no read of its own.
        feed = self._reader.follow(key, cursor, replaying=True)
        try:
            # What is stored already comes in one read, without waiting for the shared reader
            # (and registers this instance as a follower first, when it is new here).
            replay = self._replay(
                key,
                cursor,
                ended,
                register=feed.register,
                read_to=lambda last: self._reader.replayed(feed, last),
            )
            async for event in replay:
                if event.event == _CONTROL_DONE:
                    return
                feed.cursor = event.id
                yield event
            async for event in self._follow(feed, ended):
                yield event
        finally:
            # Here, not in _follow: a subscription closed during its replay leaves too.
            self._reader.leave(feed)

    async def _follow(self, feed: Feed, ended: Ended | None) -> AsyncIterator[StreamEvent]:
        """Live events after `feed.cursor`, from the shared reader, until the done entry."""
        while True:
            if feed.replay_until is not None:
                batch = await self._range(feed.key, feed.cursor, feed.replay_until, ended)
                if len(batch) < RANGE_COUNT:
                    feed.replay_until = None
            else:
                batch = feed.take()

            if not batch:
                if feed.detached:
                    # It fell behind: catch up from Redis by id, then follow again.
                    self._reader.rejoin(feed)
                elif not await feed.wait(self._idle_check) and ended and await ended():
                    async for event in self._ended_tail(feed, ended):
                        yield event
                    return
                continue
            for event in batch:
                feed.cursor = event.id
                if event.event == _CONTROL_DONE:
                    return
                yield event

    async def _ended_tail(self, feed: Feed, ended: Ended) -> AsyncIterator[StreamEvent]:
        """What a run seen ended still has: stored events up to the done entry, read again
        for a while when it is not there yet (FINAL_EVENTS_GRACE_SECONDS)."""
        deadline = time.monotonic() + self._final_grace
        pause = 0.05
        while True:
            async for event in self._replay(feed.key, feed.cursor, ended, True):
                if event.event == _CONTROL_DONE:
                    return
                feed.cursor = event.id
                yield event
            left = deadline - time.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 1.0)

    async def _start(self, key: str, after: str | None, ended: Ended | None) -> str | None:
        """The id after which a subscription starts ("$": the newest stored one), or None
        when "$" finds the stream finished (its newest entry is the done entry).

        A join reads its run before it subscribes: a run that ends in between has its done
        entry stored already, and following on after it would wait for an end that has
        passed (until the idle check asked the database, then the grace for the last
        events ran out: ten seconds).
        """
        if after != "$":
            return after if after and looks_like_id(after) else "0-0"
        last: Any = await read_retrying(
            lambda: self._reads.xrevrange(key, count=1), ended, self._idle_check
        )
        if not last:
            return "0-0"
        newest = decode_entry(*last[0])
        return None if newest.event == _CONTROL_DONE else newest.id

    async def _replay(
        self,
        key: str,
        cursor: str,
        ended: Ended | None,
        known_ended: bool = False,
        register: int | None = None,
        read_to: Callable[[str], None] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """What is stored after `cursor`, up to and with the done entry. With `register`,
        the first read registers this instance as a follower of the key before it reads;
        `read_to` is told the last id of each read before its events are yielded."""
        while True:
            batch = await self._range(key, cursor, "+", ended, known_ended, register)
            register = None
            if batch and read_to is not None:
                read_to(batch[-1].id)
            for event in batch:
                yield event
                if event.event == _CONTROL_DONE:
                    return
                cursor = event.id
            if len(batch) < RANGE_COUNT:
                return

    async def _range(
        self,
        key: str,
        cursor: str,
        until: str,
        ended: Ended | None,
        known_ended: bool = False,
        register: int | None = None,
    ) -> list[StreamEvent]:
        async def read() -> Any:
            if register is None:
                return await self._reads.xrange(key, min=f"({cursor}", max=until, count=RANGE_COUNT)
            pipe = self._reads.pipeline(transaction=False)
            self._reader.add_registration(pipe, key, register)
            pipe.xrange(key, min=f"({cursor}", max=until, count=RANGE_COUNT)
            return (await pipe.execute())[-1]

        entries: Any = await read_retrying(read, ended, self._idle_check, known_ended)
        return [decode_entry(entry_id, fields) for entry_id, fields in entries]

    async def forget(self, run_id: str) -> None:
        """Delete the run's stream."""
        stream = self._stream(run_id)
        await self._redis.delete(
            stream, self._attempt_key(run_id), self._batch_key(run_id), followers_key(stream)
        )

    async def signal_done(self, run_id: str) -> None:
        """Wake every waiter of the run on every instance."""
        await self._signals.publish(run_id)

    def done_waiter(self, run_id: str) -> AbstractAsyncContextManager[CompletionWaiter]:
        """Register for the run's completion before reading its status."""
        return self._signals.waiter(run_id)
