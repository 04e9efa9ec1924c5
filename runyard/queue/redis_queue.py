"""The Redis job queue: a list of run ids, a sorted set for delayed starts, LPOS for sweeps."""

from __future__ import annotations

import logging
import time
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

log = logging.getLogger("runyard.queue")

# Moves due delayed runs onto the queue atomically, so two instances never both move one.
_PROMOTE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
for _, id in ipairs(due) do
  if redis.call('ZREM', KEYS[1], id) == 1 then
    redis.call('RPUSH', KEYS[2], id)
  end
end
return #due
"""


class RedisRunQueue:
    """RPUSH on submit, BLPOP in worker loops; the database stays the source of truth.

    `blocking` (default: `redis`) serves the worker loops' BLPOP and the promotion of
    delayed runs, so a parked BLPOP never takes a connection the request path needs.
    """

    def __init__(self, redis: Redis, prefix: str, blocking: Redis | None = None) -> None:
        self._redis = redis
        self._blocking = blocking if blocking is not None else redis
        self.queue_key = f"{prefix}queue"
        self.delayed_key = f"{prefix}delayed"
        self._promote: Any = self._blocking.register_script(_PROMOTE)
        self._last_promote = 0.0

    async def push(self, run_id: str, delay: float = 0.0) -> None:
        """Enqueue now, or park in the delayed set until due."""
        if delay > 0:
            await self._redis.zadd(self.delayed_key, {run_id: time.time() + delay})
        else:
            await self._redis.rpush(self.queue_key, run_id)

    async def pop(self, timeout: float) -> str | None:
        """Promote due delayed runs (at most every 0.5 s), then block on the queue."""
        now = time.time()
        if now - self._last_promote >= 0.5:
            self._last_promote = now
            await self._promote(keys=[self.delayed_key, self.queue_key], args=[now])
        item = await self._blocking.blpop([self.queue_key], timeout=max(timeout, 0.01))
        if item is None:
            return None
        value = item[1]
        return value.decode() if isinstance(value, bytes) else str(value)

    async def queued(self, run_ids: list[str]) -> set[str]:
        """Which ids sit in the queue or the delayed set (one pipelined round trip)."""
        if not run_ids:
            return set()
        pipe = self._redis.pipeline(transaction=False)
        for run_id in run_ids:
            pipe.lpos(self.queue_key, run_id)
            pipe.zscore(self.delayed_key, run_id)
        answers = await pipe.execute()
        found = set()
        for index, run_id in enumerate(run_ids):
            if answers[2 * index] is not None or answers[2 * index + 1] is not None:
                found.add(run_id)
        return found

    async def depth(self) -> int:
        """How many run ids wait in the queue."""
        return int(await self._redis.llen(self.queue_key))

    async def close(self) -> None:
        """Nothing owned here: the Redis client is closed by the runtime."""


class DatabaseFallbackQueue:
    """Wraps the Redis queue: while Redis is unreachable, workers find work in the database."""

    def __init__(self, inner: RedisRunQueue, find_claimable: Any, poll_interval: float) -> None:
        self._inner = inner
        self._find_claimable = find_claimable
        self._poll_interval = poll_interval
        self.redis_down_since: float | None = None

    async def push(self, run_id: str, delay: float = 0.0) -> None:
        """Push to Redis; a failed push is logged, the database poll will find the run."""
        try:
            await self._inner.push(run_id, delay)
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
