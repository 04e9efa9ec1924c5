"""The one place a run is finalized: status, output, thread state, last events, wake-ups."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph.pregel import Pregel

from runyard.db import runs as runs_db
from runyard.db import threads as threads_db
from runyard.db.dialect import database_now
from runyard.db.threads import ThreadState
from runyard.domain.status import RunStatus, ThreadStatus
from runyard.graphs.checkpointer import delete_run_checkpoints
from runyard.graphs.serialize import dumps, to_jsonable

if TYPE_CHECKING:
    from runyard.runtime import Runtime

log = logging.getLogger("runyard.worker")


@dataclass
class ThreadSnapshot:
    """What the thread row stores after a run: latest values, interrupts, whether it paused."""

    values: Any
    interrupts: dict[str, Any]
    has_next: bool


@dataclass
class Outcome:
    """How a run's execution ended.

    `graph` is the graph the run executed (bound to a checkpointer), if it was built;
    `snapshot` the thread's state when the run's own stream already told it.
    """

    status: RunStatus
    error: dict[str, Any] | None = None
    rollback: bool = False
    graph: Pregel | None = None
    snapshot: ThreadSnapshot | None = None


async def read_thread_snapshot(
    runtime: Runtime, graph_id: str, thread_id: str, graph: Pregel | None = None
) -> ThreadSnapshot:
    """Values, pending interrupts (task id → list) and `next` from the thread's checkpoint.

    `graph`, when given, is used as it is (it must have a checkpointer); otherwise the
    graph is built.
    """
    if graph is None:
        built = await runtime.graphs.get(graph_id).build({}, "threads.read", runtime.store)
        graph = built.copy(update={"checkpointer": runtime.checkpointer})
    state = await graph.aget_state({"configurable": {"thread_id": thread_id}})
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
    finished: runs_db.Finished | None = None
    if outcome.rollback:
        snapshot = await _record_rollback(runtime, run, attempt, outcome)
        if snapshot is None:
            return False
    else:
        snapshot = outcome.snapshot or await read_thread_snapshot(
            runtime, kwargs["graph_id"], thread_id, outcome.graph
        )
        output = _result(snapshot) if outcome.status == RunStatus.SUCCESS else None
        state = _thread_state(thread_id, outcome, snapshot)
        async with runtime.atomic() as session:
            finished = await runs_db.finish_run_with_state(
                session, run_id, attempt, outcome.status, output, outcome.error, state
            )
        if not finished.held:
            log.warning("run_finalize_refused run_id=%s attempt=%s", run_id, attempt)
            return False
        if not finished.thread_written:
            # A run was committed on the thread while this one ended: write with a fresh view.
            async with runtime.autocommit() as session:
                await threads_db.set_state_fields(session, state, busy_if_pending=True)
    log.info("run_finished run_id=%s attempt=%s status=%s", run_id, attempt, outcome.status)
    runtime.metrics.runs_finished.labels(outcome.status.value).inc()
    last_events = [("error", dumps(outcome.error))] if outcome.error is not None else []
    try:
        await runtime.broker.finish(
            run_id, attempt, [*last_events, ("end", "null")], signal_done=True
        )
    except Exception:
        # The outcome is committed; a subscriber that misses the end re-checks the run.
        log.warning("run_final_events_failed run_id=%s", run_id, exc_info=True)
        await _signal_done(runtime, run_id)
    deleting = bool(run.get("temporary")) and run.get("on_completion", "delete") == "delete"
    if not deleting:
        # A thread about to be deleted takes its runs with it: nothing to dispatch there.
        await _dispatch_next(runtime, thread_id, finished)
    if run.get("webhook"):
        payload = {**_public(run), "status": outcome.status.value, "values": snapshot.values}
        if outcome.error is not None:
            payload["error"] = outcome.error
        runtime.webhooks.send(run["webhook"], payload)
    if deleting:
        await delete_temporary_thread(runtime, thread_id)
    return True


async def _dispatch_next(
    runtime: Runtime, thread_id: str, finished: runs_db.Finished | None
) -> None:
    """Queue the thread's next run, if one waits, once this run's end is committed."""
    if finished is not None and finished.upcoming_known:
        upcoming, now = finished.upcoming, finished.now
    else:
        # Read after the commit: a run enqueued while this one ended must not be stranded.
        async with runtime.autocommit() as session:
            upcoming = await runs_db.next_pending_run(session, thread_id)
            now = await database_now(session) if upcoming is not None else None
    if upcoming is not None:
        await runtime.queue.push(upcoming["run_id"], _delay(upcoming["scheduled_at"], now))


async def _signal_done(runtime: Runtime, run_id: str) -> None:
    try:
        await runtime.broker.signal_done(run_id)
    except Exception:
        log.warning("run_done_signal_failed run_id=%s", run_id, exc_info=True)


async def delete_temporary_thread(runtime: Runtime, thread_id: str) -> None:
    """Remove a stateless run's thread, its runs and its checkpoints."""
    # One statement (runs go by foreign key): no explicit transaction needed.
    async with runtime.autocommit() as session:
        await threads_db.delete_thread(session, thread_id)
    await runtime.checkpointer.adelete_thread(thread_id)


async def _record_rollback(
    runtime: Runtime, run: dict[str, Any], attempt: int, outcome: Outcome
) -> ThreadSnapshot | None:
    """End a rolled-back run: its checkpoints go, then the row, in a fenced write.

    The run holds its thread (it is still `running`) until the final write, so no run
    queued behind it can start from the checkpoints being removed. Only an attempt that
    still holds the run removes them: it checks just before; None when it does not hold
    the run (then, or at the final write).
    """
    run_id, thread_id = run["run_id"], run["thread_id"]
    async with runtime.autocommit() as session:
        holds = await runs_db.still_holds(session, run_id, attempt)
    if holds:
        await delete_run_checkpoints(runtime.checkpointer, thread_id, run_id)
        snapshot = await read_thread_snapshot(
            runtime, run["kwargs"]["graph_id"], thread_id, outcome.graph
        )
        async with runtime.sessions() as session, session.begin():
            held = await runs_db.finish_run(session, run_id, attempt, outcome.status, None, None)
            if held:
                await runs_db.delete_run(session, run_id)
                state = _thread_state(thread_id, outcome, snapshot)
                await threads_db.set_state_fields(session, state, busy_if_pending=True)
                return snapshot
    log.warning("run_finalize_refused run_id=%s attempt=%s", run_id, attempt)
    return None


def _thread_state(thread_id: str, outcome: Outcome, snapshot: ThreadSnapshot) -> ThreadState:
    failed = outcome.status in (RunStatus.ERROR, RunStatus.TIMEOUT)
    return ThreadState(
        thread_id,
        _thread_status(outcome, snapshot),
        snapshot.values,
        snapshot.interrupts,
        outcome.error if failed else None,
    )


def _result(snapshot: ThreadSnapshot) -> Any:
    """What /join and /wait answer for a successful run: its interrupts, or the values."""
    interrupts = [item for items in snapshot.interrupts.values() for item in items]
    return {"__interrupt__": interrupts} if interrupts else snapshot.values


def _thread_status(outcome: Outcome, snapshot: ThreadSnapshot) -> str:
    """The thread's status after the run, unless another run is pending (then busy)."""
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
