"""The one way a run ends once its terminal status is committed, whoever ended it.

Owned by the lifecycle (runyard/lifecycle/machine.py), which ends every run through it: finalize
(the attempt's own outcome), the reaper (a cancelled run whose worker was lost, a run out
of retries) and cancel of a pending run, with the same steps: the last events (`error` if
any, then `end`) and the completion signal, the dispatch of the thread's next run, the
webhook, and the removal of a stateless run's temporary thread.

Everything here happens after the database committed the run's end, so nothing here may
turn that end into a failure: Redis side effects are best effort (logged; a subscriber
that misses the end re-checks the run, a waiter re-checks at its idle tick, and the
sweeper re-pushes a run whose queue push was lost).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from datetime import datetime
from typing import Any, Protocol

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy.ext.asyncio import AsyncConnection

from runyard.db import run_attempts as attempts_db
from runyard.db import threads as threads_db
from runyard.db.dialect import database_now
from runyard.db.engine import Sessions
from runyard.domain.encryption_context import CONTEXT_KEY
from runyard.domain.run import EndedRun, RunRecord
from runyard.domain.status import RunStatus
from runyard.graphs.serialize import dumps, to_jsonable
from runyard.observability.metrics import Metrics
from runyard.queue.run_queue import RunQueue
from runyard.streaming.broker import EventBroker

log = logging.getLogger("runyard.lifecycle")

# `values` not given: the webhook's payload reads the thread's values from its row.
UNREAD: Any = object()


class WebhookSink(Protocol):
    """Where a finished run's webhook goes (runyard/worker/webhooks.py sends it)."""

    async def record(self, session: AsyncConnection, url: str, payload: dict[str, Any]) -> None:
        """In the run's ending transaction: one POST of `payload` to `url` is owed."""
        ...

    def start(self, run_id: str) -> None:
        """Once that transaction committed: deliver what it recorded, in the background."""
        ...


