"""The event broker contract, run against the in-memory and the Redis implementation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runyard.domain.errors import StaleAttemptError
from tests.contract.conftest import IDLE_CHECK_SECONDS
from tests.support.alarms import ended_before


async def _collect(
    broker: Any, run_id: str, after: str | None = None, follow: bool = True
) -> list[Any]:
    return [event async for event in broker.subscribe(run_id, after, follow=follow)]


async def test_replay_returns_every_event_in_order_then_stops(broker: Any) -> None:
    ids = [await broker.publish("r1", "values", f'{{"n":{n}}}') for n in range(5)]
    await broker.finish("r1")
    events = await _collect(broker, "r1")
    assert [e.id for e in events] == ids
    assert [e.data for e in events] == [f'{{"n":{n}}}' for n in range(5)]
    assert len(set(ids)) == 5


async def test_resume_after_an_id_returns_exactly_the_missed_events(broker: Any) -> None:
    ids = [await broker.publish("r2", "updates", str(n)) for n in range(6)]
    await broker.finish("r2")
    events = await _collect(broker, "r2", after=ids[2])
    assert [e.data for e in events] == ["3", "4", "5"]
    assert await _collect(broker, "r2", after=ids[-1]) == []


async def test_live_subscriber_receives_events_published_later(broker: Any) -> None:
    received: list[str] = []

    async def listen() -> None:
        async for event in broker.subscribe("r3"):
            received.append(event.data)

    task = asyncio.create_task(listen())
    await asyncio.sleep(0.05)
    for n in range(3):
        await broker.publish("r3", "custom", str(n))
    await broker.finish("r3")
    await asyncio.wait_for(task, 10)
    assert received == ["0", "1", "2"]


async def test_live_only_skips_stored_events(broker: Any) -> None:
    await broker.publish("r4", "values", "old")
    received: list[str] = []

    async def listen() -> None:
        async for event in broker.subscribe("r4", "$"):
            received.append(event.data)

    task = asyncio.create_task(listen())
    await asyncio.sleep(0.05)
    await broker.publish("r4", "values", "new")
    await broker.finish("r4")
    await asyncio.wait_for(task, 10)
    assert received == ["new"]


async def test_replay_without_follow_ends_even_if_unfinished(broker: Any) -> None:
    await broker.publish("r5", "values", "a")
    events = await asyncio.wait_for(_collect(broker, "r5", follow=False), 10)
    assert [e.data for e in events] == ["a"]
    assert await asyncio.wait_for(_collect(broker, "never-published", follow=False), 10) == []


async def test_older_attempt_is_fenced_out(broker: Any) -> None:
    await broker.begin_attempt("r6", 1)
    await broker.publish("r6", "values", "first", 1)
    await broker.begin_attempt("r6", 2)
    await broker.publish("r6", "values", "second", 2)
    with pytest.raises(StaleAttemptError):
        await broker.publish("r6", "values", "stale", 1)
    await broker.finish("r6")
    assert [e.data for e in await _collect(broker, "r6")] == ["first", "second"]


async def test_finish_appends_the_last_events_in_order_then_ends(broker: Any) -> None:
    await broker.begin_attempt("r10", 1)
    await broker.publish("r10", "values", "v", 1)
    await broker.finish("r10", 1, [("error", "e"), ("end", "null")])
    events = await asyncio.wait_for(_collect(broker, "r10"), 10)
    assert [(e.event, e.data) for e in events] == [("values", "v"), ("error", "e"), ("end", "null")]


async def test_a_stale_attempt_cannot_finish_the_stream(broker: Any) -> None:
    await broker.begin_attempt("r11", 1)
    await broker.begin_attempt("r11", 2)
    with pytest.raises(StaleAttemptError):
        await broker.finish("r11", 1, [("end", "null")])
    await broker.publish("r11", "values", "current", 2)
    await broker.finish("r11", 2)
    assert [e.data for e in await asyncio.wait_for(_collect(broker, "r11"), 10)] == ["current"]


async def test_a_run_that_ended_without_finishing_its_stream_ends_the_subscription(
    broker: Any,
) -> None:
    await broker.publish("r12", "values", "last")
    asked: list[bool] = []
    first_asked = asyncio.Event()
    run_over = False

    async def ended() -> bool:
        asked.append(run_over)
        first_asked.set()
        return run_over

    received: list[str] = []

    async def listen() -> None:
        async for event in broker.subscribe("r12", ended=ended):
            received.append(event.data)

    task = asyncio.create_task(listen())
    await asyncio.wait_for(first_asked.wait(), 10)
    assert not task.done()  # the run is not over: the subscription keeps following
    run_over = True
    await asyncio.wait_for(task, 10)
    assert received == ["last"]
    assert asked[0] is False and asked[-1] is True


async def test_last_events_appended_just_after_the_run_is_seen_ended_still_arrive(
    broker: Any,
) -> None:
    """A run's end is committed before its last events are appended (runyard/lifecycle/endings.py).
    A subscription that asks `ended` in between must still get those events, `end` last."""
    await broker.publish("r13", "values", "last")
    said_over = asyncio.Event()

    async def ended() -> bool:
        said_over.set()
        return True

    received: list[str] = []

    async def listen() -> None:
        async for event in broker.subscribe("r13", ended=ended):
            received.append(event.event)

    task = asyncio.create_task(listen())
    await asyncio.wait_for(said_over.wait(), 10)
    # Hold the ending instance back a moment, as a busy one is between commit and append.
    await asyncio.wait({task}, timeout=IDLE_CHECK_SECONDS)
    await broker.finish("r13", None, [("end", "null")], signal_done=True)
    await asyncio.wait_for(task, 10)
    assert received == ["values", "end"]


async def test_begin_attempt_publishes_its_first_events_as_that_attempt(broker: Any) -> None:
    await broker.begin_attempt("r13", 1, [("metadata", "m1")])
    await broker.publish("r13", "values", "v1", 1)
    await broker.begin_attempt("r13", 2, [("metadata", "m2")])
    with pytest.raises(StaleAttemptError):
        await broker.publish("r13", "values", "late", 1)
    with pytest.raises(StaleAttemptError):
        await broker.begin_attempt("r13", 1, [("metadata", "again")])
    await broker.finish("r13", 2)
    events = await asyncio.wait_for(_collect(broker, "r13"), 10)
    assert [(e.event, e.data) for e in events] == [
        ("metadata", "m1"),
        ("values", "v1"),
        ("metadata", "m2"),
    ]


async def test_finish_can_signal_the_run_done(broker: Any) -> None:
    async with broker.done_waiter("r14") as waiter:
        await broker.finish("r14", None, [("end", "null")], signal_done=True)
        assert await waiter.wait(timeout=10) is True
    events = await asyncio.wait_for(_collect(broker, "r14"), 10)
    assert [e.event for e in events] == ["end"]


async def test_done_waiter_wakes_on_signal(broker: Any) -> None:
    async with broker.done_waiter("r7") as waiter:
        asyncio.get_running_loop().call_later(
            0.05, lambda: asyncio.ensure_future(broker.signal_done("r7"))
        )
        assert await waiter.wait(timeout=10) is True
    async with broker.done_waiter("r8") as waiter:
        assert await waiter.wait(timeout=0.05) is False


async def test_forget_removes_the_log(broker: Any) -> None:
    await broker.publish("r9", "values", "x")
    await broker.forget("r9")
    assert await _collect(broker, "r9", follow=False) == []


async def test_a_batch_is_stored_in_order_and_answers_its_last_id(broker: Any) -> None:
    first = await broker.publish("r15", "values", "0")
    last = await broker.publish_batch("r15", [("updates", str(n)) for n in range(1, 5)])
    later = await broker.publish("r15", "values", "5")
    await broker.finish("r15")
    events = await asyncio.wait_for(_collect(broker, "r15"), 10)
    assert [(e.event, e.data) for e in events] == [("values", "0")] + [
        ("updates", str(n)) for n in range(1, 5)
    ] + [("values", "5")]
    ids = [e.id for e in events]
    assert (ids[0], ids[-2], ids[-1]) == (first, last, later)
    assert [e.data for e in await _collect(broker, "r15", after=last)] == ["5"]


async def test_a_stale_attempt_batch_is_refused_whole(broker: Any) -> None:
    await broker.begin_attempt("r16", 1)
    await broker.begin_attempt("r16", 2, [("metadata", "m2")])
    with pytest.raises(StaleAttemptError):
        await broker.publish_batch("r16", [("values", "a"), ("values", "b")], 1)
    await broker.finish("r16", 2)
    assert [e.data for e in await asyncio.wait_for(_collect(broker, "r16"), 10)] == ["m2"]


async def test_resuming_mid_stream_while_live_has_no_gap_and_no_duplicate(broker: Any) -> None:
    ids = [await broker.publish("r17", "custom", str(n)) for n in range(3)]
    received: list[str] = []

    async def listen() -> None:
        async for event in broker.subscribe("r17", ids[0]):
            received.append(event.data)

    task = asyncio.create_task(listen())
    await asyncio.sleep(0.05)
    for n in range(3, 6):
        await broker.publish("r17", "custom", str(n))
    await broker.finish("r17")
    await asyncio.wait_for(task, 10)
    assert received == ["1", "2", "3", "4", "5"]


async def test_every_follower_receives_every_event(broker: Any) -> None:
    async def listen() -> list[str]:
        return [event.data async for event in broker.subscribe("r18")]

    followers = [asyncio.create_task(listen()) for _ in range(3)]
    await asyncio.sleep(0.05)
    await broker.publish_batch("r18", [("custom", str(n)) for n in range(4)])
    await broker.finish("r18", None, [("end", "null")])
    got = await asyncio.wait_for(asyncio.gather(*followers), 10)
    assert got == [["0", "1", "2", "3", "null"]] * 3


async def test_a_follower_on_another_instance_receives_every_event(two_brokers: Any) -> None:
    executor, other = two_brokers
    await executor.begin_attempt("r19", 1, [("metadata", "m")])
    first = await executor.publish("r19", "values", "0", 1)
    follower = asyncio.create_task(_collect(other, "r19"))
    resumed = asyncio.create_task(_collect(other, "r19", after=first))
    await asyncio.sleep(0.05)
    await executor.publish_batch("r19", [("values", "1"), ("values", "2")], 1)
    await executor.finish("r19", 1, [("end", "null")])
    assert [e.data for e in await asyncio.wait_for(follower, 10)] == ["m", "0", "1", "2", "null"]
    assert [e.data for e in await asyncio.wait_for(resumed, 10)] == ["1", "2", "null"]


async def test_an_attempt_begun_on_another_instance_fences_this_one(two_brokers: Any) -> None:
    stale, current = two_brokers
    await stale.begin_attempt("r20", 1)
    await current.begin_attempt("r20", 2)
    with pytest.raises(StaleAttemptError):
        await stale.publish("r20", "values", "stale", 1)
    with pytest.raises(StaleAttemptError):
        await stale.finish("r20", 1, [("end", "null")])
    await current.finish("r20", 2, [("end", "null")])
    assert [e.data for e in await asyncio.wait_for(_collect(stale, "r20"), 10)] == ["null"]


async def test_the_completion_signal_wakes_waiters_on_every_instance(two_brokers: Any) -> None:
    executor, other = two_brokers
    async with other.done_waiter("r21") as there, executor.done_waiter("r21") as here:
        await executor.finish("r21", None, [("end", "null")], signal_done=True)
        assert await there.wait(timeout=10) is True
        assert await here.wait(timeout=10) is True


async def _opened_after_the_end(broker: Any, run_id: str, after: str) -> list[str]:
    """What a following subscription opened once the run's stream finished delivers (a join
    that read its run as running, its run ending before it subscribed). It must stop on what
    is stored: one that had to ask `ended` (after the idle check, the fallback for a stream
    that never finishes) fails here."""
    asked = asyncio.Event()

    async def ended() -> bool:
        asked.set()
        return True

    async def collect() -> list[str]:
        return [event.event async for event in broker.subscribe(run_id, after, ended=ended)]

    def why() -> str:
        return "the subscription waited to ask whether the run had ended"

    return await ended_before(collect(), asked, why, timeout=30)


async def test_a_live_only_subscription_opened_after_the_stream_finished_ends_at_once(
    broker: Any,
) -> None:
    await broker.begin_attempt("r22", 1, [("metadata", "m")])
    await broker.publish("r22", "values", "v", 1)
    await broker.finish("r22", 1, [("end", "null")], signal_done=True)
    # Live only: nothing new comes after the end, so nothing at all.
    assert await _opened_after_the_end(broker, "r22", "$") == []


async def test_a_resume_opened_after_the_stream_finished_gets_the_rest_at_once(
    broker: Any,
) -> None:
    await broker.begin_attempt("r23", 1, [("metadata", "m")])
    seen = await broker.publish("r23", "values", "v", 1)
    await broker.publish("r23", "values", "w", 1)
    await broker.finish("r23", 1, [("end", "null")], signal_done=True)
    assert await _opened_after_the_end(broker, "r23", seen) == ["values", "end"]
    end = [e.id for e in await _collect(broker, "r23")][-1]
    assert await _opened_after_the_end(broker, "r23", end) == []


async def test_a_live_only_subscription_on_another_instance_after_the_end_ends_at_once(
    two_brokers: Any,
) -> None:
    executor, other = two_brokers
    await executor.begin_attempt("r24", 1, [("metadata", "m")])
    seen = await executor.publish("r24", "values", "v", 1)
    await executor.finish("r24", 1, [("end", "null")], signal_done=True)
    assert await _opened_after_the_end(other, "r24", "$") == []
    assert await _opened_after_the_end(other, "r24", seen) == ["end"]
