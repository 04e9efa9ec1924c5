"""Two stops on one run compose: `rollback` is stronger than `interrupt`.

A run of the `slow` graph sleeps in its first step; one stop reaches it and a hook holds that
stop open (the attempt's `interrupted` write, or the bus message that carries a rollback),
then a second stop arrives, from a cancel, a multitask strategy or a thread deletion. A
stronger second stop replaces the first; a weaker one changes nothing and says so; a stop
that can no longer be carried out (the run ended first) is 409 with the run's status. On
SQLite (`runyard dev`: one runtime) and on PostgreSQL with Redis (two runtimes: one
executes, the other takes the requests).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from runyard.domain.errors import ConflictError
from runyard.domain.run import RunRecord
from runyard.domain.status import CancelAction, RunStatus, ThreadStatus
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

# The run's first step sleeps this long: every stop lands while it runs.
ASLEEP = {"seconds": 30}


@pytest.fixture(params=["sqlite", "postgres"])
async def instances(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Instances]:
    """`runyard dev` (one runtime), or two instances on one PostgreSQL database and Redis."""
    async with deployment(request.param, tmp_path, "runyard_stops") as rt:
        yield rt


async def _running(rt: Instances) -> tuple[str, RunRecord]:
    """A new thread whose run is inside its first step."""
    thread_id = str(uuid.uuid4())
    run = await rt.api.services.runs.create_run(
        thread_id, RunCreate(assistant_id="slow", input=ASLEEP, if_not_exists="create")
    )
    for _ in range(400):
        stored = await stored_run(rt.api, run.run_id)
        if stored is not None and stored.status == RunStatus.RUNNING:
            return thread_id, stored
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run.run_id} never started")


def _held_rollback_message(rt: Instances, monkeypatch: pytest.MonkeyPatch) -> Held:
    """Holds the first rollback the request side sends over the cancel bus: the rollback
    is recorded, and the attempt has not heard of it yet."""
    return Held(
        monkeypatch, rt.api.cancel_bus, "publish", lambda _run_id, action: action == "rollback"
    )


async def _stop(rt: Instances, thread_id: str, run_id: str, action: str, source: str) -> Any:
    """Stop the run by `action` from `source`: a cancel (its answer returned), a new run's
    multitask strategy, or a deletion of its thread."""
    runs = rt.api.services.runs
    if source == "cancel":
        return await runs.cancel_run(thread_id, run_id, CancelAction(action))
    if source == "strategy":
        body = RunCreate(assistant_id="slow", input={"seconds": 0.01}, multitask_strategy=action)
        return await runs.create_run(thread_id, body)
    return await rt.api.services.threads.delete_thread(thread_id)


async def _rolled_back(rt: Instances, thread_id: str, run_id: str, source: str) -> None:
    """The run is gone with its changes (the thread too, when it was deleted)."""
    await asyncio.wait_for(rt.api.services.waits.wait_until_done_or_gone(run_id), 30)
    for _ in range(200):
        if not len(rt.worker.running):
            break
        await asyncio.sleep(0.05)
    stored = await stored_run(rt.api, run_id)
    assert stored is None, f"the run was not rolled back: it ended {stored and stored.status}"
    thread = await stored_thread(rt.api, thread_id)
    if source == "thread deletion":
        assert thread is None
        return
    assert thread is not None
    # The run's input checkpoint went with it: the thread holds nothing of it.
    assert (thread.values or {}).get("seconds") != ASLEEP["seconds"], thread.values


@pytest.mark.parametrize("first", ["cancel", "strategy"])
@pytest.mark.parametrize("second", ["cancel", "strategy", "thread deletion"])
async def test_a_rollback_replaces_an_interrupt_in_flight(
    instances: Instances, monkeypatch: pytest.MonkeyPatch, first: str, second: str
) -> None:
    """The interrupt's end waits to be written when the rollback arrives: the run is rolled
    back, as the rollback's answer said (before, it ended `interrupted` and stayed)."""
    rt = instances
    thread_id, run = await _running(rt)
    held = held_end(monkeypatch, rt.worker, RunStatus.INTERRUPTED)
    await _stop(rt, thread_id, run.run_id, "interrupt", first)
    await held.wait()
    answer = await _stop(rt, thread_id, run.run_id, "rollback", second)
    held.release()
    await _rolled_back(rt, thread_id, run.run_id, second)
    if second == "cancel":
        assert (answer["was"], answer["stopping_with"]) == ("running", "rollback"), answer


@pytest.mark.parametrize("second", ["cancel", "strategy"])
async def test_an_interrupt_after_a_rollback_changes_nothing(
    instances: Instances, monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    """The rollback is recorded and its message still on its way when an interrupt comes:
    the run is rolled back, and the interrupt's answer says the rollback stands (before,
    the interrupt overwrote the rollback and the run ended `interrupted`)."""
    rt = instances
    thread_id, run = await _running(rt)
    held = _held_rollback_message(rt, monkeypatch)
    rollback = asyncio.ensure_future(
        rt.api.services.runs.cancel_run(thread_id, run.run_id, CancelAction.ROLLBACK)
    )
    await held.wait()
    answer = await _stop(rt, thread_id, run.run_id, "interrupt", second)
    held.release()
    accepted = await rollback
    await _rolled_back(rt, thread_id, run.run_id, "cancel")
    assert accepted["stopping_with"] == "rollback", accepted
    if second == "cancel":
        assert (answer["action"], answer["stopping_with"]) == ("interrupt", "rollback"), answer
        assert "changes nothing" in answer["detail"], answer


async def test_a_stop_after_the_run_ended_is_refused_with_its_status(
    instances: Instances,
) -> None:
    """A rollback read the run as running, and the interrupt's end was written before it
    could act: 409, naming the status the run really has, never a 2xx."""
    rt = instances
    thread_id, seen_running = await _running(rt)
    await rt.api.services.runs.cancel_run(thread_id, seen_running.run_id, CancelAction.INTERRUPT)
    ended = await asyncio.wait_for(
        rt.api.services.waits.wait_until_done(thread_id, seen_running.run_id), 30
    )
    assert ended.status == RunStatus.INTERRUPTED
    with pytest.raises(ConflictError) as refused:
        await rt.api.lifecycle.cancel(seen_running, CancelAction.ROLLBACK)
    assert refused.value.run_status == RunStatus.INTERRUPTED
    assert "interrupted" in refused.value.message
    stored = await stored_run(rt.api, seen_running.run_id)
    assert stored is not None and stored.status == RunStatus.INTERRUPTED
    thread = await stored_thread(rt.api, thread_id)
    assert thread is not None and thread.status != ThreadStatus.BUSY
