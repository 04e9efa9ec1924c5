"""Stopping a thread's runs from outside their attempt: a cancel, a multitask strategy making
room for a new run, deleting a run, deleting a thread.

A part of the run state machine: `RunLifecycle` (runyard/lifecycle/machine.py) builds it and alone
calls it, and each transition here keeps the lifecycle's lock order (the thread row first,
then its runs). A run not started yet ends here at once; a running one is flagged in the
database (which its lease renewal reads) and told over the cancel bus, and its attempt
ends it.
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.checkpoints.checkpointer import delete_run_checkpoints
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.domain.errors import ConflictError, NotFoundError
from runyard.domain.run import RunRecord
from runyard.domain.status import ACTIVE_RUN_STATUSES, RunStatus
from runyard.lifecycle.creation import StrategyEffects
from runyard.lifecycle.endings import RunEndings
from runyard.lifecycle.transactions import Transactions
from runyard.queue.cancel_bus import CancelBus


class RunStops:
    """Stops runs for the lifecycle (see the module)."""

    def __init__(
        self,
        transactions: Transactions,
        endings: RunEndings,
        cancel_bus: CancelBus,
        checkpointer: BaseCheckpointSaver,
    ) -> None:
        self._transactions = transactions
        self._endings = endings
        self._cancel_bus = cancel_bus
        self._checkpointer = checkpointer

    async def apply_strategy(
        self, session: AsyncConnection, thread_id: str, strategy: str, effects: StrategyEffects
    ) -> None:
        """Inside the creating transaction (the thread row locked): make room for a new run
        under `strategy`; ConflictError for `reject` on a busy thread."""
        active = await runs_db.active_runs(session, thread_id)
        if not active or strategy == "enqueue":
            return
        if strategy == "reject":
            raise ConflictError(
                f"thread {thread_id} is busy with run {active[0].run_id} "
                f"({active[0].status.value}); wait for it to finish, cancel it, or create the run "
                "with multitask_strategy 'enqueue', 'interrupt' or 'rollback'"
            )
        action = "rollback" if strategy == "rollback" else "interrupt"
        for run in active:
            run_id = run.run_id
            if run.status == RunStatus.PENDING:
                if action == "rollback":
                    gone = await runs_db.delete_pending_run(session, run_id)
                else:
                    gone = await runs_db.interrupt_pending_run(session, run_id)
                if gone:
                    await self._endings.owe_webhook(session, run, RunStatus.INTERRUPTED)
                    effects.ended.append(run)
                    continue
            # Running (or claimed since it was read): its executor stops it.
            if await runs_db.request_cancel(session, run_id, action):
                effects.cancel_running.append((run_id, action))

    async def after_strategy(self, effects: StrategyEffects) -> None:
        """Once the new run is committed: end the runs the strategy ended, stop the others."""
        for run in effects.ended:
            await self._endings.end(run, RunStatus.INTERRUPTED)
        for run_id, action in effects.cancel_running:
            await self._cancel_bus.publish(run_id, action)

    async def cancel(self, run: RunRecord, action: str) -> tuple[bool, bool]:
        """Cancel an active run: one not started ends at once, a running one is flagged and
        told. Returns (ended before it started, delivered to an executor)."""
        run_id, thread_id = run.run_id, run.thread_id
        if action == "rollback" and run.status == RunStatus.PENDING and run.attempt >= 1:
            # It already ran (handed back or reaped): its checkpoints go with it. Before the
            # transaction, so a failure here leaves everything as it was.
            await delete_run_checkpoints(self._checkpointer, thread_id, run_id)

        async def work(session: AsyncConnection) -> str:
            if action == "rollback":
                gone = await runs_db.delete_pending_run(session, run_id)
            else:
                gone = await runs_db.interrupt_pending_run(session, run_id)
            if gone:
                await threads_db.settle_status(session, thread_id, "idle")
                await self._endings.owe_webhook(session, run, RunStatus.INTERRUPTED)
                return "ended"
            if await runs_db.request_cancel(session, run_id, action):
                return "flagged"
            return "finished"

        what = await self._transactions.transaction(work, thread_id)
        if what == "finished":
            raise ConflictError(f"run {run_id} finished before it could be cancelled")
        if what == "ended":
            await self._endings.end(run, RunStatus.INTERRUPTED)
            return True, True
        return False, await self._cancel_bus.publish(run_id, action)

    async def delete_run(self, thread_id: str, run_id: str) -> None:
        """Delete a run; one still executing is stopped and records nothing more."""

        async def work(session: AsyncConnection) -> RunRecord:
            current = await runs_db.get_run(session, run_id, thread_id)
            if current is None:
                raise NotFoundError(f"run {run_id} not found in thread {thread_id}")
            await runs_db.delete_run(session, run_id)
            if current.status in ACTIVE_RUN_STATUSES:
                await threads_db.settle_status(session, thread_id, "idle")
            return current

        deleted = await self._transactions.transaction(work, thread_id)
        if deleted.status == RunStatus.RUNNING:
            await self._cancel_bus.publish(run_id, "interrupt")
        await self._endings.forget(run_id)
        if deleted.status in ACTIVE_RUN_STATUSES:
            dispatch = self._endings.dispatch_next(thread_id)
            await self._endings.quietly(dispatch, "run_dispatch_failed", run_id)

    async def delete_thread(self, thread_id: str) -> list[RunRecord] | None:
        """Delete a thread, its runs and its checkpoints; returns its active runs (stopped
        here), or None when there is no such thread."""

        async def work(session: AsyncConnection) -> list[RunRecord] | None:
            active = await runs_db.active_runs(session, thread_id)
            if not await threads_db.delete_thread(session, thread_id):
                return None
            # Inside the transaction: if the checkpoints cannot go, the thread stays.
            await self._checkpointer.adelete_thread(thread_id)
            return active

        active = await self._transactions.transaction(work)
        if active is None:
            return None
        # A step that ended before the commit could still write: its write was checked
        # against a run row not yet deleted. Every later write finds no row.
        await self._checkpointer.adelete_thread(thread_id)
        for run in active:
            if run.status == RunStatus.RUNNING:
                await self._cancel_bus.publish(run.run_id, "interrupt")
            await self._endings.close_stream(run.run_id)
        return active
