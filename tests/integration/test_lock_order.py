"""PostgreSQL: the claim and finish statements lock the thread row before the run row, the
order every transition keeps (runyard/lifecycle/machine.py), so a creator that holds the thread and
then cancels the run waits for nothing and deadlocks with nothing; and a transition that
still loses a deadlock runs again instead of failing the request."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from runyard.db import run_attempts as attempts_db
from runyard.db import run_claims as claims_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.contention import lost_to_contention
from runyard.db.engine import session_factory
from runyard.db.threads import ThreadState
from runyard.domain.errors import ConflictError
from runyard.domain.run import ClaimedRun
from runyard.domain.status import RunStatus
from runyard.lifecycle.transactions import Transactions
from tests.support.databases import migrated_engine, until_true
from tests.support.rows import run_row, thread_row

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    async with migrated_engine("postgres", tmp_path) as engine:
        yield engine


async def _thread_with_run(engine: AsyncEngine, claim: bool) -> tuple[str, str, int]:
    thread_id, run_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with session_factory(engine)() as session, session.begin():
        await threads_db.insert_thread(session, thread_row(thread_id))
        await runs_db.insert_run(session, run_row(run_id, thread_id, "interrupt"))
        attempt = 0
        if claim:
            claimed = await claims_db.claim_run(session, run_id, "me", 30.0)
            assert claimed is not None
            attempt = claimed.run.attempt
    return thread_id, run_id, attempt


async def _while_a_creator_holds_the_thread(
    engine: AsyncEngine,
    thread_id: str,
    statement: Callable[[], Awaitable[Any]],
    waiting_query: str,
    then: Callable[[AsyncConnection], Awaitable[Any]],
) -> tuple[Any, Any]:
    """A creator locks the thread; `statement` starts and waits; the creator then touches
    the run (`then`) and commits. Both must succeed."""
    async with session_factory(engine)() as creator:
        await creator.begin()
        assert await runs_db.lock_thread_for_new_run(creator, thread_id) is not None
        started = asyncio.create_task(statement())
        await until_true(
            engine,
            "SELECT count(*) FROM pg_stat_activity "
            f"WHERE wait_event_type = 'Lock' AND query LIKE '{waiting_query}%'",
            "the statement waiting for a lock",
        )
        # Longer than deadlock_timeout (1 s): a lock cycle would be found and broken by now.
        touched = await asyncio.wait_for(then(creator), timeout=5)
        await creator.commit()
    return touched, await started


async def test_a_finish_waits_for_the_thread_before_it_locks_its_run(engine: AsyncEngine) -> None:
    thread_id, run_id, attempt = await _thread_with_run(engine, claim=True)
    autocommit = session_factory(engine, autocommit=True)

    async def finish() -> attempts_db.Finished:
        async with autocommit() as session:
            state = ThreadState(thread_id, "idle", {"n": 1}, {}, None)
            return await attempts_db.finish_run_with_state(
                session, run_id, attempt, RunStatus.SUCCESS, {"n": 1}, None, state
            )

    flagged, finished = await _while_a_creator_holds_the_thread(
        engine,
        thread_id,
        finish,
        "WITH finished",
        lambda creator: runs_db.request_cancel(creator, run_id, "interrupt"),
    )
    # The creator flagged the run while it still ran. The finish, which started before the
    # flag was committed and waited for the thread, sees it: the cancel wins, and the run is
    # left running for its attempt to end it as the cancel asks.
    assert flagged is True
    assert finished.held is False
    async with autocommit() as session:
        assert await attempts_db.cancel_requested(session, run_id, attempt) == "interrupt"


async def test_a_claim_waits_for_the_thread_before_it_locks_its_run(engine: AsyncEngine) -> None:
    thread_id, run_id, _attempt = await _thread_with_run(engine, claim=False)
    autocommit = session_factory(engine, autocommit=True)

    async def claim() -> ClaimedRun | None:
        async with autocommit() as session:
            return await claims_db.claim_run(session, run_id, "me", 30.0)

    interrupted, claimed = await _while_a_creator_holds_the_thread(
        engine,
        thread_id,
        claim,
        "WITH claimed",
        lambda creator: runs_db.interrupt_pending_run(creator, run_id),
    )
    # The creator interrupted the run before anyone started it: nothing left to claim.
    assert interrupted is True
    assert claimed is None


async def _deadlock(engine: AsyncEngine) -> BaseException:
    """Two transactions that lock two threads in opposite orders: the error PostgreSQL
    raises in the one it aborts."""
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    async with session_factory(engine)() as session, session.begin():
        for thread_id in (first, second):
            await threads_db.insert_thread(session, thread_row(thread_id))
    both_hold = asyncio.Barrier(2)

    async def lock(one: str, other: str) -> None:
        async with session_factory(engine)() as session, session.begin():
            await threads_db.get_thread(session, one, lock=True)
            await both_hold.wait()
            await threads_db.get_thread(session, other, lock=True)

    outcomes = await asyncio.gather(
        lock(first, second), lock(second, first), return_exceptions=True
    )
    (error,) = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    return error


async def test_a_transition_that_lost_a_deadlock_runs_again(engine: AsyncEngine) -> None:
    error = await _deadlock(engine)
    assert lost_to_contention(error)
    transactions = Transactions(
        session_factory(engine), session_factory(engine, autocommit=True), "postgresql"
    )
    calls: list[int] = []

    async def loses_once(session: AsyncConnection) -> int:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return len(calls)

    assert await transactions.transaction(loses_once) == 2

    async def always_loses(session: AsyncConnection) -> int:
        raise error

    # Never a 500: a request that keeps losing is answered 409, to be sent again.
    with pytest.raises(ConflictError):
        await transactions.transaction(always_loses)
