"""Creating a run on its thread, under the thread's multitask strategy.

The creating transition of the run state machine: `RunLifecycle.create`
(runyard/lifecycle/machine.py) is its only user, and runs it with the lifecycle's lock order
(the thread row, then its runs).
The rows are given their status here: a new thread is `busy` with its run, a new run
`pending`; a thread created without a run is `idle` (or `error`, copied from a failed one).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.checkpoints.checkpointer import delete_run_checkpoints
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.dialect import database_now
from runyard.db.engine import Sessions
from runyard.domain.errors import ConflictError, NotFoundError
from runyard.domain.new_run import NewRun, NewThread, TargetThread
from runyard.domain.run import RunRecord
from runyard.domain.status import CancelAction, MultitaskStrategy, RunStatus, ThreadStatus
from runyard.domain.thread import LockedThread, ThreadRecord
from runyard.lifecycle.strategies import strategy_stop
from runyard.lifecycle.transactions import Transactions

# How often a create that may make its thread finds it deleted, then created by another
# request, before it answers 409: each round is another client's committed delete and create.
THREAD_CHURN_ROUNDS = 8


@dataclass
class StrategyEffects:
    """What a multitask strategy leaves to do once the creating transaction committed."""

    cancel_running: list[tuple[str, CancelAction]] = field(default_factory=list)
    # Pending runs the strategy ended (interrupted, or deleted by a rollback).
    ended: list[RunRecord] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Created:
    """The run a create answers with, and whether this create made it (not a replay)."""

    run: RunRecord
    effects: StrategyEffects
    created: bool


# Makes room for a new run under its thread's multitask strategy, inside the creating
# transaction (`RunStops.apply_strategy`, runyard/lifecycle/stops.py).
MakeRoom = Callable[[AsyncConnection, str, MultitaskStrategy, StrategyEffects], Awaitable[None]]


def thread_row(thread: NewThread, status: ThreadStatus) -> dict[str, Any]:
    """The row a new thread is inserted as, with `status`."""
    return {
        "thread_id": thread.thread_id,
        "metadata": thread.metadata,
        "config": thread.config if thread.config is not None else {},
        "status": status.value,
        "values": thread.values,
        "interrupts": thread.interrupts if thread.interrupts is not None else {},
        "error": thread.error,
        "context": thread.context,
        **thread.columns,
    }


class RunCreation:
    """Creates runs for the lifecycle (see the module)."""

    def __init__(
        self,
        transactions: Transactions,
        make_room: MakeRoom,
        autocommit: Sessions,
        checkpointer: BaseCheckpointSaver,
    ) -> None:
        self._transactions = transactions
        self._make_room = make_room
        self._autocommit = autocommit
        self._checkpointer = checkpointer

    async def create(self, new_run: NewRun) -> Created:
        """Commit a pending run (and its thread when it creates one): see `RunLifecycle.create`.

        IntegrityError when a concurrent request committed the same idempotency key first.
        """
        effects = StrategyEffects()
        # A new thread is created busy, with its run: it has no other run, so there is
        # nothing to lock, merge or apply a multitask strategy to.
        new_thread = thread_row(new_run.thread, ThreadStatus.BUSY)
        creating = new_run.creates_thread
        if creating and not new_run.idempotency_key and not new_run.after_seconds:
            # The common case (every stateless run) in one statement on PostgreSQL.
            # A thread created with its run has no settings but the run's own (`rows` holds them).
            target = TargetThread(new_run.thread.thread_id, new_run.thread.metadata)
            first_row = await self._run_row(new_run, target, None)
            first = await self._transactions.atomic(
                lambda session: runs_db.insert_run_on_new_thread(session, new_thread, first_row)
            )
            if first is not None:
                return Created(first, effects, True)
            creating = False  # the thread exists: read and lock it below
        if not creating:
            await self._roll_back_checkpoints(new_run.thread.thread_id, new_run.strategy)

        async def work(session: AsyncConnection) -> tuple[RunRecord, bool]:
            # Run again from the start when it lost to a concurrent transaction.
            effects.ended.clear()
            effects.cancel_running.clear()
            return await self._insert(session, new_run, new_thread, creating, effects)

        # The creating transaction locks the thread row first (lock_thread_for_new_run).
        run, inserted = await self._transactions.transaction(work)
        return Created(run, effects, inserted)

    async def _insert(
        self,
        session: AsyncConnection,
        new_run: NewRun,
        new_thread: dict[str, Any],
        creating: bool,
        effects: StrategyEffects,
    ) -> tuple[RunRecord, bool]:
        thread_id = new_run.thread.thread_id
        created, thread = await self._thread_of(session, new_run, new_thread, creating)
        if new_run.idempotency_key:
            # Checked again in the transaction: a concurrent retry committed meanwhile.
            existing = await runs_db.get_run_by_idempotency_key(session, new_run.idempotency_key)
            if existing is not None:
                if existing.request_hash != new_run.request_hash:
                    raise ConflictError(
                        "this Idempotency-Key was already used with a different request; "
                        "use a new key for a new run"
                    )
                return existing, False
        if created is None:
            await self._make_room(session, thread_id, new_run.strategy, effects)
        assigned = new_run.assigned_priority
        if assigned is not None and created is None and thread.priority is None:
            await threads_db.set_priority_settings(
                session, thread_id, assigned.priority, assigned.fairness_group
            )
        scheduled_at = await _scheduled_at(session, new_run.after_seconds)
        row = await self._run_row(new_run, TargetThread.of(thread), scheduled_at)
        run = await runs_db.insert_run(session, row)
        if created is None:
            await threads_db.mark_busy(
                session,
                thread_id,
                {**(thread.metadata or {}), **new_run.graph_metadata},
                new_run.thread.context,
            )
        return run, True

    async def _thread_of(
        self,
        session: AsyncConnection,
        new_run: NewRun,
        new_thread: dict[str, Any],
        creating: bool,
    ) -> tuple[ThreadRecord | None, ThreadRecord]:
        """The thread the run goes on, locked (or created now): (created, thread)."""
        thread_id = new_run.thread.thread_id
        created = await threads_db.insert_thread(session, new_thread) if creating else None
        thread = created or await runs_db.lock_thread_for_new_run(session, thread_id)
        rounds = 0
        while thread is None and new_run.recreates_thread:
            # Deleted since the statement before found it: create it, as the request asks,
            # or join the one another request created meanwhile. On PostgreSQL other clients
            # may delete and create it again between any two statements, so go round again.
            if rounds == THREAD_CHURN_ROUNDS:
                raise ConflictError(
                    f"thread {thread_id} was deleted and created again by other requests "
                    "while this run was being created; retry the request"
                )
            rounds += 1
            created = await threads_db.insert_thread(session, new_thread)
            thread = created or await runs_db.lock_thread_for_new_run(session, thread_id)
        if thread is None:
            raise NotFoundError(
                f"thread {thread_id} not found; create it first or pass if_not_exists='create'"
            )
        if isinstance(thread, LockedThread) and thread.deleted_with_run:
            # Deleting the thread would take this run with it: accepted, then lost.
            raise ConflictError(
                f"thread {thread_id} is the temporary thread of a stateless run and is "
                "deleted when that run ends; create a thread of your own for this run"
            )
        return created, thread.thread if isinstance(thread, LockedThread) else thread

    @staticmethod
    async def _run_row(new_run: NewRun, thread: TargetThread, scheduled_at: Any) -> dict[str, Any]:
        return {**await new_run.rows.row(thread, scheduled_at), "status": RunStatus.PENDING.value}

    async def _roll_back_checkpoints(self, thread_id: str, strategy: MultitaskStrategy) -> None:
        """Before a rollback deletes the thread's pending runs: remove the checkpoints of
        those that already ran (handed back or reaped, attempt >= 1), so the next run starts
        from the state before them.

        Done ahead of the transaction that deletes the runs (the checkpoints are written on
        connections of their own, outside it): if this fails, nothing is committed and the
        request can be retried. A run claimed meanwhile is rolled back by its own attempt,
        which removes the same checkpoints.
        """
        if strategy_stop(strategy) is not CancelAction.ROLLBACK:
            return
        async with self._autocommit() as session:
            active = await runs_db.active_runs(session, thread_id)
        for run in active:
            if run.status == RunStatus.PENDING and run.attempt >= 1:
                await delete_run_checkpoints(self._checkpointer, thread_id, run.run_id)


async def _scheduled_at(session: AsyncConnection, after_seconds: float | None) -> Any:
    if not after_seconds:
        return None
    return await database_now(session) + timedelta(seconds=after_seconds)
