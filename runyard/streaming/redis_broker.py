"""Run events in Redis Streams: ordered ids, replay and blocking reads in one primitive.

Why Streams rather than pub/sub plus a list: XADD assigns a unique, ordered id to every
event, XRANGE replays from any id, and XREAD BLOCK follows live events, so resuming with
Last-Event-ID on any instance is exact without a second bookkeeping structure. Each run's
stream is capped (MAXLEN ~) and expires after the retention period.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runyard.domain.errors import StaleAttemptError
from runyard.streaming.broker import (
    IDLE_CHECK_SECONDS,
    CompletionWaiter,
    Ended,
    LocalWaiters,
    StreamEvent,
)

log = logging.getLogger("runyard.broker")

_CONTROL_DONE = "__done__"

# Appends events (ARGV[7..]: event, data, event, data...) only while the publisher's
# attempt is the run's current one (fencing), and returns the last id. ARGV[4] = '1' first
# records the attempt as the newest (an older one can never lower it); a non-empty ARGV[5]
# is a channel on which the run id (ARGV[6]) is published afterwards.
_FENCED_XADD = """
local attempt = tonumber(ARGV[1])
local current = redis.call('GET', KEYS[2])
if attempt >= 0 and current and tonumber(current) > attempt then
  return false
end
if ARGV[4] == '1' and (not current or tonumber(current) < attempt) then
  redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[3])
end
local id = ''
for i = 7, #ARGV, 2 do
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*',
                  'event', ARGV[i], 'data', ARGV[i + 1])
end
if #ARGV >= 7 then
  redis.call('EXPIRE', KEYS[1], ARGV[3])
end
if ARGV[5] ~= '' then
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
return id
"""


class RedisEventBroker:
    """Per-run Redis streams, fenced by attempt, with completion signals over pub/sub."""

    def __init__(
        self,
        redis: Redis,
        prefix: str,
        signals: CompletionSignals,
        retention_seconds: float,
        max_events: int = 10_000,
        idle_check_seconds: float = IDLE_CHECK_SECONDS,
    ) -> None:
        self._idle_check_ms = max(1, int(idle_check_seconds * 1000))
        self._redis = redis
        self._prefix = prefix
        self._signals = signals
        self._retention = int(retention_seconds)
        self._max_events = max_events
        self._xadd: Any = redis.register_script(_FENCED_XADD)
        self._unreachable = False

    def _stream(self, run_id: str) -> str:
        return f"{self._prefix}run:{run_id}:events"

    def _attempt_key(self, run_id: str) -> str:
        return f"{self._prefix}run:{run_id}:attempt"

    async def begin_attempt(
        self, run_id: str, attempt: int, events: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Fence out every older attempt's publishing, then publish `events` as this
        attempt, in one round trip."""
        await self._append(run_id, _flat(events), attempt, begin=True)

    async def publish(self, run_id: str, event: str, data: str, attempt: int | None = None) -> str:
        """Append an event; a stale attempt's event is refused.

        While Redis is unreachable the event is dropped (and "" returned): the run goes on
        and its outcome is recorded in the database; failing the run for lost events would
        lose the work they describe.
        """
        return await self._append(run_id, [event, data], attempt)

    async def publish_batch(
        self, run_id: str, events: Sequence[tuple[str, str]], attempt: int | None = None
    ) -> str:
        """Append several events in order in one script call (fenced like `publish`)."""
        if not events:
            return ""
        return await self._append(run_id, _flat(events), attempt)

    async def _append(
        self,
        run_id: str,
        pairs: list[str],
        attempt: int | None,
        begin: bool = False,
        signal: bool = False,
    ) -> str:
        try:
            result = await self._xadd(
                keys=[self._stream(run_id), self._attempt_key(run_id)],
                args=[
                    -1 if attempt is None else attempt,
                    self._max_events,
                    self._retention,
                    "1" if begin else "0",
                    self._signals.channel if signal else "",
                    run_id,
                    *pairs,
                ],
            )
        except (RedisError, OSError) as exc:
            if not self._unreachable:
                self._unreachable = True
                log.warning("events_dropped_redis_unreachable run_id=%s error=%s", run_id, exc)
            return ""
        if self._unreachable:
            self._unreachable = False
            log.info("events_published_again run_id=%s", run_id)
        if result is None:
            raise StaleAttemptError(f"attempt {attempt} of run {run_id} is no longer current")
        return result.decode() if isinstance(result, bytes) else str(result)

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
        pairs = [*_flat(last_events), _CONTROL_DONE, ""]
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
        """Replay after `after`, then follow with XREAD BLOCK until the done entry.

        A blocking read that comes back empty asks `ended`: a run that ended without its
        done entry (Redis lost its last events) still ends the subscription.
        """
        key = self._stream(run_id)
        if after == "$":
            last = await self._redis.xrevrange(key, count=1)
            cursor = _decode(last[0][0]) if last else "0-0"
        else:
            cursor = after if after and _looks_like_id(after) else "0-0"
        while True:
            entries: Any
            if follow:
                answer: Any = await self._redis.xread(
                    {key: cursor}, count=200, block=self._idle_check_ms
                )
                entries = answer[0][1] if answer else []
                if not entries and ended is not None and await ended():
                    follow = False
                    continue
            else:
                entries = await self._redis.xrange(key, min=f"({cursor}", count=200)
            for entry_id, fields in entries:
                cursor = _decode(entry_id)
                event = _decode(fields.get(b"event", fields.get("event", b"")))
                if event == _CONTROL_DONE:
                    return
                data = _decode(fields.get(b"data", fields.get("data", b"")))
                yield StreamEvent(cursor, event, data)
            if not follow and len(entries) < 200:
                return

    async def forget(self, run_id: str) -> None:
        """Delete the run's stream."""
        await self._redis.delete(self._stream(run_id), self._attempt_key(run_id))

    async def signal_done(self, run_id: str) -> None:
        """Wake every waiter of the run on every instance."""
        await self._signals.publish(run_id)

    def done_waiter(self, run_id: str) -> AbstractAsyncContextManager[CompletionWaiter]:
        """Register for the run's completion before reading its status."""
        return self._signals.waiter(run_id)


def _flat(events: Sequence[tuple[str, str]]) -> list[str]:
    return [part for event in events for part in event]


def _decode(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _looks_like_id(value: str) -> bool:
    head, _, tail = value.partition("-")
    return head.isdigit() and (tail == "" or tail.isdigit())


class CompletionSignals(LocalWaiters):
    """Local waiters, resolved by `done` messages the shared pub/sub listener receives."""

    def __init__(self, redis: Redis, channel: str) -> None:
        super().__init__()
        self._redis = redis
        self.channel = channel

    async def publish(self, run_id: str) -> None:
        """Announce a run's completion to every instance (and resolve local waiters now)."""
        self.resolve(run_id)
        await self._redis.publish(self.channel, run_id)
