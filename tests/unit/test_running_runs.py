"""The registry of attempts executing in an instance."""

from __future__ import annotations

import asyncio

import pytest

from runyard.domain.status import CancelAction, StandDown
from runyard.worker.registry import RunningRuns, carry_through_stops


@pytest.mark.timeout(10)
async def test_an_attempt_unwinding_leaves_a_newer_attempt_of_the_same_run() -> None:
    running = RunningRuns()
    first = asyncio.create_task(asyncio.sleep(60))
    second = asyncio.create_task(asyncio.sleep(60))
    try:
        running.add("run-1", 1, first)
        running.add("run-1", 2, second)
        running.remove("run-1", 1)
        assert [(e.run_id, e.attempt) for e in running.all()] == [("run-1", 2)]
        assert running.stop("run-1", CancelAction.INTERRUPT)
        await asyncio.gather(second, return_exceptions=True)
        assert second.cancelled() and not first.done()
    finally:
        first.cancel()
        second.cancel()
        await asyncio.gather(first, second, return_exceptions=True)


@pytest.mark.timeout(10)
async def test_work_carried_through_stops_ends_and_keeps_the_reason() -> None:
    """A hand-back stopped midway would leave its run neither handed back nor ended: the
    stops (one per lease renewal while a cancel is pending) wait for it instead."""
    running = RunningRuns()
    release = asyncio.Event()
    finished: list[str] = []

    async def work() -> str:
        await release.wait()
        finished.append("work")
        return "done"

    async def attempt() -> str:
        return await carry_through_stops(entry, work())

    task = asyncio.create_task(attempt())
    entry = running.add("run-1", 1, task)
    await asyncio.sleep(0)
    assert running.stop("run-1", StandDown.RELEASE)
    await asyncio.sleep(0)
    assert running.stop("run-1", CancelAction.INTERRUPT)
    await asyncio.sleep(0)
    release.set()
    assert await task == "done"
    assert finished == ["work"] and entry.stop_reason == "release"


@pytest.mark.timeout(10)
async def test_a_cancel_that_is_no_stop_cancels_the_carried_work() -> None:
    running = RunningRuns()
    inner_cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            inner_cancelled.set()
            raise

    async def attempt() -> None:
        await carry_through_stops(entry, work())

    task = asyncio.create_task(attempt())
    entry = running.add("run-1", 1, task)
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    await asyncio.wait_for(inner_cancelled.wait(), 5)
