"""Interleavings of a thread's transitions, held open in-process where they are too narrow to
hit over HTTP: a claim landing inside an `interrupt`, a final write whose reply was lost."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from sqlalchemy import update

from runyard.checkpoints.checkpointer import fenced
from runyard.db import run_attempts as attempts_db
from runyard.db import run_claims as claims_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.tables import runs
from runyard.db.threads import ThreadState
from runyard.domain.errors import StaleAttemptError
from runyard.domain.run import RunRecord
from runyard.domain.status import RunStatus, ThreadStatus
from runyard.schemas.runs import RunCreate
from runyard.wiring.runtime import Runtime
from runyard.worker.finalize import Outcome, RunFinalizer, ThreadSnapshot
from tests.support.backends import backend_runtime
from tests.support.rows import run_row, thread_row


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    async with backend_runtime("sqlite", tmp_path) as rt:
        yield rt


async def _events(rt: Runtime, run_id: str) -> list[str]:
    return [event.event async for event in rt.broker.subscribe(run_id, follow=False)]


def _finalizer(rt: Runtime) -> RunFinalizer:
    """A finalizer built from the runtime's parts, as the worker's is."""
    return RunFinalizer(
        rt.lifecycle, rt.autocommit, rt.graphs, rt.checkpointer, rt.store, rt.encryption
    )


async def _claimed_run(rt: Runtime) -> tuple[str, str, RunRecord]:
    """A new thread's run of the slow graph, claimed by instance `me`: the ids and the claim."""
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    row = {**run_row(run_id, thread_id, "enqueue"), "kwargs": {"graph_id": "slow"}}
    async with rt.sessions() as session, session.begin():
        await threads_db.insert_thread(session, thread_row(thread_id))
        await runs_db.insert_run(session, row)
        claimed = await claims_db.claim_run(session, run_id, "me", 30.0)
    assert claimed is not None
    return thread_id, run_id, claimed.run


