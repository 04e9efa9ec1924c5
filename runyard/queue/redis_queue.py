"""The Redis job queue: one list of run ids per priority, a sorted set for delayed starts,
LPOS for sweeps.

BLPOP takes the first non-empty list in the order the keys are given, so naming the lists
from priority -5 to 5 pops by priority, then first come first served, in one command.
Priority 0, the default, keeps the list key of earlier versions (`<prefix>queue`), so runs
queued before an upgrade are still found.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runyard.domain.priority import DEFAULT_PRIORITY, PRIORITY_FIRST, PRIORITY_LAST

log = logging.getLogger("runyard.queue")

# Moves due delayed runs onto the list of their priority atomically, so two instances never
# both move one. KEYS: the delayed set, the hash of delayed runs' priorities, then the lists
# from the first priority to the last; ARGV: now, the first priority.
_PROMOTE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(due) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    local priority = tonumber(redis.call('HGET', KEYS[2], id) or '0')
    redis.call('HDEL', KEYS[2], id)
    redis.call('RPUSH', KEYS[3 + priority - tonumber(ARGV[2])], id)
  end
end
return #due
"""


def priority_lists(prefix: str) -> list[str]:
    """The queue's list keys, the first priority's first (priority 0 is `<prefix>queue`)."""
    return [
        f"{prefix}queue" if priority == DEFAULT_PRIORITY else f"{prefix}queue:{priority}"
        for priority in range(PRIORITY_FIRST, PRIORITY_LAST + 1)
    ]


class RedisRunQueue:
    """RPUSH on submit, BLPOP in worker loops; the database stays the source of truth.

    `blocking` (default: `redis`) serves the worker loops' BLPOP and the promotion of
    delayed runs, so a parked BLPOP never takes a connection the request path needs.
    """

    def __init__(self, redis: Redis, prefix: str, blocking: Redis | None = None) -> None:
        self._redis = redis
        self._blocking = blocking if blocking is not None else redis
        self.queue_key = f"{prefix}queue"
        self.lists = priority_lists(prefix)
        self.delayed_key = f"{prefix}delayed"
        self.delayed_priority_key = f"{prefix}delayed:priority"
        self._promote: Any = self._blocking.register_script(_PROMOTE)
        self._last_promote = 0.0

    async def push(self, run_id: str, delay: float = 0.0, priority: int = DEFAULT_PRIORITY) -> None:
        """Enqueue on the list of `priority` now, or park in the delayed set until due."""
        if delay > 0:
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(self.delayed_priority_key, run_id, str(priority))
            pipe.zadd(self.delayed_key, {run_id: time.time() + delay})
            await pipe.execute()
        else:
            await self._redis.rpush(self.lists[priority - PRIORITY_FIRST], run_id)

    async def pop(self, timeout: float) -> str | None:
        """Promote due delayed runs (at most every 0.5 s), then block on the queue."""
        now = time.time()
        if now - self._last_promote >= 0.5:
            self._last_promote = now
            keys = [self.delayed_key, self.delayed_priority_key, *self.lists]
            await self._promote(keys=keys, args=[now, PRIORITY_FIRST])
        item = await self._blocking.blpop(self.lists, timeout=max(timeout, 0.01))
        if item is None:
            return None
        value = item[1]
        return value.decode() if isinstance(value, bytes) else str(value)

    async def queued(self, run_ids: list[str]) -> set[str]:
        """Which ids sit in the queue or the delayed set (two pipelined round trips: the
        lengths of the lists, then LPOS only in those that hold runs)."""
        if not run_ids:
            return set()
        lengths = await self._lengths()
        busy = [key for key, length in zip(self.lists, lengths, strict=True) if length]
        pipe = self._redis.pipeline(transaction=False)
        for run_id in run_ids:
            for key in busy:
                pipe.lpos(key, run_id)
            pipe.zscore(self.delayed_key, run_id)
        answers = await pipe.execute()
        per_run = len(busy) + 1
        found = set()
        for index, run_id in enumerate(run_ids):
            mine = answers[index * per_run : (index + 1) * per_run]
            if any(answer is not None for answer in mine):
                found.add(run_id)
        return found

    async def depth(self) -> int:
        """How many run ids wait in the queue, every priority together."""
        return sum(await self._lengths())

    async def _lengths(self) -> list[int]:
        pipe = self._redis.pipeline(transaction=False)
        for key in self.lists:
            pipe.llen(key)
        return [int(length) for length in await pipe.execute()]

    async def close(self) -> None:
        """Nothing owned here: the Redis client is closed by the runtime."""


class DatabaseFallbackQueue:
    """Wraps the Redis queue: while Redis is unreachable, workers find work in the database."""

    def __init__(self, inner: RedisRunQueue, find_claimable: Any, poll_interval: float) -> None:
        self._inner = inner
        self._find_claimable = find_claimable
        self._poll_interval = poll_interval
        self.redis_down_since: float | None = None

    async def push(self, run_id: str, delay: float = 0.0, priority: int = DEFAULT_PRIORITY) -> None:
        """Push to Redis; a failed push is logged, the database poll will find the run."""
        try:
            await self._inner.push(run_id, delay, priority)
            self._mark_up()
        except (RedisError, OSError) as exc:
            self._mark_down(exc)

    async def pop(self, timeout: float) -> str | None:
        """Pop from Redis, or poll the database for a claimable run while Redis is down."""
        if self.redis_down_since is None:
            try:
                return await self._inner.pop(timeout)
            except (RedisError, OSError) as exc:
                self._mark_down(exc)
        run_id = await self._find_claimable()
        if run_id is not None:
            return str(run_id)
        import asyncio

        await asyncio.sleep(self._poll_interval)
        try:
            await self._inner.depth()
            self._mark_up()
        except (RedisError, OSError):
            pass
        return None

    async def queued(self, run_ids: list[str]) -> set[str]:
        """Delegate; with Redis down nothing counts as queued (the poll covers it)."""
        try:
            return await self._inner.queued(run_ids)
        except (RedisError, OSError) as exc:
            self._mark_down(exc)
            return set()

    async def depth(self) -> int:
        """The Redis queue's length (raises while Redis is unreachable)."""
        return await self._inner.depth()

    async def close(self) -> None:
        """Close the inner queue."""
        await self._inner.close()

    def _mark_down(self, exc: BaseException) -> None:
        if self.redis_down_since is None:
            self.redis_down_since = time.monotonic()
            log.warning("redis_unreachable fallback=database_poll error=%s", exc)

    def _mark_up(self) -> None:
        if self.redis_down_since is not None:
            log.info("redis_reachable_again fallback=off")
            self.redis_down_since = None
