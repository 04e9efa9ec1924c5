"""A cancel or a multitask strategy that lands as a run writes its end: the cancel wins.

The run's graph has finished and its executor is about to write `success`; a hook holds
that final write open while another instance creates a run under `interrupt` or
`rollback`, cancels the run, or deletes its thread. Each of those answered as though it had
stopped the run, so the run must not end `success`: it ends `interrupted` (its state kept),
or a rollback deletes it and its checkpoints. On SQLite (`runyard dev`: one runtime) and
on PostgreSQL with Redis (two runtimes: one executes, the other takes the requests).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import pytest

from runyard.domain.errors import NotFoundError
from runyard.domain.status import CancelAction, RunStatus, ThreadStatus
from runyard.domain.thread import ThreadRecord
from runyard.schemas.runs import RunCreate
from tests.support.instances import (
    Held,
    Instances,
    deployment,
    held_end,
    stored_run,
    stored_thread,
)

pytestmark = pytest.mark.timeout(60)

# Two quick steps of the `slow` graph: the run's state is steps == [first, second].
ONE_RUN = ["first", "second"]


@pytest.fixture(params=["sqlite", "postgres"])
async def instances(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Instances]:
    """`runyard dev` (one runtime), or two instances on one PostgreSQL database and Redis."""
    async with deployment(request.param, tmp_path, "runyard_cancel_finish") as rt:
        yield rt


async def _run_held_at_its_end(
    rt: Instances, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str, Held]:
    """A thread whose run has finished its graph and waits to write `success`."""
    held = held_end(monkeypatch, rt.worker, RunStatus.SUCCESS)
    thread_id = str(uuid.uuid4())
    run = await rt.api.services.runs.create_run(
        thread_id,
        RunCreate(assistant_id="slow", input={"seconds": 0.01}, if_not_exists="create"),
    )
    await held.wait()
    return thread_id, run.run_id, held


def _steps(thread: ThreadRecord | None) -> list[str]:
    assert thread is not None
    return list((thread.values or {}).get("steps", []))


async def _released_then(held: Held, request: Awaitable[Any]) -> Any:
    """The request answered while the final write was held; then the write goes on."""
    answer = await request
    held.release()
    return answer


@pytest.mark.parametrize("strategy", ["interrupt", "rollback"])
async def test_a_strategy_landing_at_the_final_write_stops_the_run(
    instances: Instances, monkeypatch: pytest.MonkeyPatch, strategy: str
) -> None:
    rt = instances
    thread_id, first_id, held = await _run_held_at_its_end(rt, monkeypatch)
    body = RunCreate(assistant_id="slow", input={"seconds": 0.01}, multitask_strategy=strategy)
    second = await _released_then(held, rt.api.services.runs.create_run(thread_id, body))
    ended = await asyncio.wait_for(
        rt.api.services.waits.wait_until_done(thread_id, second.run_id), 30
    )
    assert ended.status == RunStatus.SUCCESS
    first = await stored_run(rt.api, first_id)
    if strategy == "interrupt":
        assert first is not None and first.status == RunStatus.INTERRUPTED
        # An interrupted run keeps what it wrote; the next run continues from it.
        assert _steps(await stored_thread(rt.api, thread_id)) == ONE_RUN * 2
    else:
        # Rolled back: the run and its state are gone; the next run started from nothing.
        assert first is None
        assert _steps(await stored_thread(rt.api, thread_id)) == ONE_RUN


@pytest.mark.parametrize("action", ["interrupt", "rollback"])
async def test_a_cancel_landing_at_the_final_write_stops_the_run(
    instances: Instances, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    rt = instances
    thread_id, run_id, held = await _run_held_at_its_end(rt, monkeypatch)
    answer = await _released_then(
        held, rt.api.services.runs.cancel_run(thread_id, run_id, CancelAction(action))
    )
    assert answer["was"] == RunStatus.RUNNING.value
    ended = await asyncio.wait_for(rt.api.services.waits.wait_until_done_or_gone(run_id), 30)
    thread = await stored_thread(rt.api, thread_id)
    assert thread is not None and thread.status == ThreadStatus.IDLE
    if action == "interrupt":
        assert ended is not None and ended.status == RunStatus.INTERRUPTED
        assert _steps(thread) == ONE_RUN
    else:
        assert ended is None and await stored_run(rt.api, run_id) is None
        assert _steps(thread) == []


async def test_a_thread_deleted_at_the_final_write_stays_deleted(
    instances: Instances, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guard: the run's row goes with its thread, so its final write finds nothing to end
    (this one held on the code before the fix as well)."""
    rt = instances
    thread_id, run_id, held = await _run_held_at_its_end(rt, monkeypatch)
    await _released_then(held, rt.api.services.threads.delete_thread(thread_id))
    for _ in range(200):
        if not len(rt.worker.running):
            break
        await asyncio.sleep(0.05)
    assert not len(rt.worker.running)
    assert await stored_run(rt.api, run_id) is None
    assert await stored_thread(rt.api, thread_id) is None
    with pytest.raises(NotFoundError):
        await rt.api.services.threads.get_thread(thread_id)
