"""The run queue contract, run against the in-process and the Redis implementation."""

from __future__ import annotations

import asyncio
from typing import Any

from runyard.queue.run_queue import InProcessRunQueue


async def _next_id(run_queue: Any) -> str | None:
    """The next id to come out within a few seconds (a delayed one once it is due)."""
    for _ in range(30):
        run_id = await run_queue.pop(timeout=0.2)
        if run_id is not None:
            return str(run_id)
    return None


async def test_fifo_order(run_queue: Any) -> None:
    for n in range(3):
        await run_queue.push(f"run-{n}")
    assert [await run_queue.pop(timeout=1) for _ in range(3)] == ["run-0", "run-1", "run-2"]


async def test_pop_times_out_empty(run_queue: Any) -> None:
    assert await run_queue.pop(timeout=0.1) is None


async def test_delayed_push_is_not_visible_before_its_time(run_queue: Any) -> None:
    await run_queue.push("later", delay=0.6)
    assert await run_queue.pop(timeout=0.1) is None
    assert await run_queue.queued(["later"]) == {"later"}
    await asyncio.sleep(0.7)
    assert await _next_id(run_queue) == "later"


async def test_queued_reports_only_waiting_ids(run_queue: Any) -> None:
    await run_queue.push("a")
    await run_queue.push("b")
    assert await run_queue.queued(["a", "b", "c"]) == {"a", "b"}
    assert await run_queue.pop(timeout=1) == "a"
    assert await run_queue.queued(["a", "b"]) == {"b"}


async def test_concurrent_poppers_get_every_id_exactly_once(run_queue: Any) -> None:
    pushed = [f"run-{n}" for n in range(40)]
    for run_id in pushed:
        await run_queue.push(run_id)
    taken: list[str] = []

    async def worker_loop() -> None:
        while (run_id := await run_queue.pop(timeout=0.1)) is not None:
            taken.append(run_id)

    await asyncio.wait_for(asyncio.gather(*(worker_loop() for _ in range(4))), 20)
    assert sorted(taken) == sorted(pushed)


async def test_a_popped_id_is_gone_there_is_no_acknowledgement(run_queue: Any) -> None:
    """Popping removes the id: nothing redelivers it (the database and the sweeper do)."""
    await run_queue.push("once")
    assert await run_queue.pop(timeout=1) == "once"
    assert await run_queue.queued(["once"]) == set()
    assert await run_queue.depth() == 0
    assert await run_queue.pop(timeout=0.1) is None


async def test_depth_counts_ready_ids_not_delayed_ones(run_queue: Any) -> None:
    await run_queue.push("now-1")
    await run_queue.push("now-2")
    await run_queue.push("later", delay=30)
    assert await run_queue.depth() == 2
    assert await run_queue.queued(["now-1", "later", "other"]) == {"now-1", "later"}


async def test_delayed_ids_come_out_in_the_order_they_fall_due(run_queue: Any) -> None:
    await run_queue.push("second", delay=0.4)
    await run_queue.push("first", delay=0.2)
    await run_queue.push("ready")
    assert [await _next_id(run_queue) for _ in range(3)] == ["ready", "first", "second"]


async def test_queued_of_nothing_is_empty(run_queue: Any) -> None:
    await run_queue.push("a")
    assert await run_queue.queued([]) == set()


async def test_close_drops_delayed_pushes_in_process_and_keeps_them_in_redis(
    run_queue: Any,
) -> None:
    """A documented difference: the in-process queue dies with its process, so closing it
    drops what it still delays (the database keeps the run pending for the restart);
    Redis keeps a delayed id for whichever instance pops after it falls due."""
    await run_queue.push("later", delay=0.2)
    await run_queue.close()
    await asyncio.sleep(0.3)
    if isinstance(run_queue, InProcessRunQueue):
        assert await run_queue.queued(["later"]) == set()
        assert await run_queue.pop(timeout=0.1) is None
        return
    assert await run_queue.queued(["later"]) == {"later"}
    assert await _next_id(run_queue) == "later"


async def test_higher_priority_first_then_fifo(run_queue: Any) -> None:
    for run_id, priority in [("a0", 0), ("b5", 5), ("c0", 0), ("d-5", -5), ("e-5", -5), ("f3", 3)]:
        await run_queue.push(run_id, priority=priority)
    assert await run_queue.depth() == 6
    assert await run_queue.queued(["b5", "d-5", "zz"]) == {"b5", "d-5"}
    popped = [await run_queue.pop(timeout=1) for _ in range(6)]
    assert popped == ["d-5", "e-5", "a0", "c0", "f3", "b5"]


async def test_a_delayed_run_keeps_its_priority(run_queue: Any) -> None:
    await run_queue.push("late-first", delay=0.3, priority=-5)
    await asyncio.sleep(0.6)
    await run_queue.push("now-last", priority=0)
    got = [await run_queue.pop(timeout=1) for _ in range(2)]
    assert got == ["late-first", "now-last"]


async def test_a_parked_pop_is_woken_by_a_push(run_queue: Any) -> None:
    parked = asyncio.create_task(run_queue.pop(timeout=5))
    await asyncio.sleep(0.2)
    await run_queue.push("wakes", priority=2)
    assert await asyncio.wait_for(parked, 5) == "wakes"


