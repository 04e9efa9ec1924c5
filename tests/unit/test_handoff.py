"""The hand-off between a thread stream's producers and its writer: what asyncio.Queue with
a bound offered one consumer (order, waiting on both sides, cancellation), holding nothing
while idle."""

from __future__ import annotations

import asyncio
import sys

import pytest

from runyard.streaming.handoff import Handoff

pytestmark = pytest.mark.timeout(10)


async def test_items_come_out_in_order_and_get_waits_for_one() -> None:
    handoff: Handoff[int] = Handoff(4)
    getter = asyncio.create_task(handoff.get())
    await asyncio.sleep(0)
    assert not getter.done()
    await handoff.put(1)
    await handoff.put(2)
    assert await getter == 1
    assert handoff.get_nowait() == 2
    assert handoff.empty()
    with pytest.raises(asyncio.QueueEmpty):
        handoff.get_nowait()


async def test_put_waits_while_full_and_every_producer_goes_on_once_there_is_room() -> None:
    handoff: Handoff[str] = Handoff(1)
    await handoff.put("a")
    first = asyncio.create_task(handoff.put("b"))
    second = asyncio.create_task(handoff.put("c"))
    await asyncio.sleep(0)
    assert not first.done() and not second.done()
    taken = [await handoff.get()]
    while len(taken) < 3:
        taken.append(await handoff.get())
    await asyncio.gather(first, second)
    assert taken[0] == "a" and sorted(taken[1:]) == ["b", "c"]


async def test_a_cancelled_producer_leaves_neither_its_item_nor_the_others_waiting() -> None:
    handoff: Handoff[str] = Handoff(1)
    await handoff.put("a")
    cancelled = asyncio.create_task(handoff.put("lost"))
    waiting = asyncio.create_task(handoff.put("b"))
    await asyncio.sleep(0)
    cancelled.cancel()
    assert await handoff.get() == "a"
    assert await asyncio.wait_for(handoff.get(), 1) == "b"
    await waiting
    assert cancelled.cancelled() and handoff.empty()


async def test_a_cancelled_get_takes_nothing() -> None:
    handoff: Handoff[int] = Handoff(2)
    getter = asyncio.create_task(handoff.get())
    await asyncio.sleep(0)
    getter.cancel()
    await asyncio.gather(getter, return_exceptions=True)
    await handoff.put(7)
    assert await handoff.get() == 7


def test_an_idle_handoff_is_smaller_than_a_queue() -> None:
    handoff: Handoff[int] = Handoff(16)
    queue: asyncio.Queue[int] = asyncio.Queue(16)
    idle = sys.getsizeof(handoff) + sys.getsizeof(handoff._items)
    held = sum(sys.getsizeof(part) for part in vars(queue).values()) + sys.getsizeof(queue)
    assert idle * 4 < held
