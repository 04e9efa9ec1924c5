"""The registry of attempts executing in an instance."""

from __future__ import annotations

import asyncio

import pytest

from runyard.worker.registry import RunningRuns


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
        assert running.stop("run-1", "interrupt")
        await asyncio.gather(second, return_exceptions=True)
        assert second.cancelled() and not first.done()
    finally:
        first.cancel()
        second.cancel()
        await asyncio.gather(first, second, return_exceptions=True)
