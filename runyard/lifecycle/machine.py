"""The run state machine: every transition of a thread's runs goes through `RunLifecycle`.

A run is created under its thread's multitask strategy, claimed, finished, cancelled
(interrupt or rollback), deleted, handed back or requeued here, and only here; so is the
thread's status (a thread created with its run or on its own, copied, or given a state
outside a run), and the dispatch of the thread's next run. Creating a run is
runyard/lifecycle/creation.py, stopping runs from outside their attempt (a cancel, a
multitask strategy, deleting a run or a thread) runyard/lifecycle/stops.py, ending one
runyard/lifecycle/endings.py: parts of the lifecycle, which alone imports them
(tests/unit/test_status_writers.py). Every transition runs through
runyard/lifecycle/transactions.py (one transaction, serialized on SQLite, retried on
contention), in the lock order below, the one place it is written down.

Lock order (PostgreSQL): **the thread row, then its run rows**, in every transition.
- A transaction (create, cancel, delete, rollback's end) locks the thread row first
  (`SELECT … FOR UPDATE`), before it reads or writes any run of the thread.
- A one-statement transition (claim, finish, hand back) locks the thread row in an
  InitPlan of the statement, which PostgreSQL runs before the UPDATE locks the run row
  (runyard/db/run_claims.py, `thread_locked_first`).
- The reaper locks every thread it recovers runs of (lease expired, or owner gone), ordered
  by id, before their runs.
- A claim in a fairness group with a cap takes the group's advisory lock before all of
  these (only such claims take it, and a claim holds no other lock when it does); marking
  the group's waiting runs `held_back` skips the run rows others hold instead of waiting.
- Deleting a thread deletes its row; its runs go by cascade, after it.
- An instance's liveness lock (runyard/db/liveness.py) is held by a session of its own,
  never inside a transition: it orders nothing here.
A deadlock or serialization failure that can still occur (lease renewal updates runs of
many threads in one statement) is retried up to CONTENTION_RETRIES times
(runyard/lifecycle/transactions.py), never answered as a 500.

SQLite (`runyard dev`): one process, one writer. The transitions are serialized by one lock
of this process (a claim does not know its thread before it reads the run, and SQLite
serializes writers anyway), so a read and the write that depends on it are atomic. Every
conditional write's row count decides what happens next.

Thread status rule: a thread is `busy` while any of its runs is pending or running. When
none is, it has the status its last transition left: after a finished run, that run's
outcome (`error` for error or timeout, `interrupted` when it stopped on an interrupt or
with steps left, else `idle`); `idle` when its last active run was cancelled or deleted
before it ran. The statement that writes the status decides `busy` itself
(`threads_db.settle_status`, the finish statement), so a run queued meanwhile is seen.

Stops compose (the rule is `standing_stop`, runyard/lifecycle/stops.py): `rollback` is stronger
than `interrupt`. A running run records one stop, the strongest accepted so far, whether it
came from a cancel or a multitask strategy, on any instance: a stronger one replaces it, an
equal or weaker one changes nothing (a cancel's answer says which stop stands). A stop
recorded before a run's final write wins unless that write carries out the same stop or a
stronger one: the finish statement checks the flag itself, under the thread's lock, so a run
whose graph already ended, or whose attempt is writing an interrupt's end, still ends as the
strongest accepted stop asks. A stop after the final write finds the run ended: 409 with its
status. Deleting a run or its thread outranks every stop: the row goes, and the attempt's
later writes find nothing.

Dispatch: any transition that can free the thread (finish, cancel, delete, the reaper
ending a run) pushes the thread's next due run: its oldest pending run by start time.

Ending a run (after its terminal status is committed) is one path for finalize, the
reaper and cancel, `end`: last events and the completion signal, the next run's dispatch,
the webhook's first attempt, the removal of a stateless run's temporary thread
(runyard/lifecycle/endings.py, which the lifecycle builds and owns). The webhook's delivery itself
is written by the transaction that ends the run, so it is owed from that commit.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.checkpoints.checkpointer import delete_run_checkpoints
from runyard.db import group_caps as caps_db
from runyard.db import run_attempts as attempts_db
from runyard.db import run_claims as claims_db
from runyard.db import run_recovery as recovery_db
from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.engine import Sessions
from runyard.domain.group_caps import GroupCaps, HeldBack, held_back_reason
from runyard.domain.new_run import NewRun, NewThread
from runyard.domain.run import ClaimedRun, EndedRun, Recovered, RunRecord, UnreadRun
from runyard.domain.status import CancelAction, RunStatus, ThreadStatus
from runyard.domain.thread import ThreadRecord
from runyard.lifecycle.creation import Created, RunCreation, StrategyEffects, thread_row
from runyard.lifecycle.endings import RunEndings, WebhookSink
from runyard.lifecycle.final_writes import DONE, REFUSED, FinalWrite, overruled
from runyard.lifecycle.stops import RunStops, Stopped
from runyard.lifecycle.transactions import Transactions
from runyard.observability.metrics import Metrics
from runyard.queue.cancel_bus import CancelBus
from runyard.queue.run_queue import RunQueue
from runyard.streaming.broker import EventBroker

log = logging.getLogger("runyard.lifecycle")

# What a thread's status can be when none of its runs is active.
_RESTING_THREAD = {status.value for status in ThreadStatus if status is not ThreadStatus.BUSY}


class RunLifecycle:
    """The one owner of a thread's runs (see the module)."""

    def __init__(
        self,
        sessions: Sessions,
        autocommit: Sessions,
        dialect: str,
        broker: EventBroker,
        queue: RunQueue,
        cancel_bus: CancelBus,
        webhooks: WebhookSink,
        metrics: Metrics,
        checkpointer: BaseCheckpointSaver,
        caps: GroupCaps | None = None,
    ) -> None:
        self._sessions = sessions
        self._caps = caps if caps is not None else GroupCaps()
        self._autocommit = autocommit
        self._queue = queue
        self._cancel_bus = cancel_bus
        self._metrics = metrics
        self._checkpointer = checkpointer
        self._transactions = Transactions(sessions, autocommit, dialect)
        self._endings = RunEndings(
            broker, queue, webhooks, autocommit, checkpointer, metrics, self._transactions.serial
        )
        self._stops = RunStops(self._transactions, self._endings, cancel_bus, checkpointer)
        self._creation = RunCreation(
            self._transactions, self._stops.apply_strategy, autocommit, checkpointer
        )

    # --- transitions ----------------------------------------------------------------------

    async def create(self, new_run: NewRun) -> Created:
        """Commit a pending run under its thread's multitask strategy, with its thread when
        it creates one (busy), or marking its existing thread busy; an existing run when its
        idempotency key was used already. `after_strategy(created.effects)` follows, once the
        caller has done what must precede the run's dispatch (runyard/lifecycle/creation.py)."""
        return await self._creation.create(new_run)

    async def after_strategy(self, effects: StrategyEffects) -> None:
        """Once the new run is committed: end the runs the strategy ended, stop the others."""
        await self._stops.after_strategy(effects)

    async def claim(
        self, run_id: str, owner: str, lease_seconds: float
    ) -> ClaimedRun | HeldBack | None:
        """Take a pending run for `owner` (see `claims_db.claim_run`); None when it is not
        claimable now, HeldBack when its fairness group is at a cap (the run says why)."""
        if not self._caps.any:
            return await self._transactions.atomic(
                lambda s: claims_db.claim_run(s, run_id, owner, lease_seconds)
            )
        return await self._transactions.transaction(
            lambda s: self._claim_within_caps(s, run_id, owner, lease_seconds)
        )

    async def _claim_within_caps(
        self, session: AsyncConnection, run_id: str, owner: str, lease_seconds: float
    ) -> ClaimedRun | HeldBack | None:
        """The claim, after its group's caps are checked under the group's lock: the claims
        of a capped group are serialized (an advisory lock on PostgreSQL, the process lock
        on SQLite), so two instances never both take the last place under a cap."""
        placing = await claims_db.claimable_run_placing(session, run_id)
        if placing is None:
            return None
        group, priority = placing
        cap = self._caps.of(group)
        if cap.capped:
            await caps_db.lock_group(session, group)
            held = held_back_reason(group, cap, await caps_db.group_load(session, group))
            if held is not None:
                reason, seconds = held
                await caps_db.mark_held_back(session, group, reason)
                return HeldBack(run_id, group, priority, reason, seconds)
        return await claims_db.claim_run(session, run_id, owner, lease_seconds)

    async def fail_unreadable(self, run_id: str, owner: str, message: str) -> None:
        """End a run whose stored request cannot be decrypted (`owner`'s claim could not
        read it back): `error` once, with the reason, instead of a claim failing at every
        push (or, where the claim committed, at every lease expiry)."""
        async with self._autocommit() as session:
            thread_id = await runs_db.thread_of_run(session, run_id)
        if thread_id is None:
            return
        error = {"error": "DecryptionError", "message": message}

        async def work(session: AsyncConnection) -> UnreadRun | None:
            row = await runs_db.fail_unclaimed_run(session, run_id, owner, error)
            if row is not None:
                await threads_db.settle_status(session, thread_id, ThreadStatus.ERROR)
            return row

        ended = await self._transactions.transaction(work, thread_id)
        if ended is not None:
            await self.end(ended, RunStatus.ERROR, error=error)

    async def finish(
        self,
        run: RunRecord,
        attempt: int,
        status: RunStatus,
        output: Any,
        error: Any,
        state: threads_db.ThreadState,
        *,
        stored_error: Any = None,
        stop: CancelAction | None = None,
    ) -> FinalWrite:
        """Record an attempt's outcome and the thread's state, then end the run; REFUSED
        when `attempt` no longer holds the run. `stored_error`: `error` as the run row and its
        webhook store it (encrypted by encryption.path), when it differs; the run's last
        event carries `error`. `stop`: the stop this end carries out (an interrupt).

        A stop recorded first and stronger than `stop` wins (a strategy or a cancel already
        answered as though it stopped the run): nothing is written, and that stop is
        returned for the attempt to end the run as it asks. The finish statement checks the
        flag itself, under the thread's lock, so there is no window between (OVERRULED,
        with that stop).

        A retry of a final write whose commit went through but whose reply was lost finds
        its own end recorded: that is done, and the run is ended (its events published).
        """
        run_id = run.run_id
        recorded = error if stored_error is None else stored_error

        async def work(session: AsyncConnection) -> attempts_db.Finished:
            done = await attempts_db.finish_run_with_state(
                session, run_id, attempt, status, output, recorded, state, stop
            )
            if done.held:
                await self._endings.owe_webhook(session, run, status, recorded, state.values)
            return done

        # With a webhook, its delivery is written in the same transaction as the end.
        finished: attempts_db.Finished | None = await (
            self._transactions.transaction(work) if run.webhook else self._transactions.atomic(work)
        )
        assert finished is not None
        if not finished.held:
            refused = await self._not_held(run_id, attempt, status)
            if refused is not None:
                return refused
            finished = None
        elif not finished.thread_written:
            # A run was committed on the thread while this one ended: write with a fresh view.
            async with self._autocommit() as session:
                await threads_db.set_state_fields(
                    session, state, busy_if_pending=True, ending_run=run_id
                )
        await self.end(run, status, error=error, attempt=attempt, finished=finished)
        return DONE

    async def _not_held(self, run_id: str, attempt: int, status: RunStatus) -> FinalWrite | None:
        """Why an attempt's finish wrote nothing: a stronger stop, REFUSED when another
        attempt holds the run, None when this attempt's own end was committed already."""
        async with self._autocommit() as session:
            action = await attempts_db.cancel_requested(session, run_id, attempt)
            own = None if action else await attempts_db.ended_by(session, run_id, attempt, status)
        if action:
            log.info("run_end_cancelled run_id=%s attempt=%s action=%s", run_id, attempt, action)
            return overruled(action)
        if own is None:
            log.warning("run_finalize_refused run_id=%s attempt=%s", run_id, attempt)
            return REFUSED
        log.info("run_end_found_committed run_id=%s attempt=%s", run_id, attempt)
        return None

    async def finish_rolled_back(
        self,
        run: RunRecord,
        attempt: int,
        status: RunStatus,
        state: threads_db.ThreadState,
        error: Any = None,
    ) -> bool:
        """Record a rolled-back run's end: the row goes, the thread gets `state`."""
        run_id = run.run_id

        async def work(session: AsyncConnection) -> bool:
            rolled_back = CancelAction.ROLLBACK
            if not await attempts_db.finish_run(
                session, run_id, attempt, status, None, None, rolled_back
            ):
                return False
            await runs_db.delete_run(session, run_id)
            await threads_db.set_state_fields(
                session, state, busy_if_pending=True, ending_run=run_id
            )
            await self._endings.owe_webhook(session, run, status, error, state.values)
            return True

        return await self._transactions.transaction(work, run.thread_id)

    async def release(self, run_id: str, attempt: int, counted: bool = False) -> FinalWrite:
        """Hand a running run back to pending, if `attempt` still holds it (REFUSED when it
        does not) and no cancel was requested (OVERRULED by that cancel's stop, for the
        attempt to end the run as it asks)."""

        async def work(session: AsyncConnection) -> FinalWrite:
            if await attempts_db.release_run(session, run_id, attempt, counted):
                return DONE
            action = await attempts_db.cancel_requested(session, run_id, attempt)
            return overruled(action) if action else REFUSED

        return await self._transactions.atomic(work)

    async def cancel(self, run: RunRecord, action: CancelAction) -> Stopped:
        """Cancel an active run: one not started ends at once, a running one is flagged (the
        stronger stop stands) and told; RunEndedError when it ended first (`RunStops`)."""
        return await self._stops.cancel(run, action)

    async def delete_run(self, thread_id: str, run_id: str) -> None:
        """Delete a run; one still executing is stopped and records nothing more."""
        await self._stops.delete_run(thread_id, run_id)

    async def delete_thread(self, thread_id: str) -> list[RunRecord] | None:
        """Delete a thread, its runs and its checkpoints; returns its active runs (stopped
        here), or None when there is no such thread."""
        return await self._stops.delete_thread(thread_id)

    async def requeue_expired(
        self,
        max_attempts: int,
        every_lease: bool = False,
        push: bool = True,
        gone: Sequence[str] = (),
    ) -> Recovered:
        """Runs whose lease expired, or whose owner is in `gone` (instances known dead), go
        back to pending (pushed when `push`), or end (cancelled, or out of retries); returns
        them (see `recovery_db.requeue_expired`)."""

        async def work(session: AsyncConnection) -> Recovered:
            recovered = await recovery_db.requeue_expired(session, max_attempts, every_lease, gone)
            for run in recovered.ended:
                error = run.error if run.status == RunStatus.ERROR else None
                await self._endings.owe_webhook(session, run, run.status, error)
            return recovered

        recovered = await self._transactions.transaction(work)
        for place in recovered.requeued:
            log.warning("run_recovered run_id=%s now=pending", place.run_id)
            self._metrics.runs_reaped.labels(RunStatus.PENDING.value).inc()
            if push:
                await self._queue.push(place.run_id, 0.0, place.priority, place.fairness_group)
        for run in recovered.ended:
            log.warning("run_recovered run_id=%s now=%s", run.run_id, run.status.value)
            self._metrics.runs_reaped.labels(run.status.value).inc()
            if run.status == RunStatus.INTERRUPTED:
                await self._end_cancelled(run)
            else:
                # The same reason the run row records, so streams and /join agree.
                await self.end(run, RunStatus.ERROR, error=run.error)
        return recovered

    async def _end_cancelled(self, run: RunRecord) -> None:
        if run.cancel_action == CancelAction.ROLLBACK:
            await delete_run_checkpoints(self._checkpointer, run.thread_id, run.run_id)
            await self._transactions.transaction(
                lambda s: runs_db.delete_run(s, run.run_id), run.thread_id
            )
        await self.end(run, RunStatus.INTERRUPTED)

    # --- threads without a run ------------------------------------------------------------

    async def create_thread(
        self, session: AsyncConnection, thread: NewThread, *, failed: bool = False
    ) -> ThreadRecord | None:
        """In the caller's transaction: insert a thread that has no run (created on its own,
        or a copy), `idle`, or `error` when it copies a thread whose last run failed. None,
        with nothing written, when the thread exists."""
        status = ThreadStatus.ERROR if failed else ThreadStatus.IDLE
        return await threads_db.insert_thread(session, thread_row(thread, status))

    async def record_thread_state(
        self, session: AsyncConnection, state: threads_db.ThreadState
    ) -> None:
        """In the caller's transaction: store the state of a thread no run is active on (a
        state update, supersteps, a copy), its status `idle`, `interrupted` or `error`."""
        if state.status not in _RESTING_THREAD:
            raise ValueError(f"a thread with no active run is never {state.status!r}")
        await threads_db.set_state_fields(session, state)

    # --- ending a run (after its end is committed: runyard/lifecycle/endings.py) --------------

    async def end(self, run: EndedRun, status: RunStatus, **how: Any) -> None:
        """Everything that follows the committed end of `run` (`RunEndings.end`)."""
        await self._endings.end(run, status, **how)

    async def close_stream(self, run_id: str) -> None:
        """End the stream of a run deleted with its thread, and wake its waiters."""
        await self._endings.close_stream(run_id)

    async def forget(self, run_id: str) -> None:
        """Drop a deleted run's events (or a deleted thread's state log); wake its waiters."""
        await self._endings.forget(run_id)
