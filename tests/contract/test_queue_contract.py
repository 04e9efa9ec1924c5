"""The run queue contract, run against the in-process and the Redis implementation."""

from __future__ import annotations

import asyncio
from typing import Any


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
    got = None
    for _ in range(30):
        got = await run_queue.pop(timeout=0.2)
        if got:
            break
    assert got == "later"


async def test_queued_reports_only_waiting_ids(run_queue: Any) -> None:
    await run_queue.push("a")
    await run_queue.push("b")
    assert await run_queue.queued(["a", "b", "c"]) == {"a", "b"}
    assert await run_queue.pop(timeout=1) == "a"
    assert await run_queue.queued(["a", "b"]) == {"b"}
