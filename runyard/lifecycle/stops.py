"""Stopping a thread's runs from outside their attempt: a cancel, a multitask strategy making
room for a new run, deleting a run, deleting a thread; and how two stops on one run compose.

A part of the run state machine: `RunLifecycle` (runyard/lifecycle/machine.py) builds it and alone
calls it, and each transition here keeps the lifecycle's lock order (the thread row first,
then its runs). A run not started yet ends here at once; a running one is flagged in the
database (which its lease renewal reads) and told over the cancel bus, and its attempt
ends it.

Stops compose, by one rule (`standing_stop`): `rollback` is stronger than `interrupt`
(CancelAction's order). A running run records one stop, the strongest asked so far: a
stronger one replaces it, an equal or weaker one changes nothing and its answer says which
stop stands. The attempt's final write names the stop it carries out, and the finish
statement refuses it over a stronger recorded one (runyard/db/run_attempts.py, read under the
thread's lock), so the attempt then ends the run as that stop asks: an accepted stop is
carried out, whoever accepted it (a cancel, a strategy, another instance). A stop that finds
the run already ended cannot be: RunEndedError (409) with the run's status. Deleting a run or
its thread outranks both: the row goes, and every later write of the attempt finds nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.checkpoints.checkpointer import delete_run_checkpoints
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.domain.errors import ConflictError, NotFoundError, RunEndedError
from runyard.domain.run import RunRecord
from runyard.domain.status import (
    ACTIVE_RUN_STATUSES,
    CancelAction,
    MultitaskStrategy,
    RunStatus,
    ThreadStatus,
)
from runyard.lifecycle.creation import StrategyEffects
from runyard.lifecycle.endings import RunEndings
from runyard.lifecycle.strategies import STRATEGY_RULES, accepting_strategies
from runyard.lifecycle.transactions import Transactions
from runyard.queue.cancel_bus import CancelBus


def standing_stop(recorded: CancelAction | None, arriving: CancelAction) -> CancelAction:
    """The stop a running run ends by once `arriving` reaches it while `recorded` is in
    flight: the stronger of the two (an equal one changes nothing)."""
    if recorded is None or arriving.strength > recorded.strength:
        return arriving
    return recorded


@dataclass(frozen=True)
class Stopped:
    """What a cancel did to an active run: the status it found (`was`), the stop the run
    ends by (`stopping_with`), whether the cancel changed it (False: an equal or stronger
    stop was in flight), and whether it was delivered (a run not started ended at once, or
    the executing instance acknowledged)."""

    was: RunStatus
    stopping_with: CancelAction
    changed: bool
    delivered: bool = False


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
        self,
        session: AsyncConnection,
        thread_id: str,
        strategy: MultitaskStrategy,
        effects: StrategyEffects,
    ) -> None:
        """Inside the creating transaction (the thread row locked): make room for a new run
        under `strategy` (its rule in STRATEGY_RULES); ConflictError when it refuses a new
        run on a busy thread."""
        active = await runs_db.active_runs(session, thread_id)
        rule = STRATEGY_RULES[strategy]
        if not active:
            return
        if rule.refuses:
            raise ConflictError(
                f"thread {thread_id} is busy with run {active[0].run_id} "
                f"({active[0].status.value}); wait for it to finish, cancel it, or create the run "
                f"with multitask_strategy {accepting_strategies()}"
            )
        stop = rule.stop
        if stop is None:
            return
        for run in active:
            if run.status == RunStatus.PENDING and await self._end_pending(session, run, stop):
                effects.ended.append(run)
                continue
            # Running (or claimed since it was read): its executor stops it.
            standing = await self._record(session, run.run_id, run.cancel_action, stop)
            if standing is not None:
                effects.cancel_running.append((run.run_id, standing))

    async def after_strategy(self, effects: StrategyEffects) -> None:
        """Once the new run is committed: end the runs the strategy ended, stop the others."""
        for run in effects.ended:
            await self._endings.end(run, RunStatus.INTERRUPTED)
        for run_id, action in effects.cancel_running:
            await self._cancel_bus.publish(run_id, action)

    async def cancel(self, run: RunRecord, action: CancelAction) -> Stopped:
        """Cancel an active run: one not started ends at once, a running one is flagged (by
        `standing_stop`) and told. RunEndedError when it ended first."""
        run_id, thread_id = run.run_id, run.thread_id
        if action is CancelAction.ROLLBACK and run.status == RunStatus.PENDING and run.attempt:
            # It already ran (handed back or reaped): its checkpoints go with it. Before the
            # transaction, so a failure here leaves everything as it was.
            await delete_run_checkpoints(self._checkpointer, thread_id, run_id)

        async def work(session: AsyncConnection) -> Stopped | RunStatus:
            found = await runs_db.stop_state(session, run_id)
            if found is None:
                raise NotFoundError(f"run {run_id} not found in thread {thread_id}")
            status, recorded = found
            if status == RunStatus.PENDING and await self._end_pending(session, run, action):
                await threads_db.settle_status(session, thread_id, ThreadStatus.IDLE)
                return Stopped(status, action, changed=True, delivered=True)
            standing = None
            if status == RunStatus.RUNNING:
                standing = await self._record(session, run_id, recorded, action)
            if standing is None:
                return status
            return Stopped(status, standing, changed=standing != recorded)

        stopped = await self._transactions.transaction(work, thread_id)
        if isinstance(stopped, RunStatus):
            raise RunEndedError(
                f"run {run_id} already ended with status '{stopped.value}': a {action.value} "
                "can no longer be carried out",
                stopped.value,
            )
        if stopped.was == RunStatus.PENDING:
            await self._endings.end(run, RunStatus.INTERRUPTED)
            return stopped
        # Told again when it changed nothing: the executor may have missed the first message.
        delivered = await self._cancel_bus.publish(run_id, stopped.stopping_with)
        return replace(stopped, delivered=delivered)

    async def _end_pending(
        self, session: AsyncConnection, run: RunRecord, stop: CancelAction
    ) -> bool:
        """End a run nobody executes yet as `stop` asks (interrupted, or deleted); False when
        it is not pending (claimed since it was read)."""
        if stop is CancelAction.ROLLBACK:
            gone = await runs_db.delete_pending_run(session, run.run_id)
        else:
            gone = await runs_db.interrupt_pending_run(session, run.run_id)
        if gone:
            await self._endings.owe_webhook(session, run, RunStatus.INTERRUPTED)
        return gone

    async def _record(
        self,
        session: AsyncConnection,
        run_id: str,
        recorded: CancelAction | None,
        arriving: CancelAction,
    ) -> CancelAction | None:
        """Record the stop a running run ends by once `arriving` reached it (the thread row
        locked, `recorded` read under that lock); None when the run is not running."""
        standing = standing_stop(recorded, arriving)
        if standing != recorded:
            return standing if await runs_db.request_cancel(session, run_id, standing) else None
        return standing

    async def delete_run(self, thread_id: str, run_id: str) -> None:
        """Delete a run; one still executing is stopped and records nothing more."""

        async def work(session: AsyncConnection) -> RunRecord:
            current = await runs_db.get_run(session, run_id, thread_id)
            if current is None:
                raise NotFoundError(f"run {run_id} not found in thread {thread_id}")
            await runs_db.delete_run(session, run_id)
            if current.status in ACTIVE_RUN_STATUSES:
                await threads_db.settle_status(session, thread_id, ThreadStatus.IDLE)
            return current

        deleted = await self._transactions.transaction(work, thread_id)
        if deleted.status == RunStatus.RUNNING:
            await self._cancel_bus.publish(run_id, CancelAction.INTERRUPT)
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
                await self._cancel_bus.publish(run.run_id, CancelAction.INTERRUPT)
            await self._endings.close_stream(run.run_id)
        return active