async def test_interrupt_stops_a_run_claimed_while_the_strategy_was_applied(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run read as pending is claimed before it can be interrupted: it is running, so
    it must be told to stop, not reported `interrupted` while it runs on."""
    rt = runtime
    thread_id = str(uuid.uuid4())
    await rt.services.runs.create_run(
        thread_id,
        RunCreate(assistant_id="slow", input={"seconds": 30}, if_not_exists="create"),
    )
    queued = await rt.services.runs.create_run(
        thread_id, RunCreate(assistant_id="slow", multitask_strategy="enqueue")
    )
    read_active = runs_db.active_runs

    async def claimed_after_the_read(session: Any, thread: str) -> Any:
        active = await read_active(session, thread)
        # A worker claims the queued run right after the strategy read it as pending.
        async with rt.autocommit() as other:
            await other.execute(
                update(runs)
                .where(runs.c.run_id == queued.run_id)
                .values(status="running", owner="elsewhere", attempt=1)
            )
        return active

    monkeypatch.setattr(runs_db, "active_runs", claimed_after_the_read)
    await rt.services.runs.create_run(
        thread_id, RunCreate(assistant_id="slow", multitask_strategy="interrupt")
    )
    monkeypatch.undo()
    async with rt.autocommit() as session:
        stored = await runs_db.get_run(session, queued.run_id)
    assert stored is not None
    assert (stored.status, stored.cancel_action) == ("running", "interrupt")
    assert "end" not in await _events(rt, queued.run_id)


async def test_a_final_write_retried_after_its_reply_was_lost_ends_the_run(
    runtime: Runtime,
) -> None:
    rt = runtime
    thread_id, run_id, claimed = await _claimed_run(rt)
    attempt = claimed.attempt
    outcome = Outcome(RunStatus.SUCCESS, snapshot=ThreadSnapshot({"n": 1}, {}, False))
    # The first final write commits, and its reply never reaches the worker.
    async with rt.sessions() as session, session.begin():
        state = ThreadState(thread_id, "idle", {"n": 1}, {}, None)
        await attempts_db.finish_run_with_state(
            session, run_id, attempt, RunStatus.SUCCESS, {"n": 1}, None, state
        )
    # The worker retries it: its own end is found, and the run's end is published.
    assert await _finalizer(rt).finalize(claimed, attempt, outcome) is True
    assert (await _events(rt, run_id))[-1:] == ["end"]
    async with rt.autocommit() as session:
        thread = await threads_db.get_thread(session, thread_id)
    assert thread is not None and thread.status == ThreadStatus.IDLE


async def test_a_final_write_of_another_attempt_is_still_refused(runtime: Runtime) -> None:
    rt = runtime
    _, run_id, claimed = await _claimed_run(rt)
    outcome = Outcome(RunStatus.SUCCESS, snapshot=ThreadSnapshot({"n": 1}, {}, False))
    stale = claimed.attempt - 1
    assert await _finalizer(rt).finalize(claimed, stale, outcome) is False
    await asyncio.sleep(0)
    assert "end" not in await _events(rt, run_id)


async def test_a_step_ending_while_its_thread_is_deleted_leaves_no_checkpoint(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's step writes its checkpoint just after the thread's checkpoints were
    deleted, before the deletion commits: a thread re-created with that id starts empty."""
    rt = runtime
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with rt.sessions() as session, session.begin():
        await threads_db.insert_thread(session, thread_row(thread_id))
        await runs_db.insert_run(session, run_row(run_id, thread_id, "enqueue"))
        claimed = await claims_db.claim_run(session, run_id, "me", 30.0)
    assert claimed is not None
    step = fenced(rt.checkpointer, run_id, claimed.run.attempt)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    delete_checkpoints = rt.checkpointer.adelete_thread
    steps_ended: list[bool] = []

    async def then_a_step_ends(thread: str) -> None:
        await delete_checkpoints(thread)
        if steps_ended:
            return
        try:
            await step.aput(config, empty_checkpoint(), {}, {})
            steps_ended.append(True)
        except StaleAttemptError:
            steps_ended.append(False)

    monkeypatch.setattr(rt.checkpointer, "adelete_thread", then_a_step_ends)
    await rt.services.threads.delete_thread(thread_id)
    monkeypatch.undo()
    assert await rt.checkpointer.aget_tuple(config) is None


async def test_a_create_that_may_make_its_thread_makes_it_again_when_it_was_just_deleted(
    runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`if_not_exists="create"` on a thread that is deleted between the create's first
    statement (which found it) and its transaction: the thread is made again, never 404."""
    rt = runtime
    thread_id = str(uuid.uuid4())
    async with rt.sessions() as session, session.begin():
        await threads_db.insert_thread(session, thread_row(thread_id))
    lock_thread = runs_db.lock_thread_for_new_run

    async def deleted_just_before(session: Any, thread: str) -> Any:
        async with rt.autocommit() as other:
            await threads_db.delete_thread(other, thread)
        return await lock_thread(session, thread)

    monkeypatch.setattr(runs_db, "lock_thread_for_new_run", deleted_just_before)
    body = RunCreate(assistant_id="slow", input={"seconds": 0}, if_not_exists="create")
    run = await rt.services.runs.create_run(thread_id, body)
    monkeypatch.undo()
    assert run.thread_id == thread_id
    async with rt.autocommit() as session:
        assert await threads_db.get_thread(session, thread_id) is not None


@pytest.fixture
async def pg_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    """One instance on PostgreSQL (no Redis: the race is in the database alone)."""
    async with backend_runtime("postgres", tmp_path) as rt:
        yield rt


async def test_a_create_that_may_make_its_thread_outlasts_deletes_and_re_creates(
    pg_runtime: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`if_not_exists="create"` while other clients delete the thread and create it again,
    twice over, between each of the create's statements (PostgreSQL, where those clients
    need not wait for the create's transaction): the run is made on the thread, never 404."""
    rt = pg_runtime
    thread_id = str(uuid.uuid4())
    async with rt.sessions() as session, session.begin():
        await threads_db.insert_thread(session, thread_row(thread_id))
    lock_thread, insert_thread = runs_db.lock_thread_for_new_run, threads_db.insert_thread
    # Each of the create's reads finds the thread just deleted, and each of its inserts finds
    # it just created again by another client: two rounds, then the thread is left alone.
    rounds = {"deletes": 2, "creates": 2}

    async def deleted_just_before(session: Any, thread: str) -> Any:
        if rounds["deletes"]:
            rounds["deletes"] -= 1
            async with rt.autocommit() as other:
                await threads_db.delete_thread(other, thread)
        return await lock_thread(session, thread)

    async def created_just_before(session: Any, row: dict[str, Any]) -> Any:
        if rounds["creates"] and rounds["deletes"] < 2:
            rounds["creates"] -= 1
            async with rt.autocommit() as other:
                await insert_thread(other, thread_row(row["thread_id"]))
        return await insert_thread(session, row)

    monkeypatch.setattr(runs_db, "lock_thread_for_new_run", deleted_just_before)
    monkeypatch.setattr(threads_db, "insert_thread", created_just_before)
    body = RunCreate(assistant_id="slow", input={"seconds": 0}, if_not_exists="create")
    run = await rt.services.runs.create_run(thread_id, body)
    monkeypatch.undo()
    assert run.thread_id == thread_id
    assert rounds == {"deletes": 0, "creates": 0}
    async with rt.autocommit() as session:
        assert await threads_db.get_thread(session, thread_id) is not None
        assert await runs_db.get_run(session, run.run_id) is not None
