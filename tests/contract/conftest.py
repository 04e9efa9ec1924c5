"""Backends under contract: every implementation of a protocol passes the same tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from runyard.queue.redis_queue import DatabaseFallbackQueue, RedisRunQueue
from runyard.queue.run_queue import InProcessRunQueue
from runyard.streaming.broker import InMemoryEventBroker
from runyard.streaming.redis_broker import CompletionSignals, RedisEventBroker
from runyard.streaming.redis_reader import StreamReader

REDIS_URL = "redis://127.0.0.1:6379/0"
# How long a broker's subscription waits for an event before it asks whether the run ended.
IDLE_CHECK_SECONDS = 0.2


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


@pytest.fixture(params=["memory", "redis"])
async def broker(request: pytest.FixtureRequest, redis: Redis) -> AsyncIterator[Any]:
    """An event broker of each kind."""
    if request.param == "memory":
        yield InMemoryEventBroker(idle_check_seconds=IDLE_CHECK_SECONDS)
        return
    prefix = f"contract-{uuid.uuid4().hex[:8]}:"
    signals = CompletionSignals(redis, f"{prefix}done")
    # The stream reader blocks on connections of its own, as in an instance.
    blocking = Redis.from_url(REDIS_URL)
    reader = StreamReader(blocking, f"{prefix}events", connections=2, sweep_seconds=1.0)
    stop = asyncio.Event()
    reading = asyncio.create_task(reader.run_forever(stop))
    try:
        yield RedisEventBroker(
            redis,
            prefix,
            signals,
            retention_seconds=60,
            idle_check_seconds=IDLE_CHECK_SECONDS,
            reader=reader,
        )
    finally:
        stop.set()
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        await blocking.aclose()
        await _drop_prefix(redis, prefix)


async def _database_not_asked() -> str | None:
    raise AssertionError("the fallback polled the database while Redis answered")


@pytest.fixture(params=["memory", "redis", "fallback"])
async def run_queue(request: pytest.FixtureRequest, redis: Redis) -> AsyncIterator[Any]:
    """A run queue of each kind: in-process, Redis, and Redis behind the database fallback
    (Redis reachable: the fallback must keep the Redis queue's contract and never poll)."""
    if request.param == "memory":
        queue = InProcessRunQueue()
        yield queue
        await queue.close()
        return
    prefix = f"contract-{uuid.uuid4().hex[:8]}:"
    inner = RedisRunQueue(redis, prefix)
    try:
        if request.param == "redis":
            yield inner
        else:
            yield DatabaseFallbackQueue(inner, _database_not_asked, poll_interval=0.05)
    finally:
        await _drop_prefix(redis, prefix)