async def test_groups_with_runs_take_turns(run_queue: Any) -> None:
    for n in range(6):
        await run_queue.push(f"a{n}", group="tenant-a")
    await run_queue.push("b0", group="tenant-b")
    await run_queue.push("b1", priority=-5, group="tenant-b")
    await run_queue.push("c0", group="tenant-c")
    popped = [await run_queue.pop(timeout=1) for _ in range(9)]
    # Within a group by priority, then arrival; across groups one run each in turn.
    assert popped == ["a0", "b1", "c0", "a1", "b0", "a2", "a3", "a4", "a5"]
    assert await run_queue.pop(timeout=0.1) is None


async def test_a_held_group_is_skipped_and_its_run_keeps_its_place(run_queue: Any) -> None:
    for n in range(3):
        await run_queue.push(f"a{n}", group="capped")
    await run_queue.push("b0", group="other")
    await run_queue.push("b1", group="other")
    assert await run_queue.pop(timeout=1) == "a0"
    # a0's claim was refused by a cap: it goes back first in its group, which is skipped.
    await run_queue.hold("a0", "capped", 0, 1.0)
    assert await run_queue.queued(["a0"]) == {"a0"}
    assert await run_queue.depth() == 5
    assert [await run_queue.pop(timeout=1) for _ in range(2)] == ["b0", "b1"]
    # Only the held group has runs left: a pop waits instead of handing them out.
    assert await run_queue.pop(timeout=0.2) is None
    # Once the hold ends the group's runs come out in their first order.
    assert [await _next_id(run_queue) for _ in range(3)] == ["a0", "a1", "a2"]


async def test_a_hold_keeps_the_longer_of_two(run_queue: Any) -> None:
    await run_queue.push("a0", group="capped")
    await run_queue.push("a1", group="capped")
    assert await run_queue.pop(timeout=1) == "a0"
    await run_queue.hold("a0", "capped", 0, 30.0)
    assert await run_queue.pop(timeout=1) is None
    await run_queue.hold("a1", "capped", 0, 0.1)
    await asyncio.sleep(0.3)
    assert await run_queue.pop(timeout=0.5) is None
    assert await run_queue.queued(["a0", "a1"]) == {"a0", "a1"}


async def test_a_held_run_not_popped_here_goes_back_at_its_priority(run_queue: Any) -> None:
    await run_queue.push("late", group="capped")
    # Popped by another instance (no place known here): it is queued by its priority.
    await run_queue.hold("urgent", "capped", -5, 0.2)
    assert [await _next_id(run_queue) for _ in range(2)] == ["urgent", "late"]
    assert await run_queue.pop(timeout=0.1) is None


async def test_a_capped_group_has_one_claim_in_flight_until_it_is_settled(
    capped_queue: Any,
) -> None:
    for n in range(3):
        await capped_queue.push(f"a{n}", group="capped")
        await capped_queue.push(f"b{n}", group="free")
    assert await capped_queue.pop(timeout=1) == "a0"
    # a0's claim is not decided yet: the capped group is skipped, the free one is not.
    assert [await capped_queue.pop(timeout=1) for _ in range(3)] == ["b0", "b1", "b2"]
    assert await capped_queue.pop(timeout=0.2) is None
    await capped_queue.settle("a0")  # claimed: the next run of the group may go
    assert await capped_queue.pop(timeout=1) == "a1"
    await capped_queue.settle("b0")  # a run of a group without a cap: nothing to lift
    assert await capped_queue.pop(timeout=0.2) is None
    await capped_queue.settle("a1")
    assert await capped_queue.pop(timeout=1) == "a2"


async def test_a_refused_claim_replaces_its_probe_by_a_hold(capped_queue: Any) -> None:
    await capped_queue.push("a0", group="capped")
    await capped_queue.push("a1", group="capped")
    assert await capped_queue.pop(timeout=1) == "a0"
    await capped_queue.hold("a0", "capped", 0, 0.3)
    # The hold is shorter than a probe's: the group's runs come again once it ends, in order.
    assert await _next_id(capped_queue) == "a0"
    await capped_queue.settle("a0")
    assert await _next_id(capped_queue) == "a1"


async def test_a_parked_pop_is_woken_when_a_probe_settles(capped_queue: Any) -> None:
    await capped_queue.push("a0", group="capped")
    await capped_queue.push("a1", group="capped")
    assert await capped_queue.pop(timeout=1) == "a0"
    # (Redis: spends a1's wake-up, a hint only, on finding its group held.)
    assert await capped_queue.pop(timeout=0.2) is None
    parked = asyncio.create_task(capped_queue.pop(timeout=3))
    await asyncio.sleep(0.2)
    await capped_queue.settle("a0")
    assert await asyncio.wait_for(parked, 5) == "a1"


async def test_a_run_ending_in_the_group_lifts_a_refused_claims_hold(capped_queue: Any) -> None:
    await capped_queue.push("a0", group="capped")
    await capped_queue.push("a1", group="capped")
    assert await capped_queue.pop(timeout=1) == "a0"
    await capped_queue.hold("a0", "capped", 0, 30.0)
    assert await capped_queue.pop(timeout=0.2) is None
    await capped_queue.lift("capped")  # one of its runs ended: a place may be free
    assert await _next_id(capped_queue) == "a0"
    # A claim in flight keeps its hold: a run ending does not let a second claim start.
    await capped_queue.lift("capped")
    assert await capped_queue.pop(timeout=0.2) is None
    await capped_queue.settle("a0")
    assert await _next_id(capped_queue) == "a1"
