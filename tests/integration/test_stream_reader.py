"""The Redis broker's shared stream reader, on a real Redis: connections stay few whatever
the subscribers, a slow subscriber holds nobody back, and a failed append is retried."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import pytest
import redis as sync_redis

from runyard.queue.redis_connections import RedisConnections
from runyard.streaming.broker import StreamEvent
from runyard.streaming.feed import FEED_BUFFER_BYTES
from runyard.streaming.redis_broker import CompletionSignals, RedisEventBroker
from runyard.streaming.redis_reader import StreamReader
from tests.support.server import free_port
from tests.support.throwaway import ThrowawayRedis

SHARED_REDIS = "redis://127.0.0.1:6379/0"


@dataclass
class Parts:
    """A broker on small connection budgets, and what it was built from."""

    broker: RedisEventBroker
    connections: RedisConnections
    prefix: str
    reader: StreamReader


@pytest.fixture
def private_redis() -> Iterator[ThrowawayRedis]:
    """A redis-server only this test uses, so it may stop it."""
    server = ThrowawayRedis(free_port()).start()
    try:
        yield server
    finally:
        server.stop()


async def _parts(
    url: str, retry: float = 0.0, sweep: float = 1.0, prefix: str | None = None
) -> AsyncIterator[Parts]:
    prefix = prefix or f"reader-test-{uuid.uuid4().hex[:8]}:"
    connections = RedisConnections.open(
        url,
        prefix,
        stream_readers=1,
        worker_loops=0,
        worker_connections=2,
        request_connections=2,
    )
    reader = StreamReader(connections.blocking, f"{prefix}events", 1, sweep)
    stop = asyncio.Event()
    reading = asyncio.create_task(reader.run_forever(stop))
    broker = RedisEventBroker(
        connections.worker,
        prefix,
        CompletionSignals(connections.worker, f"{prefix}done"),
        retention_seconds=60,
        idle_check_seconds=0.5,
        reader=reader,
        reads=connections.requests,
        append_retry_seconds=retry,
    )
    try:
        yield Parts(broker, connections, prefix, reader)
    finally:
        stop.set()
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        try:
            keys = [k async for k in connections.requests.scan_iter(match=f"{prefix}*")]
            if keys:
                await connections.requests.delete(*keys)
        except OSError:
            pass
        await connections.aclose()


@pytest.fixture
async def parts() -> AsyncIterator[Parts]:
    """A broker on the shared Redis: one reader connection, two for writes, two for reads."""
    async for made in _parts(SHARED_REDIS):
        yield made


async def _collect(events: AsyncIterator[StreamEvent]) -> list[str]:
    return [event.data async for event in events]


def _named_connections(prefix: str) -> int:
    with sync_redis.Redis.from_url(SHARED_REDIS, socket_timeout=5) as client:
        return sum(1 for c in client.client_list() if str(c.get("name", "")).startswith(prefix))


@pytest.mark.timeout(60)
async def test_many_subscribers_share_a_few_connections(parts: Parts) -> None:
    """300 subscribers on 300 runs, with 5 connections in all: every event reaches every one."""
    runs = [f"run-{index}" for index in range(300)]
    readers = [asyncio.create_task(_collect(parts.broker.subscribe(run))) for run in runs]
    await asyncio.sleep(0.5)

    async def publish(run: str) -> None:
        for index in range(3):
            await parts.broker.publish(run, "custom", f"{run}:{index}", attempt=1)
        await parts.broker.finish(run, attempt=1, last_events=[("end", "null")])

    await asyncio.gather(*(publish(run) for run in runs))
    received = await asyncio.gather(*readers)
    for run, data in zip(runs, received, strict=True):
        assert data == [f"{run}:0", f"{run}:1", f"{run}:2", "null"]
    # Blocking budget: one fetch loop + 3; two for writes; two for the request path.
    assert _named_connections(parts.prefix) <= 4 + 2 + 2


@pytest.mark.timeout(60)
async def test_a_slow_subscriber_holds_nobody_back_and_loses_nothing(parts: Parts) -> None:
    """One subscriber stops reading while more than its buffer is published: the other
    receives everything meanwhile, and the slow one, reading again, catches up in order."""
    payload = "x" * (64 * 1024)
    count = FEED_BUFFER_BYTES // len(payload) * 2
    slow = parts.broker.subscribe("busy")
    first = await asyncio.wait_for(_first(slow, parts), 10)
    fast = asyncio.create_task(_collect(parts.broker.subscribe("busy", after=first.id)))
    await asyncio.sleep(0.3)
    for index in range(count):
        await parts.broker.publish("busy", "custom", f"{index}:{payload}", attempt=1)
    await parts.broker.finish("busy", attempt=1)
    fast_got = await asyncio.wait_for(fast, 20)
    assert [d.split(":", 1)[0] for d in fast_got] == [str(i) for i in range(count)]
    slow_got = await asyncio.wait_for(_collect(slow), 20)
    assert [d.split(":", 1)[0] for d in slow_got] == [str(i) for i in range(count)]


async def _first(events: AsyncIterator[StreamEvent], parts: Parts) -> StreamEvent:
    await parts.broker.publish("busy", "metadata", "start", attempt=1)
    return await anext(events)


@pytest.mark.timeout(60)
async def test_an_append_redis_cannot_take_now_is_retried_not_dropped(
    private_redis: ThrowawayRedis,
) -> None:
    """Redis away for a second, well within the retry span: the event is appended once when
    it is back, and a subscriber that was waiting receives it."""
    async for made in _parts(private_redis.url, retry=10.0):
        got: list[str] = []
        first = asyncio.Event()
        subscriber = asyncio.create_task(_append_to(got, first, made.broker.subscribe("r1")))
        await made.broker.publish("r1", "metadata", "first", attempt=1)
        await asyncio.wait_for(first.wait(), 10)
        private_redis.stop()
        publishing = asyncio.create_task(made.broker.publish("r1", "custom", "second", attempt=1))
        await asyncio.sleep(1.0)
        assert not publishing.done()
        private_redis.start()
        await asyncio.wait_for(publishing, 15)
        await made.broker.finish("r1", attempt=1)
        stored = await _collect(made.broker.subscribe("r1", follow=False))
        assert stored == ["second"]  # Redis came back empty: only what was appended since
        await asyncio.wait_for(subscriber, 15)
        assert got == ["first", "second"]


async def _append_to(
    got: list[str], first: asyncio.Event, events: AsyncIterator[StreamEvent]
) -> None:
    async for event in events:
        got.append(event.data)
        first.set()


def _calls(url: str, command: str) -> int:
    with sync_redis.Redis.from_url(url, socket_timeout=5) as client:
        stats = client.info("commandstats").get(f"cmdstat_{command}")
        return int(stats["calls"]) if stats else 0


@pytest.fixture
async def quiet_parts(private_redis: ThrowawayRedis) -> AsyncIterator[Parts]:
    """A broker on a Redis of its own, whose reader does not sweep during a test."""
    async for made in _parts(private_redis.url, sweep=60.0):
        yield made


@pytest.mark.timeout(60)
async def test_live_events_need_no_read_of_their_own(
    private_redis: ThrowawayRedis, quiet_parts: Parts
) -> None:
    """A subscriber reads what is stored once; every live event after that reaches it in
    the announcement of its append, with no read of the stream (a read costs a round trip
    before a stream's first event)."""
    broker, reader = quiet_parts.broker, quiet_parts.reader
    await _until(lambda: _listening(private_redis.url, reader.channel))
    reads = _calls(private_redis.url, "xrange")
    events = broker.subscribe("r1")
    first = asyncio.create_task(_next(events))
    await _until(lambda: reader.followed() == 1)
    await broker.publish("r1", "metadata", "first", attempt=1)
    assert (await asyncio.wait_for(first, 10)).data == "first"
    await broker.publish("r1", "values", "second", attempt=1)
    await broker.finish("r1", attempt=1, last_events=[("end", "null")])
    assert await asyncio.wait_for(_collect(events), 10) == ["second", "null"]
    assert _calls(private_redis.url, "xrange") - reads == 1
    # Its subscriber is on the appending instance: nothing was announced.
    assert _calls(private_redis.url, "publish") == 0


@pytest.fixture
async def two_instances(private_redis: ThrowawayRedis) -> AsyncIterator[tuple[Parts, Parts]]:
    """Two instances' brokers on one Redis and one key prefix, readers that do not sweep."""
    prefix = f"reader-test-{uuid.uuid4().hex[:8]}:"
    async for first in _parts(private_redis.url, sweep=60.0, prefix=prefix):
        async for second in _parts(private_redis.url, sweep=60.0, prefix=prefix):
            yield first, second


@pytest.mark.timeout(60)
async def test_a_subscriber_on_another_instance_hears_of_each_append(
    private_redis: ThrowawayRedis, two_instances: tuple[Parts, Parts]
) -> None:
    """A run executed on one instance and followed on another: the follower registers with
    its one read, learns of every append from its announcement, and withdraws when done;
    a run nobody follows elsewhere is not announced."""
    here, there = two_instances
    await _until(lambda: _listening(private_redis.url, here.reader.channel, subscribers=2))
    await there.broker.publish("quiet", "metadata", "nobody", attempt=1)
    await there.broker.finish("quiet", attempt=1)
    assert _calls(private_redis.url, "publish") == 0

    await there.broker.publish("r1", "metadata", "before", attempt=1)
    reads = _calls(private_redis.url, "xrange")
    events = here.broker.subscribe("r1")
    assert (await asyncio.wait_for(_next(events), 10)).data == "before"
    followers = f"{here.prefix}run:r1:events:followers"
    assert _hash(private_redis.url, followers) == [here.reader.registry.instance]
    for index in range(3):
        await there.broker.publish("r1", "values", str(index), attempt=1)
    await there.broker.finish("r1", attempt=1, last_events=[("end", "null")])
    assert await asyncio.wait_for(_collect(events), 10) == ["0", "1", "2", "null"]
    assert _calls(private_redis.url, "xrange") - reads == 1
    assert _calls(private_redis.url, "publish") == 4
    here.reader.sweep()  # withdrawals go with the next sweep
    await _until(lambda: _hash(private_redis.url, followers) == [])


def _hash(url: str, key: str) -> list[str]:
    with sync_redis.Redis.from_url(url, socket_timeout=5, decode_responses=True) as client:
        return sorted(client.hkeys(key))


def _listening(url: str, channel: str, subscribers: int = 1) -> bool:
    with sync_redis.Redis.from_url(url, socket_timeout=5) as client:
        return bool(client.pubsub_numsub(channel)[0][1] >= subscribers)


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(250):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met within 5 s")


async def _next(events: AsyncIterator[StreamEvent]) -> StreamEvent:
    return await anext(events)
