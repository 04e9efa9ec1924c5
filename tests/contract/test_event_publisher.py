"""A run's event publisher, over the in-memory and the Redis broker."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from runyard.domain.errors import StaleAttemptError
from runyard.streaming.publisher import EventPublisher


class CountingBroker:
    """The broker under test, with its batch calls counted."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.batches: list[int] = []

    async def publish_batch(
        self, run_id: str, events: Sequence[tuple[str, str]], attempt: int | None = None
    ) -> str:
        self.batches.append(len(events))
        return str(await self.inner.publish_batch(run_id, events, attempt))


async def _stored(broker: Any, run_id: str) -> list[str]:
    await broker.finish(run_id)
    return [event.data async for event in broker.subscribe(run_id)]


async def test_events_arrive_in_order_in_fewer_round_trips(broker: Any) -> None:
    counting = CountingBroker(broker)
    await broker.begin_attempt("p1", 1)
    publisher = EventPublisher(counting, "p1", 1)  # type: ignore[arg-type]
    for n in range(50):
        await publisher.send("custom", str(n))
        if n % 10 == 0:
            await asyncio.sleep(0)  # the graph yields now and then
    await publisher.flush()
    assert await _stored(broker, "p1") == [str(n) for n in range(50)]
    assert sum(counting.batches) == 50
    assert 1 < len(counting.batches) < 50


async def test_an_event_is_published_without_waiting_for_a_flush(broker: Any) -> None:
    await broker.begin_attempt("p4", 1)
    publisher = EventPublisher(broker, "p4", 1)
    await publisher.send("values", "first")

    async def first_seen() -> str:
        async for event in broker.subscribe("p4"):
            return str(event.data)
        return ""

    assert await asyncio.wait_for(first_seen(), 10) == "first"
    await publisher.flush()


async def test_a_refused_batch_surfaces_at_the_next_send_or_flush(broker: Any) -> None:
    await broker.begin_attempt("p2", 1)
    await broker.begin_attempt("p2", 2)
    publisher = EventPublisher(broker, "p2", 1)
    await publisher.send("values", "stale")
    with pytest.raises(StaleAttemptError):
        await publisher.flush()
    with pytest.raises(StaleAttemptError):
        await publisher.send("values", "later")
    assert await _stored(broker, "p2") == []


async def test_flush_with_nothing_sent_returns(broker: Any) -> None:
    await asyncio.wait_for(EventPublisher(broker, "p3", 1).flush(), 10)