class RunEndings:
    """Ends runs whose terminal status is committed (see the module)."""

    def __init__(
        self,
        broker: EventBroker,
        queue: RunQueue,
        webhooks: WebhookSink,
        autocommit: Sessions,
        checkpointer: BaseCheckpointSaver,
        metrics: Metrics,
        serial: asyncio.Lock | None,
    ) -> None:
        self._broker = broker
        self._queue = queue
        self._webhooks = webhooks
        self._autocommit = autocommit
        self._checkpointer = checkpointer
        self._metrics = metrics
        # The lifecycle's lock on SQLite: deleting a temporary thread is a transition too.
        self._serial = serial

    async def end(
        self,
        run: EndedRun,
        status: RunStatus,
        *,
        error: dict[str, Any] | None = None,
        attempt: int | None = None,
        finished: attempts_db.Finished | None = None,
    ) -> None:
        """Everything that follows the committed end of `run` (a run row) with `status`.

        `attempt` fences the last events (the attempt that ended the run itself);
        `finished`, when the finish statement already read the thread's next run. The
        webhook was recorded by the ending transaction (`owe_webhook`).
        """
        run_id, thread_id = run.run_id, run.thread_id
        log.info("run_finished run_id=%s attempt=%s status=%s", run_id, attempt, status)
        self._metrics.runs_finished.labels(status.value).inc()
        last_events = [("error", dumps(error))] if error is not None else []
        try:
            await self._broker.finish(
                run_id, attempt, [*last_events, ("end", "null")], signal_done=True
            )
        except Exception:
            log.warning("run_final_events_failed run_id=%s", run_id, exc_info=True)
            await self.quietly(self._broker.signal_done(run_id), "run_done_signal_failed", run_id)
        # A place under its group's cap may have freed: the group's next run goes now.
        await self.quietly(self._queue.lift(run.fairness_group), "queue_lift_failed", run_id)
        deleting = run.deletes_thread
        if not deleting:
            # A thread about to be deleted takes its runs with it: nothing to dispatch there.
            dispatch = self.dispatch_next(thread_id, finished)
            await self.quietly(dispatch, "run_dispatch_failed", run_id)
        if run.webhook:
            # Recorded with the end itself (`owe_webhook`): its first attempt starts here.
            self._webhooks.start(run_id)
        if deleting:
            await self.quietly(
                self.delete_temporary_thread(thread_id), "temporary_thread_not_deleted", run_id
            )

    async def close_stream(self, run_id: str) -> None:
        """End the stream of a run that was deleted with its thread, and wake its waiters."""
        try:
            await self._broker.finish(run_id, signal_done=True)
        except Exception:
            log.warning("run_final_events_failed run_id=%s", run_id, exc_info=True)
            await self.quietly(self._broker.signal_done(run_id), "run_done_signal_failed", run_id)

    async def forget(self, run_id: str) -> None:
        """Drop a deleted run's events (or a deleted thread's state log) and wake its waiters
        (who then find it gone); best effort once the deletion is committed."""
        await self.quietly(self._broker.forget(run_id), "run_events_not_forgotten", run_id)
        await self.quietly(self._broker.signal_done(run_id), "run_done_signal_failed", run_id)

    async def delete_temporary_thread(self, thread_id: str) -> None:
        """Remove a stateless run's thread, its runs and its checkpoints."""
        # One statement (runs go by foreign key, after the thread row): no transaction.
        if self._serial is None:
            await self._delete_thread_row(thread_id)
        else:
            async with self._serial:
                await self._delete_thread_row(thread_id)
        await self._checkpointer.adelete_thread(thread_id)

    async def _delete_thread_row(self, thread_id: str) -> None:
        async with self._autocommit() as session:
            await threads_db.delete_thread(session, thread_id)

    async def dispatch_next(
        self, thread_id: str, finished: attempts_db.Finished | None = None
    ) -> None:
        """Queue the thread's next due run, if one waits, once a transition committed."""
        if finished is not None and finished.upcoming_known:
            upcoming, now = finished.upcoming, finished.now
        else:
            # Read after the commit: a run enqueued meanwhile must not be stranded.
            async with self._autocommit() as session:
                upcoming = await attempts_db.next_pending_run(session, thread_id)
                now = await database_now(session) if upcoming is not None else None
        if upcoming is not None:
            delay = _delay(upcoming.scheduled_at, now)
            await self._queue.push(
                upcoming.run_id, delay, upcoming.priority, upcoming.fairness_group
            )

    async def owe_webhook(
        self,
        session: AsyncConnection,
        run: EndedRun,
        status: RunStatus,
        error: Any = None,
        values: Any = UNREAD,
    ) -> None:
        """In the transaction that ends `run`: its webhook's delivery is owed from that
        commit (`values`, the thread's state, read from its row when not given)."""
        if not run.webhook:
            return
        if values is UNREAD:
            thread = await threads_db.get_thread(session, run.thread_id)
            values = thread.values if thread is not None else None
        payload = {**_public(run), "status": status.value, "values": values}
        if error is not None:
            payload["error"] = error
        await self._webhooks.record(session, run.webhook, payload)

    async def quietly(self, step: Awaitable[Any], event: str, run_id: str) -> None:
        """A step after the commit: its failure is logged, never raised."""
        try:
            await step
        except Exception:
            log.warning("%s run_id=%s", event, run_id, exc_info=True)


def _delay(scheduled_at: datetime | None, now: datetime | None) -> float:
    if scheduled_at is None or now is None:
        return 0.0
    return max(0.0, (scheduled_at - now).total_seconds())


def _public(run: EndedRun) -> dict[str, Any]:
    """The run as its webhook's payload shows it (JSON columns a run ended unread left
    unread are null)."""
    kwargs = to_jsonable(run.kwargs) if isinstance(run, RunRecord) else None
    if isinstance(kwargs, dict):
        # The creator's encryption context stays with the run (encryption.path).
        kwargs.pop(CONTEXT_KEY, None)
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "assistant_id": run.assistant_id,
        "metadata": to_jsonable(run.metadata) if isinstance(run, RunRecord) else None,
        "kwargs": kwargs,
        "multitask_strategy": run.multitask_strategy,
        "created_at": run.created_at.isoformat(),
        "updated_at": run.updated_at.isoformat(),
    }
