"""The Redis job queue: fair across groups, by priority within one, delayed starts, sweeps.

- `<prefix>queue:group:<group>`: a sorted set per fairness group of its waiting run ids,
  scored by priority, then arrival (a counter, `<prefix>queue:arrivals`).
- `<prefix>queue:turns`: the groups with runs waiting, the one whose turn it is first.
- `<prefix>queue:waiting`: a hash of every waiting run id to its group, for the sweeper's
  check, which looks in the group's set too (a run whose entry was lost is pushed again);
  a run pushed while it waits is not queued twice.
- `<prefix>queue:ready`: wake-ups for the worker loops parked on BLPOP (one per push,
  capped); a wake-up is only a hint, the pop script decides what is taken.
- `<prefix>delayed`, `<prefix>delayed:placing`: runs created with `after_seconds`, by due
  time, and the priority and group each is queued with once due.
- `<prefix>queue:hold:<group>`: set (with an expiry) while a group is held by a cap
  (runyard/domain/group_caps.py): the pop script passes the group's turn on to the next
  group. A run popped from a capped group holds it (value: the run id) until its claim is
  decided, so one claim of the group is in flight at a time; a claim refused by a cap holds
  it (value `held`) for a while, and the run goes back with the score it was popped with,
  so it keeps its place.

A pop (one script) takes the first run of the group whose turn it is, and sends the group
last if it has more: deficit round robin with every group's quantum one run (langgraph-sdk
0.4.14, whose Priority API this follows, has no fairness weight), so each group with a
backlog gets a run in turn whatever the others queued. Pushes and pops are scripts, so
two instances never see a group half-updated. Group keys are named inside the scripts:
this needs one Redis (not a cluster), as every other key of a deployment does.

`<prefix>queue`, the single list of earlier versions, is still popped first, so runs
queued before an upgrade are not stranded.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from runyard.domain.group_caps import PROBE_SECONDS, GroupCaps
from runyard.domain.priority import DEFAULT_FAIRNESS_GROUP, DEFAULT_PRIORITY, PRIORITY_FIRST
from runyard.queue.redis_queue_scripts import HOLD, POP, PROMOTE, PUSH, SETTLE

log = logging.getLogger("runyard.queue")

# Places of recently popped runs kept for `hold` (only needed between a pop and its claim).
PLACES_KEPT = 10_000


class RedisRunQueue:
    """Push and pop scripts, BLPOP on wake-ups in worker loops; the database stays the
    source of truth.

    `blocking` (default: `redis`) serves the worker loops' BLPOP, pops and the promotion
    of delayed runs, so a parked BLPOP never takes a connection the request path needs.
    """

    def __init__(
        self,
        redis: Redis,
        prefix: str,
        blocking: Redis | None = None,
        caps: GroupCaps | None = None,
    ) -> None:
        self._redis = redis
        self._blocking = blocking if blocking is not None else redis
        self.queue_key = f"{prefix}queue"
        self.group_prefix = f"{prefix}queue:group:"
        self.turns_key = f"{prefix}queue:turns"
        self.waiting_key = f"{prefix}queue:waiting"
        self.ready_key = f"{prefix}queue:ready"
        self.arrivals_key = f"{prefix}queue:arrivals"
        self.delayed_key = f"{prefix}delayed"
        self.placing_key = f"{prefix}delayed:placing"
        self.hold_prefix = f"{prefix}queue:hold:"
        self._enqueue_keys = [self.arrivals_key, self.turns_key, self.waiting_key, self.ready_key]
        self._push: Any = self._redis.register_script(PUSH)
        self._promote: Any = self._blocking.register_script(PROMOTE)
        self._take: Any = self._blocking.register_script(POP)
        self._hold: Any = self._redis.register_script(HOLD)
        self._settle: Any = self._redis.register_script(SETTLE)
        self._last_promote = 0.0
        # Run id -> (group, score) of the runs this instance popped lately.
        self._places: OrderedDict[str, tuple[str, str]] = OrderedDict()
        # Runs popped from a capped group whose claim is not decided yet -> their group.
        self._probing: dict[str, str] = {}
        self._caps = caps or GroupCaps()
        self._caps_args = _caps_args(self._caps)

    async def push(
        self,
        run_id: str,
        delay: float = 0.0,
        priority: int = DEFAULT_PRIORITY,
        group: str = DEFAULT_FAIRNESS_GROUP,
    ) -> None:
        """Enqueue in `group` at `priority` now, or park in the delayed set until due."""
        offset = priority - PRIORITY_FIRST
        if delay > 0:
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(self.placing_key, run_id, f"{offset}|{group}")
            pipe.zadd(self.delayed_key, {run_id: time.time() + delay})
            await pipe.execute()
        else:
            args = [self.group_prefix, run_id, offset, group]
            await self._push(keys=self._enqueue_keys, args=args)

    async def pop(self, timeout: float) -> str | None:
        """Promote due delayed runs (at most every 0.5 s), take the next run; when there is
        none, wait for a wake-up and try once more."""
        now = time.time()
        if now - self._last_promote >= 0.5:
            self._last_promote = now
            keys = [*self._enqueue_keys, self.delayed_key, self.placing_key]
            await self._promote(keys=keys, args=[self.group_prefix, now])
        taken = await self._take_one(spend_wakeup=True)
        if taken is not None:
            return taken
        woken = await self._blocking.blpop([self.ready_key], timeout=max(timeout, 0.01))
        if woken is None:
            return None
        return await self._take_one(spend_wakeup=False)

    async def _take_one(self, spend_wakeup: bool) -> str | None:
        keys = [self.queue_key, self.turns_key, self.waiting_key, self.ready_key]
        args = [self.group_prefix, "1" if spend_wakeup else "0", self.hold_prefix]
        value = await self._take(keys=keys, args=[*args, *self._caps_args])
        if not value:
            return None
        run_id = _text(value[0])
        if len(value) == 4:
            group = _text(value[1])
            self._places[run_id] = (group, _text(value[2]))
            if len(self._places) > PLACES_KEPT:
                self._places.popitem(last=False)
            if _text(value[3]) == "1":
                self._probing[run_id] = group
        return run_id

    async def settle(self, run_id: str) -> None:
        """The claim of `run_id` is decided (taken, or not claimable): its capped group's
        next run may be popped."""
        group = self._probing.pop(run_id, None)
        if group is None:
            return
        keys = [self.hold_prefix + group, self.ready_key]
        await self._settle(keys=keys, args=[run_id, self.group_prefix + group])

    async def hold(self, run_id: str, group: str, priority: int, seconds: float) -> None:
        """Back to the place it was popped from in `group` (known to this instance; else
        as new at `priority`); the pop script skips the group for `seconds`."""
        self._probing.pop(run_id, None)
        place = self._places.pop(run_id, None)
        score = place[1] if place is not None and place[0] == group else ""
        keys = [self.arrivals_key, self.turns_key, self.waiting_key, self.hold_prefix + group]
        millis = max(int(seconds * 1000), 1)
        args = [self.group_prefix, run_id, group, score, priority - PRIORITY_FIRST, millis]
        await self._hold(keys=keys, args=args)

    async def lift(self, group: str) -> None:
        """End a hold a refused claim set on `group` (a run of it ended); only for a group
        with a cap, so without caps this costs nothing."""
        if not self._caps.any or not self._caps.of(group).capped:
            return
        keys = [self.hold_prefix + group, self.ready_key]
        await self._settle(keys=keys, args=["held", self.group_prefix + group])

    async def queued(self, run_ids: list[str]) -> set[str]:
        """Which ids wait in the queue or the delayed set (two pipelined round trips: their
        groups, then their places in those groups)."""
        if not run_ids:
            return set()
        pipe = self._redis.pipeline(transaction=False)
        pipe.hmget(self.waiting_key, run_ids)
        pipe.zmscore(self.delayed_key, run_ids)
        for run_id in run_ids:
            pipe.lpos(self.queue_key, run_id)
        groups, delayed, *legacy = await pipe.execute()
        found = {
            run_id
            for run_id, score, old in zip(run_ids, delayed, legacy, strict=True)
            if score is not None or old is not None
        }
        placed = [
            (run_id, _text(group))
            for run_id, group in zip(run_ids, groups, strict=True)
            if group is not None and run_id not in found
        ]
        if placed:
            pipe = self._redis.pipeline(transaction=False)
            for run_id, group in placed:
                pipe.zscore(self.group_prefix + group, run_id)
            scores = await pipe.execute()
            for (run_id, _group), score in zip(placed, scores, strict=True):
                if score is not None:
                    found.add(run_id)
        return found

    async def depth(self) -> int:
        """How many run ids wait in the queue, every group together."""
        pipe = self._redis.pipeline(transaction=False)
        pipe.hlen(self.waiting_key)
        pipe.llen(self.queue_key)
        waiting, legacy = await pipe.execute()
        return int(waiting) + int(legacy)

    async def close(self) -> None:
        """Nothing owned here: the Redis client is closed by the runtime."""


def _caps_args(caps: GroupCaps) -> list[str]:
    """The pop script's arguments about caps: probe milliseconds, capped by default, the
    groups that differ from the default."""
    if not caps.any:
        return ["0", "0", "{}"]
    default = caps.default.capped
    differ = {
        group: int(cap.capped) for group, cap in caps.overrides.items() if cap.capped != default
    }
    return [str(int(PROBE_SECONDS * 1000)), str(int(default)), json.dumps(differ)]


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class DatabaseFallbackQueue:
    """Wraps the Redis queue: while Redis is unreachable, workers find work in the database."""

    def __init__(self, inner: RedisRunQueue, find_claimable: Any, poll_interval: float) -> None:
        self._inner = inner
        # find_claimable(skipped groups) -> a claimable run id, or None.
        self._find_claimable = find_claimable
        self._poll_interval = poll_interval
        self.redis_down_since: float | None = None
        # Groups held by a cap while Redis is down, until when (monotonic clock).
        self._held: dict[str, float] = {}

    async def push(
        self,
        run_id: str,
        delay: float = 0.0,
        priority: int = DEFAULT_PRIORITY,
        group: str = DEFAULT_FAIRNESS_GROUP,
    ) -> None:
        """Push to Redis; a failed push is logged, the database poll will find the run."""
        try:
            await self._inner.push(run_id, delay, priority, group)
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
        now = time.monotonic()
        self._held = {group: until for group, until in self._held.items() if until > now}
        run_id = await self._find_claimable(sorted(self._held))
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

    async def hold(self, run_id: str, group: str, priority: int, seconds: float) -> None:
        """Hold in Redis; while Redis is down, the database poll skips the group instead
        (the run stays pending in the database, which the poll reads)."""
        until = time.monotonic() + seconds
        self._held[group] = max(self._held.get(group, 0.0), until)
        if self.redis_down_since is not None:
            return
        try:
            await self._inner.hold(run_id, group, priority, seconds)
        except (RedisError, OSError) as exc:
            self._mark_down(exc)

    async def settle(self, run_id: str) -> None:
        """Delegate; with Redis down there is no probe to lift (its hold expires)."""
        if self.redis_down_since is not None:
            return
        try:
            await self._inner.settle(run_id)
        except (RedisError, OSError) as exc:
            self._mark_down(exc)

    async def lift(self, group: str) -> None:
        """End the group's hold here, and in Redis unless it is down."""
        self._held.pop(group, None)
        if self.redis_down_since is not None:
            return
        try:
            await self._inner.lift(group)
        except (RedisError, OSError) as exc:
            self._mark_down(exc)

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
