"""The one place a run is finalized: status, output, thread state, last events, wake-ups."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.db import runs as runs_db
from app.db import threads as threads_db
from app.db.dialect import database_now
from app.domain.status import RunStatus, ThreadStatus
from app.graphs.checkpointer import delete_run_checkpoints
from app.graphs.serialize import dumps, to_jsonable

if TYPE_CHECKING:
    from app.runtime import Runtime

log = logging.getLogger("runyard.worker")


@dataclass
class Outcome:
    """How a run's execution ended."""

    status: RunStatus
    error: dict[str, Any] | None = None
    rollback: bool = False


@dataclass
class ThreadSnapshot:
    """What the thread row stores after a run: latest values, interrupts, whether it paused."""

    values: Any
    interrupts: dict[str, Any]
    has_next: bool


async def read_thread_snapshot(runtime: Runtime, graph_id: str, thread_id: str) -> ThreadSnapshot:
    """Values, pending interrupts (task id → list) and `next` from the thread's checkpoint."""
    graph = await runtime.graphs.get(graph_id).build({})
    bound = graph.copy(update={"checkpointer": runtime.checkpointer})
    state = await bound.aget_state({"configurable": {"thread_id": thread_id}})
    interrupts = {
        task.id: to_jsonable(list(task.interrupts)) for task in state.tasks if task.interrupts
    }
    return ThreadSnapshot(to_jsonable(state.values), interrupts, bool(state.next))


async def finalize_run(
    runtime: Runtime, run: dict[str, Any], attempt: int, outcome: Outcome
) -> bool:
    """Record the outcome if `attempt` still holds the run, then wake everyone who waits."""
    run_id, thread_id = run["run_id"], run["thread_id"]
    kwargs = run["kwargs"]
    if outcome.rollback:
        await delete_run_checkpoints(runtime.checkpointer, thread_id, run_id)
    snapshot = await read_thread_snapshot(runtime, kwargs["graph_id"], thread_id)
    output = snapshot.values if outcome.status == RunStatus.SUCCESS else None
    async with runtime.sessions() as session, session.begin():
        held = await runs_db.finish_run(
            session, run_id, attempt, outcome.status, output, outcome.error
        )
        if not held:
            log.warning("run_finalize_refused run_id=%s attempt=%s", run_id, attempt)
            return False
        if outcome.rollback:
            await runs_db.delete_run(session, run_id)
        upcoming = await runs_db.next_pending_run(session, thread_id)
        await threads_db.set_state_fields(
            session,
            thread_id,
            status=_thread_status(outcome, snapshot, upcoming is not None),
            values=snapshot.values,
            interrupts=snapshot.interrupts,
            error=outcome.error if outcome.status in (RunStatus.ERROR, RunStatus.TIMEOUT) else None,
        )
    log.info("run_finished run_id=%s attempt=%s status=%s", run_id, attempt, outcome.status)
    runtime.metrics.runs_finished.labels(outcome.status.value).inc()
    try:
        if outcome.error is not None:
            await runtime.broker.publish(run_id, "error", dumps(outcome.error), attempt)
        await runtime.broker.publish(run_id, "end", "null", attempt)
        await runtime.broker.finish(run_id, attempt)
    except Exception:
        # The outcome is committed; a subscriber that misses the end re-checks the run.
        log.warning("run_final_events_failed run_id=%s", run_id, exc_info=True)
    await _signal_done(runtime, run_id)
    # Read again after commit: a run enqueued while we finalized must not be stranded.
    async with runtime.sessions() as session:
        upcoming = await runs_db.next_pending_run(session, thread_id)
        now = await database_now(session) if upcoming is not None else None
    if upcoming is not None:
        await runtime.queue.push(upcoming["run_id"], _delay(upcoming["scheduled_at"], now))
    if run.get("webhook"):
        payload = {**_public(run), "status": outcome.status.value, "values": snapshot.values}
        if outcome.error is not None:
            payload["error"] = outcome.error
        runtime.webhooks.send(run["webhook"], payload)
    if run.get("temporary") and run.get("on_completion", "delete") == "delete":
        await delete_temporary_thread(runtime, thread_id)
    return True


async def _signal_done(runtime: Runtime, run_id: str) -> None:
    try:
        await runtime.broker.signal_done(run_id)
    except Exception:
        log.warning("run_done_signal_failed run_id=%s", run_id, exc_info=True)


async def delete_temporary_thread(runtime: Runtime, thread_id: str) -> None:
    """Remove a stateless run's thread, its runs and its checkpoints."""
    async with runtime.sessions() as session, session.begin():
        await threads_db.delete_thread(session, thread_id)
    await runtime.checkpointer.adelete_thread(thread_id)


def _thread_status(outcome: Outcome, snapshot: ThreadSnapshot, more_pending: bool) -> str:
    if more_pending:
        return ThreadStatus.BUSY.value
    if outcome.status in (RunStatus.ERROR, RunStatus.TIMEOUT):
        return ThreadStatus.ERROR.value
    if snapshot.interrupts or snapshot.has_next:
        return ThreadStatus.INTERRUPTED.value
    return ThreadStatus.IDLE.value


def _delay(scheduled_at: datetime | None, now: datetime | None) -> float:
    if scheduled_at is None or now is None:
        return 0.0
    return max(0.0, (scheduled_at - now).total_seconds())


def _public(run: dict[str, Any]) -> dict[str, Any]:
    keys = ("run_id", "thread_id", "assistant_id", "metadata", "kwargs", "multitask_strategy")
    out = {k: to_jsonable(run.get(k)) for k in keys}
    for stamp in ("created_at", "updated_at"):
        value = run.get(stamp)
        out[stamp] = value.isoformat() if value is not None else None
    return out
