"""Backends under contract: every implementation of a protocol passes the same tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from redis.asyncio import Redis

from runyard.domain.group_caps import GroupCap, GroupCaps
from runyard.queue.redis_bus import NotificationListener
from runyard.queue.redis_queue import DatabaseFallbackQueue, RedisRunQueue
from runyard.queue.run_queue import InProcessRunQueue
from runyard.streaming.broker import InMemoryEventBroker
from runyard.streaming.redis_broker import CompletionSignals, RedisEventBroker
from runyard.streaming.redis_reader import StreamReader
from tests.support.cancel_buses import CancelBuses

REDIS_URL = "redis://127.0.0.1:6379/0"
# How long a broker's subscription waits for an event before it asks whether the run ended.
IDLE_CHECK_SECONDS = 0.2
# How long a subscription told its run ended waits for the last events (5 s in service).
FINAL_GRACE_SECONDS = 1.0


@pytest.fixture
async def redis() -> AsyncIterator[Redis]:
    """A Redis client; keys under the test's prefix are removed afterwards."""
    client = Redis.from_url(REDIS_URL)
    try:
        yield client
    finally:
        await client.aclose()


async def _drop_prefix(client: Redis, prefix: str) -> None:
    keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
    if keys:
        await client.delete(*keys)


def _no_runs_here(run_id: str, action: str) -> bool:
    return False


@asynccontextmanager
async def _instance_broker(redis: Redis, prefix: str) -> AsyncIterator[RedisEventBroker]:
    """A Redis broker as an instance runs it: a stream reader and a listener for completion
    signals, both on blocking connections of their own."""
    signals = CompletionSignals(redis, f"{prefix}done")
    blocking = Redis.from_url(REDIS_URL)
    reader = StreamReader(blocking, f"{prefix}events", connections=2, sweep_seconds=1.0)
    listener = NotificationListener(blocking, f"{prefix}cancel", _no_runs_here, signals)
    stop = asyncio.Event()
    loops = [
        asyncio.create_task(reader.run_forever(stop)),
        asyncio.create_task(listener.run_forever(stop)),
    ]
    try:
        await asyncio.wait_for(listener.connected.wait(), 10)
        yield RedisEventBroker(
            redis,
            prefix,
            signals,
            retention_seconds=60,
            idle_check_seconds=IDLE_CHECK_SECONDS,
            reader=reader,
            final_events_grace_seconds=FINAL_GRACE_SECONDS,
        )
    finally:
        stop.set()
        for loop in loops:
            loop.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        await blocking.aclose()


@pytest.fixture(params=["memory", "redis"])
async def broker(request: pytest.FixtureRequest, redis: Redis) -> AsyncIterator[Any]:
    """An event broker of each kind."""
    if request.param == "memory":
        yield InMemoryEventBroker(
            idle_check_seconds=IDLE_CHECK_SECONDS, final_events_grace_seconds=FINAL_GRACE_SECONDS
        )
        return
    prefix = f"contract-{uuid.uuid4().hex[:8]}:"
    try:
        async with _instance_broker(redis, prefix) as made:
            yield made
    finally:
        await _drop_prefix(redis, prefix)


@pytest.fixture(params=["memory", "redis"])
async def two_brokers(request: pytest.FixtureRequest, redis: Redis) -> AsyncIterator[Any]:
    """The brokers of two instances of one deployment. In-memory there is one process, so
    both are the same broker: what one instance does, every waiter and follower sees."""
    if request.param == "memory":
        only = InMemoryEventBroker(
            idle_check_seconds=IDLE_CHECK_SECONDS, final_events_grace_seconds=FINAL_GRACE_SECONDS
        )
        yield only, only
        return
    prefix = f"contract-{uuid.uuid4().hex[:8]}:"
    try:
        async with _instance_broker(redis, prefix) as one, _instance_broker(redis, prefix) as two:
            yield one, two
    finally:
        await _drop_prefix(redis, prefix)


async def _database_not_asked(skipped_groups: list[str]) -> str | None:
    raise AssertionError("the fallback polled the database while Redis answered")


@asynccontextmanager
async def _queue_of_kind(kind: str, redis: Redis, caps: GroupCaps | None) -> AsyncIterator[Any]:
    """A run queue: in-process, Redis, or Redis behind the database fallback (Redis
    reachable: the fallback must keep the Redis queue's contract and never poll)."""
    if kind == "memory":
        queue = InProcessRunQueue(caps)
        try:
            yield queue
        finally:
            await queue.close()
        return
    prefix = f"contract-{uuid.uuid4().hex[:8]}:"
    inner = RedisRunQueue(redis, prefix, caps=caps)
    try:
        if kind == "redis":
            yield inner
        else:
            yield DatabaseFallbackQueue(inner, _database_not_asked, poll_interval=0.05)
    finally:
        await _drop_prefix(redis, prefix)


@pytest.fixture(params=["memory", "redis", "fallback"])
async def run_queue(request: pytest.FixtureRequest, redis: Redis) -> AsyncIterator[Any]:
    """A run queue of each kind (see `_queue_of_kind`)."""
    async with _queue_of_kind(request.param, redis, None) as queue:
        yield queue


CAPPED = GroupCaps(overrides={"capped": GroupCap(max_running=1)})


@pytest.fixture(params=["memory", "redis", "fallback"])
async def capped_queue(request: pytest.FixtureRequest, redis: Redis) -> AsyncIterator[Any]:
    """A run queue of each kind whose group "capped" has a cap (other groups have none)."""
    async with _queue_of_kind(request.param, redis, CAPPED) as queue:
        yield queue


@pytest.fixture(params=["in-process", "redis"])
async def cancel_buses(request: pytest.FixtureRequest, redis: Redis) -> AsyncIterator[CancelBuses]:
    """The instances of a deployment, on each kind of cancel bus."""
    buses = CancelBuses(request.param, redis if request.param == "redis" else None)
    try:
        yield buses
    finally:
        await buses.close()
        await _drop_prefix(redis, buses.prefix)
