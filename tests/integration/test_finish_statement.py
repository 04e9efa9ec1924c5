"""A run's end, its thread's state and the thread's next run: one statement, exact under races."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from runyard.db import run_attempts as attempts_db
from runyard.db import run_claims as claims_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import Sessions, on_each_statement, session_factory
from runyard.db.threads import ThreadState
from runyard.domain.status import RunStatus, ThreadStatus
from runyard.domain.thread import ThreadRecord
from tests.support.databases import migrated_engine, until_true
from tests.support.rows import run_row, thread_row


@pytest.fixture(params=["sqlite", "postgres"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    async with migrated_engine(request.param, tmp_path) as engine:
        yield engine


@pytest.fixture
async def postgres_engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    async with migrated_engine("postgres", tmp_path) as engine:
        yield engine


def _run_row(thread_id: str) -> dict[str, Any]:
    return run_row(str(uuid.uuid4()), thread_id, multitask_strategy="enqueue")


async def _running_run(sessions: Sessions) -> tuple[str, str, int]:
    """A thread with one claimed run: (thread id, run id, attempt)."""
    thread_id = str(uuid.uuid4())
    row = _run_row(thread_id)
    async with sessions() as session, session.begin():
        await threads_db.insert_thread(session, thread_row(thread_id))
        await runs_db.insert_run(session, row)
        claimed = await claims_db.claim_run(session, row["run_id"], "me", 30.0)
    assert claimed is not None
    return thread_id, row["run_id"], claimed.run.attempt


def _ended(thread_id: str) -> ThreadState:
    return ThreadState(thread_id, "idle", {"n": 1}, {}, None)


async def _finish(
    engine: AsyncEngine, run_id: str, attempt: int, thread_id: str
) -> attempts_db.Finished:
    # As the worker calls it: one statement on PostgreSQL, a transaction on SQLite.
    if engine.dialect.name == "postgresql":
        sessions = session_factory(engine, autocommit=True)
        async with sessions() as session:
            return await attempts_db.finish_run_with_state(
                session, run_id, attempt, RunStatus.SUCCESS, {"n": 1}, None, _ended(thread_id)
            )
    async with session_factory(engine)() as session, session.begin():
        return await attempts_db.finish_run_with_state(
            session, run_id, attempt, RunStatus.SUCCESS, {"n": 1}, None, _ended(thread_id)
        )


async def _thread(engine: AsyncEngine, thread_id: str) -> ThreadRecord:
    async with session_factory(engine)() as session:
        thread = await threads_db.get_thread(session, thread_id)
    assert thread is not None
    return thread


async def test_a_run_ends_with_its_thread_state_and_no_next_run(engine: AsyncEngine) -> None:
    thread_id, run_id, attempt = await _running_run(session_factory(engine))
    counted: list[int] = []
    on_each_statement(engine, lambda: counted.append(1))
    finished = await _finish(engine, run_id, attempt, thread_id)
    thread = await _thread(engine, thread_id)
    assert finished.held and finished.thread_written
    assert thread.status == ThreadStatus.IDLE and thread.values == {"n": 1}
    if engine.dialect.name == "postgresql":
        assert len(counted) == 2  # the finish, then the read of the thread above
        assert finished.upcoming_known and finished.upcoming is None
        assert finished.now is not None
    else:
        assert not finished.upcoming_known


async def test_the_next_pending_run_comes_back_with_the_end(engine: AsyncEngine) -> None:
    sessions = session_factory(engine)
    thread_id, run_id, attempt = await _running_run(sessions)
    queued = [_run_row(thread_id), _run_row(thread_id)]
    for row in queued:
        async with sessions() as session, session.begin():
            await runs_db.insert_run(session, row)
    finished = await _finish(engine, run_id, attempt, thread_id)
    thread = await _thread(engine, thread_id)
    assert finished.held and finished.thread_written
    # A run still waits: the thread stays busy.
    assert thread.status == ThreadStatus.BUSY and thread.values == {"n": 1}
    if engine.dialect.name == "postgresql":
        assert finished.upcoming_known and finished.upcoming is not None
        assert finished.upcoming.run_id == queued[0]["run_id"]


async def test_an_attempt_that_lost_the_run_writes_nothing(engine: AsyncEngine) -> None:
    thread_id, run_id, attempt = await _running_run(session_factory(engine))
    finished = await _finish(engine, run_id, attempt + 1, thread_id)
    thread = await _thread(engine, thread_id)
    assert finished == attempts_db.Finished(held=False)
    assert thread.status == ThreadStatus.BUSY and thread.values is None


@pytest.mark.postgres
async def test_a_run_committed_while_the_end_waits_is_left_to_a_fresh_read(
    postgres_engine: AsyncEngine,
) -> None:
    # PostgreSQL only: SQLite writes one transaction at a time, so there is no such race.
    engine = postgres_engine
    sessions = session_factory(engine)
    thread_id, run_id, attempt = await _running_run(sessions)
    late = _run_row(thread_id)
    async with sessions() as creator:
        # A creator as `create_run` is one: it holds the thread row, inserts, marks it busy.
        await creator.begin()
        assert await runs_db.lock_thread_for_new_run(creator, thread_id) is not None
        await runs_db.insert_run(creator, late)
        await threads_db.mark_busy(creator, thread_id, {}, {})
        # The end starts now, so its snapshot lacks the late run, and waits for the row.
        ending = asyncio.create_task(_finish(engine, run_id, attempt, thread_id))
        await until_true(
            engine,
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND query LIKE 'WITH finished%'",
            "the finishing statement waiting for the thread row",
        )
        await creator.commit()
    finished = await ending
    # The run is ended; the thread was not written from the stale view, nor the next run
    # read from it (it would have missed the late run): the caller looks again.
    assert finished.held and not finished.thread_written and not finished.upcoming_known
    async with sessions() as session:
        status = await runs_db.get_run(session, run_id)
        upcoming = await attempts_db.next_pending_run(session, thread_id)
    assert status is not None and status.status == "success"
    assert upcoming is not None and upcoming.run_id == late["run_id"]
